"""TVM's ``tvm.rpc.base``: the protocol's constants and the helpers its users call.

The magic numbers and codes are the wire's (:mod:`tvmrt.rpc.wire`) and the tracker's
(:class:`~tvmrt.rpc.tracker_client.TrackerCode`), under TVM's names; ``random_key`` and
``split_random_key`` make and split the match keys a server registers with a tracker.
"""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Container

from tvmrt.error import RPCError
from tvmrt.rpc.tracker_client import TrackerCode
from tvmrt.rpc.wire import RPC_CODE_DUPLICATE, RPC_CODE_MISMATCH, RPC_MAGIC, TRACKER_MAGIC

__all__ = [
    "RPC_MAGIC",
    "RPC_TRACKER_MAGIC",
    "RPC_CODE_SUCCESS",
    "RPC_CODE_DUPLICATE",
    "RPC_CODE_MISMATCH",
    "RPC_SESS_MASK",
    "TrackerCode",
    "random_key",
    "split_random_key",
    "connect_with_retry",
]

RPC_TRACKER_MAGIC = TRACKER_MAGIC
RPC_CODE_SUCCESS = RPC_MAGIC
RPC_SESS_MASK = 128


def random_key(prefix: str, delimiter: str = ":", cmap: Container[str] | None = None) -> str:
    """``prefix``, ``delimiter`` and a random number: a key not in ``cmap`` (TVM's)."""
    while True:
        key = f"{prefix}{delimiter}{random.random()}"
        if not cmap or key not in cmap:
            return key


def split_random_key(key: str, delimiter: str = ":") -> list[str]:
    """``[prefix, random part]`` of a key :func:`random_key` made."""
    return key.rsplit(delimiter, 1)


def connect_with_retry(
    addr: tuple[str, int], timeout: float = 60, retry_period: float = 5
) -> socket.socket:
    """A TCP connection to ``addr``, retried while it is refused, for up to ``timeout`` s.

    Raises
    ------
    RPCError
        If ``addr`` still refuses after ``timeout`` seconds (TVM raises ``RuntimeError``;
        this is one).
    """
    start = time.monotonic()
    while True:
        try:
            return socket.create_connection(addr)
        except ConnectionRefusedError:
            if time.monotonic() - start > timeout:
                raise RPCError(f"Failed to connect to server {addr}") from None
            time.sleep(retry_period)
