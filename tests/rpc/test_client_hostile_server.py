"""A server that lies: every bad reply is a clear error at the client, never a hang, a
crash or a wrong value, and the client's memory stays bounded.

The fake server (a thread on 127.0.0.1) shakes hands and answers kInitServer as TVM 0.16
does, then answers the client's first request with the bytes a test gives it.
"""

from __future__ import annotations

import contextlib
import random
import socket
import struct
import threading
import time

import numpy as np
import pytest

from support.rpc_fake import HOST, Script, fake_server, recv_packet, ret
from tvmrt import nd, rpc
from tvmrt.error import RPCError, RPCProtocolError, RPCSessionTimeoutError
from tvmrt.rpc.client_endpoint import REPLY_GRACE_S
from tvmrt.rpc.codec import Dialect, Handle, Kind, WireDevice, WireDType, WireTensor, encode_args
from tvmrt.rpc.wire import RPCCode, packet_bytes


def answer_first(reply: bytes, then_close: bool = True) -> Script:
    """Answer the first request after kInitServer with ``reply``."""

    def script(conn: socket.socket) -> None:
        recv_packet(conn)
        conn.sendall(reply)
        if not then_close:
            conn.recv(1)

    return script


def upload_then(reply: bytes) -> Script:
    """Give ``upload`` a handle, then answer its kCallFunc with ``reply``."""

    def script(conn: socket.socket) -> None:
        recv_packet(conn)  # kGetGlobalFunc
        conn.sendall(ret(Handle(Kind.OPAQUE, 0x1000)))
        recv_packet(conn)  # kCallFunc
        conn.sendall(reply)

    return script


BAD_REPLIES = {
    "unknown packet code": packet_bytes(77, b""),
    "huge length": struct.pack("<Qi", 1 << 62, RPCCode.kReturn),
    "length below the code": struct.pack("<Q", 2) + b"\x04\x00",
    "too many arguments": packet_bytes(RPCCode.kReturn, struct.pack("<i", 1 << 30)),
    "unknown type code": packet_bytes(RPCCode.kReturn, struct.pack("<ii", 1, 99)),
    "truncated value": packet_bytes(RPCCode.kReturn, struct.pack("<ii", 1, 3) + b"\x01\x02"),
    "two values": ret(Handle(Kind.OPAQUE, 1), Handle(Kind.OPAQUE, 2)),
    "a string for a handle": ret("not a handle"),
    "trailing bytes": packet_bytes(
        RPCCode.kReturn, encode_args([Handle(Kind.OPAQUE, 1)], Dialect.LEGACY) + b"junk"
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_REPLIES))
def test_bad_reply_to_get_global_func(name: str) -> None:
    # the server stays on the line: the client itself must end the session, never read
    # what the server says next as the answer to its next request
    with fake_server(answer_first(BAD_REPLIES[name], then_close=False)) as port:
        session = rpc.connect(HOST, port)
        with pytest.raises(RPCProtocolError):
            session.get_function("tvm.rpc.server.upload")
        with pytest.raises(RPCError, match=r"session with .* is closed"):  # over, not confused
            session.get_function("tvm.rpc.server.upload")


CALL_REPLIES = {
    "no type code": ret(),
    "ndarray without its handle": ret(
        13, WireTensor(1, WireDevice(1, 0), WireDType(2, 32, 1), (4,))
    ),
    "ndarray rank 65": packet_bytes(
        RPCCode.kReturn,
        struct.pack("<iiii", 3, 0, 7, 3)
        + struct.pack("<q", 13)
        + struct.pack("<QiiiBBH", 1, 1, 0, 65, 2, 32, 1),
    ),
    "module without a handle": ret(9, "x"),
}


@pytest.mark.parametrize("name", sorted(CALL_REPLIES))
def test_bad_kcallfunc_reply(name: str) -> None:
    with fake_server(upload_then(CALL_REPLIES[name])) as port:
        session = rpc.connect(HOST, port)
        with pytest.raises(RPCProtocolError):
            session.upload(b"abc", "a.bin")
        with pytest.raises(RPCError, match=r"session with .* is closed"):  # the client ended it
            session.upload(b"abc", "a.bin")


def test_server_exception_is_an_rpc_error_and_the_session_goes_on() -> None:
    def script(conn: socket.socket) -> None:
        recv_packet(conn)
        conn.sendall(
            packet_bytes(RPCCode.kException, encode_args(["boom: no such thing"], Dialect.LEGACY))
        )
        recv_packet(conn)
        conn.sendall(ret(Handle(Kind.OPAQUE, 0)))

    with fake_server(script) as port:
        session = rpc.connect(HOST, port)
        with pytest.raises(RPCError, match="boom: no such thing"):
            session.get_function("a")
        with pytest.raises(AttributeError, match="no global function 'b'"):
            session.get_function("b")


def test_server_vanishing_mid_reply() -> None:
    reply = ret(Handle(Kind.OPAQUE, 5))
    with fake_server(answer_first(reply[: len(reply) // 2])) as port:
        session = rpc.connect(HOST, port)
        with pytest.raises(RPCError, match="closed"):
            session.get_function("x")


def test_copy_ack_of_the_wrong_size() -> None:
    def script(conn: socket.socket) -> None:
        recv_packet(conn)  # kDevGetAttr exist
        conn.sendall(ret(1))
        recv_packet(conn)  # kDevAllocData
        conn.sendall(ret(Handle(Kind.OPAQUE, 0x10000)))
        recv_packet(conn)  # kCopyToRemote
        conn.sendall(ret(None))
        recv_packet(conn)  # kCopyFromRemote: 16 bytes asked, 8 sent
        conn.sendall(packet_bytes(RPCCode.kCopyAck, b"\0" * 8))

    with fake_server(script) as port:
        session = rpc.connect(HOST, port)
        arr = nd.array(np.arange(4, dtype="float32"), session.cpu())
        with pytest.raises(RPCProtocolError, match="8 bytes"):
            arr.numpy()


def test_refused_key() -> None:
    listener = socket.create_server((HOST, 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(4096)
            conn.sendall(struct.pack("<i", 0xFF273))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    with pytest.raises(RPCError, match="different key"):
        rpc.connect(HOST, port, key="board")
    thread.join(10)
    listener.close()


def test_fuzzed_replies_never_hang_or_crash() -> None:
    """Fixed-seed random mutations of a valid kCallFunc reply: every outcome is a value or
    an RPCError, within the test's time (a lying length is at most what was sent)."""
    rng = random.Random(19)
    valid = ret(9, Handle(Kind.OPAQUE, 0x1234))
    for _ in range(60):
        raw = bytearray(valid)
        for _ in range(rng.randint(1, 4)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        cut = bytes(raw[: rng.randint(8, len(raw))])
        with fake_server(upload_then(cut)) as port:
            session = rpc.connect(HOST, port)
            with contextlib.suppress(RPCError):
                session.upload(b"abc", "a.bin")


def test_silent_server_is_a_timeout_not_a_hang() -> None:
    def script(conn: socket.socket) -> None:
        recv_packet(conn)
        conn.recv(1)  # never answers; returns when the client gives up and closes

    with fake_server(script) as port:
        session = rpc.connect(HOST, port, session_timeout=1)
        start = time.monotonic()
        with pytest.raises(RPCSessionTimeoutError, match="did not answer"):
            session.get_function("x")
        assert time.monotonic() - start < 1 + REPLY_GRACE_S + 2
