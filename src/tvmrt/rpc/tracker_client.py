"""A client of TVM's RPC tracker (``tvm.rpc.TrackerSession``): summaries and requests.

The tracker speaks ``i32 magic`` once, then frames of ``i32 len`` + JSON. A request
``[4, key, "", priority]`` is answered ``[0, [host, port, match_key]]`` once a server of
that key is free; the client then connects to that server with the match key.
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from tvmrt.error import RPCError, RPCProtocolError
from tvmrt.rpc.wire import TRACKER_MAGIC, recv_exact

_S = TypeVar("_S")

__all__ = ["TrackerSession", "MAX_TRACKER_MESSAGE"]

# tracker codes (python/tvm/rpc/base.py TrackerCode)
_FAIL, _SUCCESS, _REQUEST, _SUMMARY = -1, 0, 4, 6
MAX_TRACKER_MESSAGE = 1 << 24
"""Largest tracker reply the client reads (bytes); a larger length is a protocol error."""


class TrackerSession(Generic[_S]):
    """A connection to a tracker; made by :func:`tvmrt.rpc.connect_tracker`.

    ``connect`` opens the session with the server the tracker names (``tvmrt.rpc.connect``).
    """

    def __init__(self, addr: tuple[str, int], connect: Callable[..., _S]) -> None:
        self._addr = addr
        self._connect_server = connect
        self._sock: socket.socket | None = None
        self._connect()

    def __del__(self) -> None:
        self.close()

    def _connect(self) -> None:
        try:
            sock = socket.create_connection(self._addr, timeout=60)
        except OSError as exc:
            raise RPCError(f"cannot connect to the RPC tracker at {self._addr}: {exc}") from exc
        try:
            sock.sendall(struct.pack("<i", TRACKER_MAGIC))
            (magic,) = struct.unpack("<i", recv_exact(sock, 4, "the tracker's magic"))
        except BaseException:
            sock.close()
            raise
        if magic != TRACKER_MAGIC:
            sock.close()
            raise RPCProtocolError(f"{self._addr} is not an RPC tracker (magic {magic:#x})")
        sock.settimeout(None)
        self._sock = sock

    def close(self) -> None:
        """Close the tracker connection."""
        sock, self._sock = getattr(self, "_sock", None), None
        if sock is not None:
            sock.close()

    def _ask(self, message: list[Any]) -> Any:
        if self._sock is None:
            self._connect()
        assert self._sock is not None
        data = json.dumps(message).encode()
        self._sock.sendall(struct.pack("<i", len(data)) + data)
        (size,) = struct.unpack("<i", recv_exact(self._sock, 4, "a tracker reply"))
        if not 0 <= size <= MAX_TRACKER_MESSAGE:
            self.close()
            raise RPCProtocolError(
                f"tracker reply of {size} bytes: expected 0 to {MAX_TRACKER_MESSAGE}"
            )
        try:
            return json.loads(recv_exact(self._sock, size, "a tracker reply"))
        except ValueError as exc:
            self.close()
            raise RPCProtocolError(f"the tracker at {self._addr} sent invalid JSON: {exc}") from exc

    def summary(self) -> dict[str, Any]:
        """The tracker's summary: ``{"queue_info": ..., "server_info": [...]}``."""
        value = self._ask([_SUMMARY])
        if not (isinstance(value, list) and len(value) == 2 and value[0] == _SUCCESS):
            raise RPCProtocolError(f"Invalid return value {value!r}")
        if not isinstance(value[1], dict):
            raise RPCProtocolError(f"tracker summary is not an object: {value[1]!r}")
        return value[1]

    def text_summary(self) -> str:
        """The summary as TVM's ``python -m tvm.exec.query_rpc_tracker`` prints it."""
        data = self.summary()
        lines = ["Server List", "-" * 30, "server-address           key", "-" * 30]
        totals: dict[str, int] = {}
        for item in sorted(data.get("server_info", []), key=lambda x: str(x.get("key"))):
            addr = ":".join(map(str, item.get("addr", [])))
            lines.append(f"{addr:>21}    {item.get('key')}")
            key = str(item.get("key", "")).split(":")[-1]
            totals[key] = totals.get(key, 0) + 1
        lines += ["-" * 30, "", "Queue Status"]
        queue = data.get("queue_info", {})
        width = max((len(k) for k in queue), default=0)
        title = f"{'key':<{width}s}   total  free  pending"
        lines += ["-" * (len(title) + 1), title, "-" * (len(title) + 1)]
        for key in sorted(queue):
            total, info = totals.get(key, 0), queue[key]
            if total or info.get("pending"):
                lines.append(
                    f"{key:<{width}}   {total:<5d}  {info['free']:<4d}  {info['pending']:<7d}"
                )
        lines.append("-" * (len(title) + 1))
        return "\n".join(lines) + "\n"

    def request(
        self,
        key: str,
        priority: int = 1,
        session_timeout: float = 0,
        max_retry: int = 5,
        session_constructor_args: list[object] | None = None,
    ) -> _S:
        """A session with a free server of ``key``; waits in the tracker's queue until one is.

        Raises
        ------
        RPCError
            After ``max_retry`` failed attempts (the last error is named).
        """
        last: Exception | None = None
        for _ in range(max(1, max_retry)):
            try:
                value = self._ask([_REQUEST, key, "", priority])
                if not (isinstance(value, list) and len(value) == 2 and value[0] == _SUCCESS):
                    raise RPCProtocolError(f"Invalid return value {value!r}")
                url, port, match_key = value[1]
                return self._connect_server(
                    url,
                    port,
                    match_key,
                    session_timeout,
                    session_constructor_args=session_constructor_args,
                )
            except OSError as exc:
                self.close()
                last = exc
            except RPCError as exc:
                last = exc
        raise RPCError(f"Cannot request {key} after {max_retry} retry, last_error:{last}")
