"""tvmrt's RPC tracker: TVM's ``python -m tvm.exec.rpc_tracker``, compatible both ways.

Servers (TVM's or tvmrt's) register free slots under a key with ``PUT``; clients ask for a
key with ``REQUEST`` and get the oldest free slot, highest priority first, or wait until
one is put (TVM's ``PriorityScheduler``). A slot is handed out once; its server puts a
fresh one after the session. One thread serves every connection (``selectors``); a
frame above :data:`~tvmrt.rpc.tracker_client.MAX_FRAME` or a bad magic closes that
connection only.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import json
import logging
import selectors
import socket
import struct
from dataclasses import dataclass, field
from typing import Any

from tvmrt.error import RPCProtocolError
from tvmrt.rpc import wire
from tvmrt.rpc.server import bind_port
from tvmrt.rpc.tracker_client import MAX_FRAME, TrackerCode

__all__ = ["Tracker"]

log = logging.getLogger("tvmrt.rpc.tracker")


@dataclass(eq=False)
class _Conn:
    sock: socket.socket
    addr: tuple[str, int]
    buf: bytearray = field(default_factory=bytearray)
    greeted: bool = False
    closed: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    pending: set[str] = field(default_factory=set)
    slots: list[_Slot] = field(default_factory=list)


@dataclass(eq=False)
class _Slot:
    conn: _Conn
    host: str
    port: int
    matchkey: str


@dataclass
class _Queue:
    slots: list[_Slot] = field(default_factory=list)
    requests: list[tuple[int, int, _Conn]] = field(default_factory=list)


class Tracker:
    """Listen on ``host:[port, port_end)``; :meth:`serve_forever` until :meth:`stop`."""

    def __init__(
        self, host: str = "127.0.0.1", port: int = 9190, port_end: int = 9199, stop_key: str = ""
    ) -> None:
        self.sock, self.port = bind_port(host, port, port_end)
        self.sock.setblocking(False)
        self.stop_key = stop_key
        self.queues: dict[str, _Queue] = {}
        self.conns: set[_Conn] = set()
        self._order = itertools.count()
        self._sel = selectors.DefaultSelector()
        self._sel.register(self.sock, selectors.EVENT_READ, None)
        self._running = True

    def stop(self) -> None:
        self._running = False

    def serve_forever(self) -> None:
        try:
            while self._running:
                for key, _ in self._sel.select(timeout=0.5):
                    if key.data is None:
                        self._accept()
                    else:
                        self._read(key.data)
        finally:
            for conn in list(self.conns):
                self._close(conn)
            self._sel.close()
            self.sock.close()

    # -- connections ------------------------------------------------------------------
    def _accept(self) -> None:
        with contextlib.suppress(BlockingIOError):
            sock, addr = self.sock.accept()
            sock.setblocking(True)
            sock.settimeout(10)  # replies are small; a peer that stops reading is dropped
            conn = _Conn(sock, (addr[0], addr[1]))
            self.conns.add(conn)
            self._sel.register(sock, selectors.EVENT_READ, conn)

    def _close(self, conn: _Conn) -> None:
        if conn.closed:
            return
        conn.closed = True
        self.conns.discard(conn)
        with contextlib.suppress(KeyError, ValueError):
            self._sel.unregister(conn.sock)
        conn.sock.close()
        for slot in conn.slots:
            for queue in self.queues.values():
                if slot in queue.slots:
                    queue.slots.remove(slot)

    def _send(self, conn: _Conn, data: Any) -> bool:
        raw = json.dumps(data).encode()
        try:
            conn.sock.sendall(struct.pack("<i", len(raw)) + raw)
        except OSError:
            self._close(conn)
            return False
        return True

    def _read(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(65536)
        except OSError:
            data = b""
        if not data:
            self._close(conn)
            return
        conn.buf += data
        if not conn.greeted:
            if len(conn.buf) < 4:
                return
            (magic,) = struct.unpack_from("<i", conn.buf)
            if magic != wire.TRACKER_MAGIC:
                log.warning("bad tracker magic %#x from %s", magic, conn.addr)
                self._close(conn)
                return
            del conn.buf[:4]
            conn.greeted = True
            try:
                conn.sock.sendall(struct.pack("<i", wire.TRACKER_MAGIC))
            except OSError:
                self._close(conn)
                return
        while len(conn.buf) >= 4 and not conn.closed:
            (size,) = struct.unpack_from("<i", conn.buf)
            if not 0 <= size <= MAX_FRAME:
                log.warning("tracker frame of %d bytes from %s: closing", size, conn.addr)
                self._close(conn)
                return
            if len(conn.buf) < 4 + size:
                return
            body = bytes(conn.buf[4 : 4 + size])
            del conn.buf[: 4 + size]
            try:
                message = json.loads(body)
                self._handle(conn, message)
            except (ValueError, TypeError, IndexError, KeyError) as exc:
                log.warning("bad tracker message from %s: %s", conn.addr, exc)
                self._close(conn)

    # -- protocol ---------------------------------------------------------------------
    def _handle(self, conn: _Conn, msg: Any) -> None:
        if not isinstance(msg, list) or not msg:
            raise RPCProtocolError(f"tracker message: expected a JSON list, got {msg!r}")
        code = msg[0]
        if code == TrackerCode.PUT:
            key = str(msg[1])
            port, matchkey = int(msg[2][0]), str(msg[2][1])
            host = msg[3] if len(msg) >= 4 and msg[3] is not None else conn.addr[0]
            slot = _Slot(conn, str(host), port, matchkey)
            conn.pending.add(matchkey)
            conn.slots.append(slot)
            self.queues.setdefault(key, _Queue()).slots.append(slot)
            self._send(conn, TrackerCode.SUCCESS)
            self._schedule(key)
        elif code == TrackerCode.REQUEST:
            key, priority = str(msg[1]), int(msg[3])
            queue = self.queues.setdefault(key, _Queue())
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
            conn.info.update(info)
            self._send(conn, TrackerCode.SUCCESS)
        elif code == TrackerCode.SUMMARY:
            self._send(conn, [TrackerCode.SUCCESS, self.summary()])
        elif code == TrackerCode.STOP:
            ok = bool(self.stop_key) and len(msg) > 1 and msg[1] == self.stop_key
            self._send(conn, TrackerCode.SUCCESS if ok else TrackerCode.FAIL)
            if ok:
                self.stop()
        else:
            raise RPCProtocolError(f"unknown tracker code {code!r}")

    def _schedule(self, key: str) -> None:
        queue = self.queues[key]
        while queue.slots and queue.requests:
            _, _, requester = heapq.heappop(queue.requests)
            if requester.closed:
                continue
            slot = queue.slots.pop(0)
            if self._send(requester, [TrackerCode.SUCCESS, [slot.host, slot.port, slot.matchkey]]):
                slot.conn.pending.discard(slot.matchkey)
                with contextlib.suppress(ValueError):
                    slot.conn.slots.remove(slot)
            else:
                queue.slots.insert(0, slot)

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
