"""The client against servers and trackers that trickle or lie (issue 31, item 11).

Timeouts are total per handshake and per reply, not per ``recv``; a server may name only
its own device types (1 to 127), never one that maps onto a local device or another
session's; a tracker's malformed answer is an RPCError, so ``request`` retries.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

import tvmrt
from support.rpc_fake import HOST, Script, fake_server, recv_packet, ret
from tvmrt import rpc
from tvmrt.error import RPCError, RPCProtocolError, RPCSessionTimeoutError
from tvmrt.rpc.client_endpoint import REPLY_GRACE_S, open_endpoint
from tvmrt.rpc.codec import Handle, Kind, WireDevice
from tvmrt.rpc.wire import RPC_MAGIC, TRACKER_MAGIC, handshake_bytes
from tvmrt.runtime.device import find_device_api, register_device_api


def _trickle(conn: socket.socket, data: bytes, period: float = 0.5) -> None:
    """One byte every ``period`` s; stops when the client hangs up (bounded by ``data``)."""
    for byte in data:
        conn.sendall(bytes([byte]))
        time.sleep(period)


def test_a_trickled_reply_hits_the_timeout_as_a_total_deadline() -> None:
    def script(conn: socket.socket) -> None:
        recv_packet(conn)  # kGetGlobalFunc
        _trickle(conn, ret(Handle(Kind.OPAQUE, 0x1000)) * 2)  # about 25 s at 0.5 s a byte

    with fake_server(script) as port:
        session = rpc.connect(HOST, port, session_timeout=1)
        start = time.monotonic()
        with pytest.raises(RPCSessionTimeoutError):
            session.get_function("tvm.rpc.server.upload")
        took = time.monotonic() - start
        assert took < 1 + REPLY_GRACE_S + 2, f"the reply was waited for {took:.1f} s"


def test_a_trickled_handshake_hits_the_connect_timeout_in_total() -> None:
    def script(conn: socket.socket) -> None:
        _trickle(conn, handshake_bytes(RPC_MAGIC, "server:" + "x" * 40))  # 26 s

    with fake_server(script, handshake=False) as port:
        start = time.monotonic()
        with pytest.raises((RPCError, TimeoutError)):
            open_endpoint(HOST, port, "", 0, timeout=1.5)
        assert time.monotonic() - start < 4


def _device_reply(device_type: int) -> Script:
    def script(conn: socket.socket) -> None:
        recv_packet(conn)  # kGetGlobalFunc
        conn.sendall(ret(Handle(Kind.OPAQUE, 0x1000)))
        recv_packet(conn)  # kCallFunc
        conn.sendall(ret(6, WireDevice(device_type, 0)))  # type code 6: a device
        with contextlib.suppress(OSError):
            conn.recv(1)

    return script


@pytest.mark.parametrize("device_type", [-127, 129, 0, "local cpu"])
def test_a_server_cannot_name_a_device_outside_its_mask(device_type: int | str) -> None:
    cpu_api = find_device_api(1)
    try:
        with fake_server(_device_reply(0)) as port:  # learn the next session's table index
            probe = rpc.connect(HOST, port)
            index = probe._tbl_index
            probe.close()
        # the type that the session's encoding maps onto this process's CPU (type 1)
        wire_type = 1 - (index + 1) * 128 if device_type == "local cpu" else int(device_type)
        with fake_server(_device_reply(wire_type)) as port:
            session = rpc.connect(HOST, port)
            with pytest.raises(RPCProtocolError, match="device type"):
                session.get_function("f")()
            session.close()
        assert find_device_api(1) is cpu_api, "a session replaced the local CPU backend"
        x = tvmrt.nd.array(np.arange(4, dtype="float32"), tvmrt.cpu())
        assert x.numpy().tolist() == [0, 1, 2, 3]
    finally:
        if cpu_api is not None and find_device_api(1) is not cpu_api:
            register_device_api(1, cpu_api, override=True)


@contextlib.contextmanager
def fake_tracker(answer: bytes, connections: int) -> Iterator[int]:
    listener = socket.create_server((HOST, 0))
    listener.settimeout(20)

    def serve() -> None:
        for _ in range(connections):  # bounded: one answer per connection
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(4)
                conn.sendall(struct.pack("<i", TRACKER_MAGIC))
                conn.recv(65536)  # REQUEST
                conn.sendall(struct.pack("<i", len(answer)) + answer)
                with contextlib.suppress(OSError):
                    conn.recv(1)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()
        thread.join(30)


@pytest.mark.parametrize(
    "answer",
    [
        b"[" * 50000 + b"]" * 50000,
        b'[0, ["127.0.0.1", Infinity, "k:1"]]',
        b'[0, ["127.0.0.1", 1e400, "k:1"]]',
        b'[0, ["127.0.0.1"]]',
        b'[0, "127.0.0.1"]',
        b'[0, ["127.0.0.1", 70000, "k:1"]]',
        b"[0, [null, null, null]]",
    ],
    ids=["nested", "port-inf", "port-1e400", "short", "not-a-list", "port-range", "nulls"],
)
def test_a_malformed_tracker_answer_is_an_rpc_error(answer: bytes) -> None:
    with fake_tracker(answer, connections=2) as port:
        tracker = rpc.connect_tracker(HOST, port)
        with pytest.raises(RPCError, match="Cannot request"):
            tracker.request("k", max_retry=2)
        tracker.close()


def test_a_trickled_tracker_answer_hits_the_timeout_in_total() -> None:
    """The server's tracker connection (30 s by default) is bounded per answer, not per byte."""
    from tvmrt.rpc.tracker_client import TrackerConnection

    listener = socket.create_server((HOST, 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(4)
            conn.sendall(struct.pack("<i", TRACKER_MAGIC))
            conn.recv(4096)  # PING
            with contextlib.suppress(OSError):
                _trickle(conn, struct.pack("<i", 1) + b"0" + struct.pack("<i", 1) * 8, 0.4)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    tracker = TrackerConnection((HOST, listener.getsockname()[1]), timeout=1.5)
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        tracker.call(1)
    assert time.monotonic() - start < 3
    tracker.close()
    listener.close()
    thread.join(20)
