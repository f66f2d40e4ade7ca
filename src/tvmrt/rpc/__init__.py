"""TVM's RPC protocol: the wire codec, a client, a server for boards, and a tracker.

``wire`` frames packets and handshakes, ``codec`` encodes argument sequences in both
dialects (TVM <= 0.20 type codes, TVM >= 0.21 tvm-ffi type indices). The client is TVM's
``tvm.rpc`` face (``connect``, ``connect_tracker``, ``RPCSession``); it loads the runtime
and nothing above it. Nothing registers itself on import.
"""

from __future__ import annotations

from typing import Any

from tvmrt.rpc import base
from tvmrt.rpc.client import RPCSession, TrackerSession, connect, connect_tracker

__all__ = ["connect", "connect_tracker", "RPCSession", "TrackerSession", "LocalSession", "base"]


def __getattr__(name: str) -> Any:
    # LocalSession runs the server's functions here: imported when first asked for, so a
    # client does not load the server's side
    if name == "LocalSession":
        from tvmrt.rpc.local_session import LocalSession

        return LocalSession
    raise AttributeError(f"module 'tvmrt.rpc' has no attribute {name!r}")
