"""The server's buffered packet reader and its pre-encoded replies.

``PacketReader`` must frame exactly as ``recv_packet`` does however the bytes arrive
(several packets in one read, a packet split byte by byte, a body over the 1 MiB chunk),
and refuse what ``recv_packet`` refuses. The session's pre-packed ``int`` / ``None``
returns must be byte-identical to what the generic codec encodes.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from tvmrt.error import RPCError, RPCProtocolError
from tvmrt.rpc import codec, replies, wire
from tvmrt.rpc.codec import Dialect, Kind

_OPEN: list[socket.socket] = []


@pytest.fixture(autouse=True)
def _close_sockets() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


def _feed(chunks: list[bytes]) -> wire.PacketReader:
    a, b = socket.socketpair()
    _OPEN.append(b)

    def send() -> None:
        with a:
            for c in chunks:
                a.sendall(c)

    threading.Thread(target=send, daemon=True).start()
    return wire.PacketReader(b, wire.Limits(max_packet=8 << 20), bufsize=4096)


def test_packets_in_one_read_and_split_byte_by_byte() -> None:
    packets = [(3, b"\x01" * 12), (9, b""), (4, bytes(range(200)) * 30)]
    stream = b"".join(wire.packet_bytes(c, p) for c, p in packets)
    for chunks in ([stream], [stream[i : i + 1] for i in range(len(stream))]):
        reader = _feed(chunks)
        assert [reader.next() for _ in packets] == packets
        assert reader.next() is None  # closed at a boundary


def test_body_over_the_chunk_size() -> None:
    payload = bytes(range(256)) * ((3 << 20) // 256)
    reader = _feed([wire.packet_bytes(7, payload) + wire.packet_bytes(1)])
    assert reader.next() == (7, payload)
    assert reader.next() == (1, b"")


def test_lying_length_and_truncation_are_refused() -> None:
    with pytest.raises(RPCProtocolError, match="expected 4 to"):
        _feed([(9 << 20).to_bytes(8, "little") + b"\0" * 8]).next()
    with pytest.raises(RPCProtocolError, match="expected 4 to"):
        _feed([(2).to_bytes(8, "little") + b"\0" * 8]).next()
    with pytest.raises(RPCError, match="middle of a packet header"):
        _feed([b"\x10\0\0"]).next()
    with pytest.raises(RPCError, match="middle of a packet"):
        _feed([wire.packet_bytes(3, b"\0" * 100)[:50]]).next()
    with pytest.raises(RPCError, match="middle of a packet"):  # a large body cut short
        _feed([wire.packet_bytes(3, b"\0" * (3 << 20))[: 2 << 20]]).next()


@pytest.mark.parametrize("dialect", list(Dialect))
@pytest.mark.parametrize("value", [0, 1, -7, 2**40, 2**63 - 1, -(2**63)])
def test_prepacked_int_return_equals_the_codec(dialect: Dialect, value: int) -> None:
    generic = codec.encode_args([codec.type_code(dialect, Kind.INT), value], dialect)
    assert replies.int_return(dialect, value) == wire.packet_bytes(wire.RPCCode.kReturn, generic)
    null = codec.encode_args([codec.type_code(dialect, Kind.NULL), None], dialect)
    assert replies.NONE_RETURN[dialect] == wire.packet_bytes(wire.RPCCode.kReturn, null)
    void = codec.encode_args([None], dialect)
    assert replies.VOID[dialect] == wire.packet_bytes(wire.RPCCode.kReturn, void)
