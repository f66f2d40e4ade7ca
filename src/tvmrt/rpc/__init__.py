"""TVM's RPC protocol: the wire codec, a client, a server for boards, and a tracker.

``wire`` frames packets and handshakes, ``codec`` encodes argument sequences in both
dialects (TVM <= 0.20 type codes, TVM >= 0.21 tvm-ffi type indices). The client is TVM's
``tvm.rpc`` face (``connect``, ``connect_tracker``, ``RPCSession``); it loads the runtime
and nothing above it. Nothing registers itself on import.
"""

from __future__ import annotations

from tvmrt.rpc import base
from tvmrt.rpc.client import RPCSession, TrackerSession, connect, connect_tracker
from tvmrt.rpc.local_session import LocalSession

__all__ = ["connect", "connect_tracker", "RPCSession", "TrackerSession", "LocalSession", "base"]
