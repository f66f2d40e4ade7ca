"""tvmrt's RPC tracker: TVM's ``python -m tvm.exec.rpc_tracker``, compatible both ways.

Servers (TVM's or tvmrt's) register free slots under a key with ``PUT``; clients ask for a
key with ``REQUEST`` and get the oldest free slot, highest priority first, or wait until
one is put (TVM's ``PriorityScheduler``). A slot is handed out once; its server puts a
fresh one after the session.

One thread serves every connection (``selectors``), and it never blocks on a peer: sockets
are non-blocking and each connection has its own write buffer. What one peer can hold is
bounded (:class:`TrackerLimits`); a peer that breaks the protocol in any way (bad magic, a
frame above the limit, JSON that is not a tracker message, numbers out of range, nesting
too deep, a handshake or frame not finished in time, a reply it does not read) is closed,
and only that peer. A key with no free slot and no waiting request is forgotten.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import json
import logging
import resource
import selectors
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from tvmrt.error import RPCProtocolError
from tvmrt.rpc import wire
from tvmrt.rpc.server import bind_port
from tvmrt.rpc.tracker_client import TrackerCode

__all__ = ["Tracker", "TrackerLimits"]

log = logging.getLogger("tvmrt.rpc.tracker")
_HEAD = struct.Struct("<i")


@dataclass(frozen=True)
class TrackerLimits:
    """What one peer may hold of the tracker (README, "Safety").

    ``max_conns`` open connections (the excess is accepted and closed at once; never more
    than the process's file limit less 32); ``max_frame`` one message; ``deadline_s`` the
    time to send the magic and to finish a frame once begun, and the time a reply may stay
    unread; ``max_out`` the unsent bytes of one connection (one reply at a time: a
    connection is not read while a reply is waiting); ``max_info`` one server's
    ``UPDATE_INFO`` (JSON bytes); ``max_key`` a key's length; ``max_keys`` the keys in use;
    ``max_per_conn`` the slots plus waiting requests of one connection.
    """

    max_conns: int = 1024
    max_frame: int = 64 << 10
    deadline_s: float = 10.0
    max_out: int = 4 << 20
    max_info: int = 512
    max_key: int = 128
    max_keys: int = 1024
    max_per_conn: int = 64


@dataclass(eq=False)
class _Conn:
    sock: socket.socket
    addr: tuple[str, int]
    since: float  # when the magic or the current frame began, or the reply became due
    buf: bytearray = field(default_factory=bytearray)
    out: bytearray = field(default_factory=bytearray)
    greeted: bool = False
    closed: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    pending: set[str] = field(default_factory=set)
    slots: list[_Slot] = field(default_factory=list)
    requests: int = 0
    keys: set[str] = field(default_factory=set)  # keys it put or requested


@dataclass(eq=False)
class _Slot:
    conn: _Conn
    host: str
    port: int
    matchkey: str
    key: str


@dataclass
class _Queue:
    slots: list[_Slot] = field(default_factory=list)
    requests: list[tuple[int, int, _Conn]] = field(default_factory=list)
    users: int = 0  # open connections that put or requested this key


def _int(value: Any, what: str) -> int:
    """A JSON number as a 32-bit int (Infinity, NaN, 1e400 and non-numbers are refused)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RPCProtocolError(f"tracker message: {what} {value!r} is not a number")
    if isinstance(value, float) and not value.is_integer():
        raise RPCProtocolError(f"tracker message: {what} {value!r} is not a whole number")
    number = int(value)
    if not -(1 << 31) <= number < 1 << 31:
        raise RPCProtocolError(f"tracker message: {what} {number} is not a 32-bit int")
    return number


class Tracker:
    """Listen on ``host:[port, port_end)``; :meth:`serve_forever` until :meth:`stop`."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 9190,
        port_end: int = 9199,
        stop_key: str = "",
        limits: TrackerLimits | None = None,
    ) -> None:
        self.sock, self.port = bind_port(host, port, port_end)
        self.sock.setblocking(False)
        self.stop_key = stop_key
        self.limits = limits or TrackerLimits()
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        self.max_conns = self.limits.max_conns
        if nofile != resource.RLIM_INFINITY:
            self.max_conns = max(1, min(self.max_conns, nofile - 32))
        self.queues: dict[str, _Queue] = {}
        self.conns: set[_Conn] = set()
        self._order = itertools.count()
        self._sel = selectors.DefaultSelector()
        self._sel.register(self.sock, selectors.EVENT_READ, None)
        self._listening = True
        self._resume_at = 0.0
        self._running = True

    def stop(self) -> None:
        self._running = False

    def serve_forever(self) -> None:
        try:
            while self._running:
                for key, events in self._sel.select(timeout=0.25):
                    if key.data is None:
                        self._accept()
                        continue
                    conn: _Conn = key.data
                    if events & selectors.EVENT_WRITE:
                        self._flush(conn)
                        if not conn.out and conn.buf and not conn.closed:
                            self._frames(conn)  # what arrived while a reply was waiting
                    if events & selectors.EVENT_READ and not conn.closed:
                        self._read(conn)
                self._sweep()
        finally:
            for conn in list(self.conns):
                self._close(conn)
            self._sel.close()
            self.sock.close()

    # -- connections ------------------------------------------------------------------
    def _accept(self) -> None:
        for _ in range(64):
            try:
                sock, addr = self.sock.accept()
            except BlockingIOError:
                return
            except OSError as exc:  # out of file descriptors: stop accepting a while
                log.warning("tracker cannot accept (%s); pausing for 1 s", exc)
                self._sel.unregister(self.sock)
                self._listening = False
                self._resume_at = time.monotonic() + 1.0
                return
            if len(self.conns) >= self.max_conns:
                log.warning("%d connections open: refused %s", len(self.conns), addr[:2])
                sock.close()
                continue
            sock.setblocking(False)
            conn = _Conn(sock, (addr[0], addr[1]), time.monotonic())
            self.conns.add(conn)
            self._sel.register(sock, selectors.EVENT_READ, conn)

    def _sweep(self) -> None:
        """Close peers past their deadline; listen again after a pause."""
        now = time.monotonic()
        if not self._listening and now >= self._resume_at:
            self._sel.register(self.sock, selectors.EVENT_READ, None)
            self._listening = True
        late = now - self.limits.deadline_s
        for conn in list(self.conns):
            if (conn.out or conn.buf or not conn.greeted) and conn.since < late:
                log.warning("tracker peer %s: %g s deadline passed", conn.addr, now - conn.since)
                self._close(conn)

    def _close(self, conn: _Conn) -> None:
        if conn.closed:
            return
        conn.closed = True
        self.conns.discard(conn)
        with contextlib.suppress(KeyError, ValueError):
            self._sel.unregister(conn.sock)
        conn.sock.close()
        conn.buf, conn.out = bytearray(), bytearray()
        for key in conn.keys:
            queue = self.queues.get(key)
            if queue is None:
                continue
            queue.slots = [s for s in queue.slots if s.conn is not conn]
            queue.requests = [r for r in queue.requests if r[2] is not conn]
            heapq.heapify(queue.requests)
            queue.users -= 1
            if queue.users <= 0:  # no open connection uses the key: forget it
                del self.queues[key]
        conn.slots.clear()
        conn.keys.clear()

    def _send(self, conn: _Conn, data: Any) -> None:
        if conn.closed:
            return
        raw = json.dumps(data).encode()
        if len(conn.out) + 4 + len(raw) > self.limits.max_out:
            log.warning("tracker peer %s does not read its replies: closing", conn.addr)
            self._close(conn)
            return
        if not conn.out:
            conn.since = time.monotonic()
        conn.out += _HEAD.pack(len(raw)) + raw
        self._flush(conn)

    def _flush(self, conn: _Conn) -> None:
        if conn.out:
            try:
                sent = conn.sock.send(conn.out)
            except BlockingIOError:
                sent = 0
            except OSError:
                self._close(conn)
                return
            del conn.out[:sent]
        # a connection with a reply waiting is not read: one reply at a time
        events = selectors.EVENT_WRITE if conn.out else selectors.EVENT_READ
        self._sel.modify(conn.sock, events, conn)

    def _read(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._close(conn)
            return
        if not conn.buf:
            conn.since = time.monotonic()
        conn.buf += data
        if not conn.greeted:
            if len(conn.buf) < 4:
                return
            (magic,) = _HEAD.unpack_from(conn.buf)
            if magic != wire.TRACKER_MAGIC:
                log.warning("bad tracker magic %#x from %s", magic, conn.addr)
                self._close(conn)
                return
            del conn.buf[:4]
            conn.greeted = True
            conn.since = time.monotonic()
            conn.out += _HEAD.pack(wire.TRACKER_MAGIC)
            self._flush(conn)
        self._frames(conn)

    def _frames(self, conn: _Conn) -> None:
        """Handle the whole frames in ``conn.buf``, one reply at a time."""
        while len(conn.buf) >= 4 and not conn.closed and not conn.out:
            (size,) = _HEAD.unpack_from(conn.buf)
            if not 0 <= size <= self.limits.max_frame:
                log.warning("tracker frame of %d bytes from %s: closing", size, conn.addr)
                self._close(conn)
                return
            if len(conn.buf) < 4 + size:
                return
            body = bytes(conn.buf[4 : 4 + size])
            del conn.buf[: 4 + size]
            conn.since = time.monotonic()
            try:
                self._handle(conn, json.loads(body))
            except Exception as exc:  # anything a peer's bytes cause closes that peer only
                log.warning("bad tracker message from %s: %s", conn.addr, str(exc)[:200])
                self._close(conn)

    # -- protocol ---------------------------------------------------------------------
    def _queue(self, conn: _Conn, value: Any) -> tuple[str, _Queue]:
        """The queue of key ``value`` for ``conn``, made if new (within the limits)."""
        key = str(value)
        if len(key) > self.limits.max_key:
            raise RPCProtocolError(
                f"tracker key of {len(key)} characters: expected at most {self.limits.max_key}"
            )
        if key not in self.queues and len(self.queues) >= self.limits.max_keys:
            raise RPCProtocolError(
                f"tracker holds {len(self.queues)} keys (the limit): no room for {key[:40]!r}"
            )
        if len(conn.slots) + conn.requests + len(conn.keys) >= 2 * self.limits.max_per_conn:
            raise RPCProtocolError(
                f"{self.limits.max_per_conn} keys, slots and requests on one connection: no more"
            )
        queue = self.queues.setdefault(key, _Queue())
        if key not in conn.keys:
            conn.keys.add(key)
            queue.users += 1
        return key, queue

    def _handle(self, conn: _Conn, msg: Any) -> None:
        if not isinstance(msg, list) or not msg:
            raise RPCProtocolError(f"tracker message: expected a JSON list, got {msg!r:.80}")
        code = msg[0]
        if code == TrackerCode.PUT:
            port, matchkey = _int(msg[2][0], "port"), str(msg[2][1])
            host = str(msg[3] if len(msg) >= 4 and msg[3] is not None else conn.addr[0])
            if max(len(matchkey), len(host)) > self.limits.max_key + 64:  # key:random()
                raise RPCProtocolError(
                    f"PUT: match key or host over {self.limits.max_key + 64} characters"
                )
            key, queue = self._queue(conn, msg[1])
            slot = _Slot(conn, host, port, matchkey, key)
            conn.pending.add(matchkey)
            conn.slots.append(slot)
            queue.slots.append(slot)
            self._send(conn, TrackerCode.SUCCESS)
            self._schedule(key)
        elif code == TrackerCode.REQUEST:
            priority = _int(msg[3], "priority")
            key, queue = self._queue(conn, msg[1])
            conn.requests += 1
            heapq.heappush(queue.requests, (-priority, next(self._order), conn))
            self._schedule(key)
        elif code == TrackerCode.PING:
            self._send(conn, TrackerCode.SUCCESS)
        elif code == TrackerCode.GET_PENDING_MATCHKEYS:
            self._send(conn, sorted(conn.pending))
        elif code == TrackerCode.UPDATE_INFO:
            info = dict(msg[1])
            addr = list(info.get("addr") or [None, None])
            if addr and addr[0] is None:
                addr[0] = conn.addr[0]
            info["addr"] = addr
            merged = {**conn.info, **info}
            if len(json.dumps(merged)) > self.limits.max_info:
                raise RPCProtocolError(f"UPDATE_INFO above {self.limits.max_info} bytes")
            conn.info = merged
            self._send(conn, TrackerCode.SUCCESS)
        elif code == TrackerCode.SUMMARY:
            self._send(conn, [TrackerCode.SUCCESS, self.summary()])
        elif code == TrackerCode.STOP:
            ok = bool(self.stop_key) and len(msg) > 1 and msg[1] == self.stop_key
            self._send(conn, TrackerCode.SUCCESS if ok else TrackerCode.FAIL)
            if ok:
                self.stop()
        else:
            raise RPCProtocolError(f"unknown tracker code {code!r:.40}")

    def _schedule(self, key: str) -> None:
        queue = self.queues[key]
        while queue.slots and queue.requests:
            _, _, requester = heapq.heappop(queue.requests)
            requester.requests -= 1
            if requester.closed:
                continue
            slot = queue.slots.pop(0)
            self._send(requester, [TrackerCode.SUCCESS, [slot.host, slot.port, slot.matchkey]])
            if requester.closed:  # it did not read its earlier replies: the slot stays
                queue.slots.insert(0, slot)
                continue
            slot.conn.pending.discard(slot.matchkey)
            with contextlib.suppress(ValueError):
                slot.conn.slots.remove(slot)

    def summary(self) -> dict[str, Any]:
        """TVM's summary: free/pending per key, and each registered server's info."""
        queue_info = {
            key: {
                "free": len(q.slots),
                "pending": sum(1 for _, _, c in q.requests if not c.closed),
            }
            for key, q in self.queues.items()
        }
        servers = [c.info for c in self.conns if "key" in c.info]
        return {"queue_info": queue_info, "server_info": servers}
