"""TVM's ``TrackerSession``: a client's connection to an RPC tracker.

The tracker protocol itself (frames, codes) is :mod:`tvmrt.rpc.tracker_client`; this is
TVM's Python face over it: ``summary``, ``text_summary`` and ``request(key)``, which
waits in the tracker's queue for a free server of that key and opens a session with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from tvmrt.error import RPCError, RPCProtocolError, RPCSessionTimeoutError
from tvmrt.rpc.tracker_client import TrackerConnection

__all__ = ["TrackerSession"]


def _secs(timeout: float | None) -> str:
    return "the system's limit" if timeout is None else f"{timeout:g} s"


_S = TypeVar("_S")


class TrackerSession(Generic[_S]):
    """A connection to a tracker; made by :func:`tvmrt.rpc.connect_tracker`.

    ``connect`` opens the session with the server the tracker names (``tvmrt.rpc.connect``).
    ``timeout`` (tvmrt's) bounds connecting to the tracker, its handshake and each answer
    but a request's (which waits in the queue: ``request(wait_timeout=...)``).
    """

    def __init__(
        self, addr: tuple[str, int], connect: Callable[..., _S], timeout: float | None = 30
    ) -> None:
        self._addr = addr
        self._connect_server = connect
        self._timeout = timeout
        self._conn: TrackerConnection | None = None
        self._connect()

    def __del__(self) -> None:
        self.close()

    def _where(self) -> str:
        return f"the RPC tracker at {self._addr[0]}:{self._addr[1]}"

    def _connect(self) -> TrackerConnection:
        try:
            conn = TrackerConnection(self._addr, self._timeout)
        except TimeoutError:
            raise RPCSessionTimeoutError(
                f"{self._where()} sent no handshake reply within {_secs(self._timeout)}: is an "
                "RPC tracker listening there (not a server or another service)?"
            ) from None
        except OSError as exc:
            raise RPCError(f"cannot connect to {self._where()}: {exc}") from exc
        conn.sock.settimeout(self._timeout)
        self._conn = conn
        return conn

    def close(self) -> None:
        """Close the tracker connection."""
        conn, self._conn = getattr(self, "_conn", None), None
        if conn is not None:
            conn.close()

    def summary(self) -> dict[str, Any]:
        """The tracker's summary: ``{"queue_info": {...}, "server_info": [...]}``."""
        conn = self._conn or self._connect()
        conn.sock.settimeout(self._timeout)
        try:
            return conn.summary()
        except TimeoutError:
            self.close()
            raise RPCSessionTimeoutError(
                f"{self._where()} sent no answer to SUMMARY within {_secs(self._timeout)}"
            ) from None

    def text_summary(self) -> str:
        """The summary as a table of servers and queues (TVM's ``text_summary``)."""
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
        wait_timeout: float | None = None,
    ) -> _S:
        """A session with a free server of ``key``; waits until the tracker has one.

        ``wait_timeout`` (seconds; tvmrt's, TVM has none) bounds that wait: ``None`` waits
        as long as it takes, as TVM does.

        Raises
        ------
        RPCError
            After ``max_retry`` failed attempts (the last error is named), or when no
            server of ``key`` came free within ``wait_timeout``.
        """
        last: Exception | None = None
        for _ in range(max(1, max_retry)):
            try:
                conn = self._conn or self._connect()
                conn.sock.settimeout(wait_timeout)
                try:
                    url, port, match_key = conn.request(key, priority)
                except TimeoutError:
                    self.close()
                    break
                return self._connect_server(
                    url,
                    port,
                    match_key,
                    session_timeout,
                    session_constructor_args=session_constructor_args,
                )
            except (OSError, RPCProtocolError) as exc:  # a broken or lying tracker: reconnect
                self.close()
                last = exc
            except RPCError as exc:
                last = exc
        else:
            raise RPCError(f"Cannot request {key} after {max_retry} retry, last_error:{last}")
        raise RPCError(
            f"no RPC server of key {key!r} came free within {wait_timeout:g} s "
            f"at the tracker {self._addr[0]}:{self._addr[1]}"
        )
