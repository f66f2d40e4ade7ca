"""TVM's tracker protocol from the peer's side: frames, codes, and a connection.

After the magic ``0x2F271`` (both ways) a tracker connection carries frames of ``i32
len`` + JSON (``python/tvm/rpc/base.py``). A server uses :meth:`TrackerConnection.update_info`,
:meth:`put` and :meth:`pending_matchkeys`; a client :meth:`summary` and :meth:`request`.
"""

from __future__ import annotations

import enum
import json
import socket
import struct
import time
from typing import Any

from tvmrt.error import RPCError, RPCProtocolError
from tvmrt.rpc import wire

__all__ = ["TrackerCode", "send_json", "recv_json", "TrackerConnection", "MAX_FRAME"]

MAX_FRAME = 1 << 20  # a tracker message is a short JSON list


class TrackerCode(enum.IntEnum):
    """Tracker message codes (TVM's ``TrackerCode``)."""

    FAIL = -1
    SUCCESS = 0
    PING = 1
    STOP = 2
    PUT = 3
    REQUEST = 4
    UPDATE_INFO = 5
    SUMMARY = 6
    GET_PENDING_MATCHKEYS = 7


def send_json(sock: socket.socket, data: Any) -> None:
    raw = json.dumps(data).encode()
    sock.sendall(struct.pack("<i", len(raw)) + raw)


def recv_json(sock: socket.socket) -> Any:
    """One frame's JSON value.

    Raises
    ------
    RPCProtocolError
        On a length outside ``[0, MAX_FRAME]`` or a body that is not JSON.
    """
    budget = sock.gettimeout()  # counts for the whole frame, however the peer trickles it
    by = None if budget is None else time.monotonic() + budget
    (size,) = struct.unpack("<i", wire.recv_exact(sock, 4, "a tracker frame", by))
    if not 0 <= size <= MAX_FRAME:
        raise RPCProtocolError(f"tracker frame of {size} bytes: expected 0 to {MAX_FRAME}")
    body = wire.recv_exact(sock, size, "a tracker frame", by)
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: deep nesting
        raise RPCProtocolError(f"tracker frame is not JSON: {body[:60]!r}") from None


class TrackerConnection:
    """A connection to a TVM (or tvmrt) tracker."""

    def __init__(self, addr: tuple[str, int], timeout: float | None = 30) -> None:
        self.sock = socket.create_connection(addr, timeout=timeout)
        try:
            self.sock.sendall(struct.pack("<i", wire.TRACKER_MAGIC))
            by = None if timeout is None else time.monotonic() + timeout
            head = wire.recv_exact(self.sock, 4, "the tracker handshake", by)
            (magic,) = struct.unpack("<i", head)
            if magic != wire.TRACKER_MAGIC:
                raise RPCProtocolError(
                    f"{addr[0]}:{addr[1]} is not an RPC tracker (magic {magic:#x})"
                )
        except BaseException:  # a failed handshake leaves no socket behind
            self.sock.close()
            raise

    def close(self) -> None:
        self.sock.close()

    def call(self, *message: Any) -> Any:
        send_json(self.sock, list(message))
        return recv_json(self.sock)

    def _ok(self, what: str, *message: Any) -> None:
        answer = self.call(*message)
        if answer != TrackerCode.SUCCESS:
            raise RPCError(f"tracker refused {what}: answered {answer!r}")

    def update_info(self, key: str, custom_addr: str | None, port: int) -> None:
        self._ok(
            "UPDATE_INFO",
            TrackerCode.UPDATE_INFO,
            {"key": "server:" + key, "addr": [custom_addr, port]},
        )

    def put(self, key: str, port: int, matchkey: str, custom_addr: str | None) -> None:
        self._ok("PUT", TrackerCode.PUT, key, [port, matchkey], custom_addr)

    def pending_matchkeys(self) -> list[str]:
        answer = self.call(TrackerCode.GET_PENDING_MATCHKEYS)
        if not isinstance(answer, list):
            raise RPCProtocolError(f"tracker answered {answer!r:.200} to GET_PENDING_MATCHKEYS")
        return [str(k) for k in answer]

    def summary(self) -> dict[str, Any]:
        answer = self.call(TrackerCode.SUMMARY)
        if not (
            isinstance(answer, list)
            and len(answer) == 2
            and answer[0] == TrackerCode.SUCCESS
            and isinstance(answer[1], dict)
        ):
            raise RPCProtocolError(f"tracker answered {answer!r:.200} to SUMMARY")
        return answer[1]

    def request(self, key: str, priority: int = 1) -> tuple[str, int, str]:
        """Wait for a free server of ``key``: ``(host, port, matchkey)``."""
        answer = self.call(TrackerCode.REQUEST, key, "", priority)
        if not (isinstance(answer, list) and len(answer) == 2 and answer[0] == TrackerCode.SUCCESS):
            raise RPCError(f"tracker answered {answer!r:.200} to REQUEST {key!r}")
        slot = answer[1]
        if not (
            isinstance(slot, list)
            and len(slot) == 3
            and isinstance(slot[0], str)
            and isinstance(slot[1], int)
            and not isinstance(slot[1], bool)
            and 0 < slot[1] < 65536
            and isinstance(slot[2], str)
        ):
            raise RPCProtocolError(
                f"tracker answered {slot!r:.200} to REQUEST {key!r}: expected [host, port, key]"
            )
        return slot[0], slot[1], slot[2]
