"""TVM's RPC wire: magic numbers, packet codes, framing, the handshake, and limits.

Everything is little-endian. A connection starts with a handshake (``i32 magic, i32 len,
key``) and then carries packets: ``u64 nbytes``, ``i32 RPCCode``, payload (``nbytes``
counts the code and the payload). The same numbers serve TVM <= 0.20 and TVM >= 0.21;
only argument sequences differ (:mod:`tvmrt.rpc.codec`).

Every length read from a peer is checked against :class:`Limits` before anything is
allocated, and a packet body is read in chunks, so a peer that lies about a length costs
at most what it actually sends.
"""

from __future__ import annotations

import enum
import socket
import struct
import time
from dataclasses import dataclass

from tvmrt.error import RPCError, RPCProtocolError

__all__ = [
    "RPC_MAGIC",
    "RPC_CODE_DUPLICATE",
    "RPC_CODE_MISMATCH",
    "TRACKER_MAGIC",
    "PROTOCOL_VERSION",
    "RPCCode",
    "Limits",
    "DEFAULT_LIMITS",
    "recv_exact",
    "recv_handshake",
    "handshake_bytes",
    "recv_packet",
    "PacketReader",
    "packet_bytes",
]

RPC_MAGIC = 0xFF271
RPC_CODE_DUPLICATE = 0xFF272
RPC_CODE_MISMATCH = 0xFF273
TRACKER_MAGIC = 0x2F271
PROTOCOL_VERSION = "0.8.0"

_CHUNK = 1 << 20
_HEAD = struct.Struct("<Qi")
_U64 = struct.Struct("<Q")
_I32 = struct.Struct("<i")


class RPCCode(enum.IntEnum):
    """Packet codes (TVM's ``RPCCode``, ``rpc_reference.h``)."""

    kNone = 0
    kShutdown = 1
    kInitServer = 2
    kCallFunc = 3
    kReturn = 4
    kException = 5
    kCopyFromRemote = 6
    kCopyToRemote = 7
    kCopyAck = 8
    kGetGlobalFunc = 9
    kFreeHandle = 10
    kDevSetDevice = 11
    kDevGetAttr = 12
    kDevAllocData = 13
    kDevFreeData = 14
    kDevStreamSync = 15
    kCopyAmongRemote = 16
    kDevAllocDataWithScope = 17
    kDevCreateStream = 18
    kDevFreeStream = 19
    kDevSetStream = 20
    kDevGetCurrentStream = 21


@dataclass(frozen=True)
class Limits:
    """What a peer may send before it is refused.

    ``max_packet`` bounds one packet (an upload is one packet: raise it to upload larger
    libraries); ``max_key`` the handshake key; ``max_args`` an argument sequence;
    ``max_ndim`` a DLTensor's rank; ``max_alloc`` one device allocation; ``max_workdir``
    what a session's folder may hold (its uploads).
    """

    max_packet: int = 1 << 30
    max_key: int = 4096
    max_args: int = 4096
    max_ndim: int = 64
    max_alloc: int = 1 << 32
    max_workdir: int = 1 << 32


DEFAULT_LIMITS = Limits()


def _recv_by(sock: socket.socket, size: int, deadline: float | None) -> bytes:
    """One ``recv``; with a ``deadline`` (``time.monotonic()``) it must come by then."""
    if deadline is None:
        return sock.recv(size)
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("timed out (the total deadline passed)")
    previous = sock.gettimeout()
    sock.settimeout(left)
    try:
        return sock.recv(size)
    finally:
        sock.settimeout(previous)


def recv_exact(
    sock: socket.socket, nbytes: int, what: str = "data", deadline: float | None = None
) -> bytes:
    """Exactly ``nbytes`` from ``sock``, read in chunks of at most 1 MiB, all of them by
    ``deadline`` (``time.monotonic()``; else ``TimeoutError``) when one is given.

    Raises
    ------
    RPCError
        If the peer closes the connection first.
    """
    if nbytes <= _CHUNK:
        buf = bytearray()
        while len(buf) < nbytes:
            part = _recv_by(sock, nbytes - len(buf), deadline)
            if not part:
                raise RPCError(f"peer closed the connection in the middle of {what}")
            buf += part
        return bytes(buf)
    chunks: list[bytes] = []
    left = nbytes
    while left:
        part = recv_exact(sock, min(left, _CHUNK), what, deadline)
        chunks.append(part)
        left -= len(part)
    return b"".join(chunks)


def handshake_bytes(magic: int, key: str) -> bytes:
    """``i32 magic, i32 len, key`` (a client's ``client:KEY``, a server's ``server:KEY``)."""
    raw = key.encode()
    return struct.pack("<ii", magic, len(raw)) + raw


def recv_handshake(sock: socket.socket, limits: Limits = DEFAULT_LIMITS) -> tuple[int, str]:
    """Read one handshake: ``(magic or answer code, key)``.

    Raises
    ------
    RPCProtocolError
        If the key length is negative or above ``limits.max_key``, or not UTF-8.
    """
    magic, length = struct.unpack("<ii", recv_exact(sock, 8, "the handshake"))
    if magic not in (RPC_MAGIC, RPC_CODE_DUPLICATE, RPC_CODE_MISMATCH):
        raise RPCProtocolError(f"handshake: magic {magic:#x} is not TVM's RPC magic {RPC_MAGIC:#x}")
    if magic != RPC_MAGIC:  # an answer code: no key follows on a refusal
        return magic, ""
    if not 0 <= length <= limits.max_key:
        raise RPCProtocolError(f"handshake: key length {length} is not in [0, {limits.max_key}]")
    raw = recv_exact(sock, length, "the handshake key")
    try:
        return magic, raw.decode()
    except UnicodeDecodeError as exc:
        raise RPCProtocolError("handshake: the key is not UTF-8") from exc


def packet_bytes(code: int, payload: bytes = b"") -> bytes:
    """One framed packet: ``u64 nbytes, i32 code, payload``."""
    return _HEAD.pack(4 + len(payload), code) + payload


def recv_packet(
    sock: socket.socket, limits: Limits = DEFAULT_LIMITS, deadline: float | None = None
) -> tuple[int, bytes] | None:
    """The next packet as ``(code, payload)``; ``None`` if the peer closed at a boundary.
    With a ``deadline`` (``time.monotonic()``) the whole packet must come by then.

    Raises
    ------
    RPCProtocolError
        If the announced size is below 4 or above ``limits.max_packet``.
    RPCError
        If the peer closes the connection inside a packet.
    """
    first = _recv_by(sock, 8, deadline)
    if not first:
        return None
    head = first + recv_exact(sock, 8 - len(first), "a packet header", deadline)
    (nbytes,) = struct.unpack("<Q", head)
    if nbytes < 4 or nbytes > limits.max_packet:
        raise RPCProtocolError(
            f"packet of {nbytes} bytes: expected 4 to {limits.max_packet} (the packet limit)"
        )
    body = recv_exact(sock, nbytes, "a packet", deadline)
    (code,) = struct.unpack_from("<i", body)
    return code, body[4:]


class PacketReader:
    """The packets of one connection, read through a buffer.

    A small packet (a call, a reply) usually arrives whole in one ``recv``, where
    :func:`recv_packet` needs one for the header and one for the body; a server reads
    every packet of a session this way. A body over 1 MiB is read in chunks as
    :func:`recv_exact` does, so a lying length still costs only what the peer sends.
    """

    def __init__(
        self, sock: socket.socket, limits: Limits = DEFAULT_LIMITS, bufsize: int = 1 << 16
    ) -> None:
        self.sock = sock
        self.limits = limits
        self.bufsize = bufsize
        self._buf = bytearray()

    def next(self) -> tuple[int, bytes] | None:
        """The next packet as ``(code, payload)``; ``None`` if the peer closed at a boundary.

        Raises
        ------
        RPCProtocolError
            If the announced size is below 4 or above ``limits.max_packet``.
        RPCError
            If the peer closes the connection inside a packet.
        """
        buf = self._buf
        recv = self.sock.recv
        while len(buf) < 8:
            part = recv(self.bufsize)
            if not part:
                if buf:
                    raise RPCError("peer closed the connection in the middle of a packet header")
                return None
            buf += part
        (nbytes,) = _U64.unpack_from(buf)
        if nbytes < 4 or nbytes > self.limits.max_packet:
            raise RPCProtocolError(
                f"packet of {nbytes} bytes: expected 4 to {self.limits.max_packet} "
                "(the packet limit)"
            )
        end = 8 + nbytes
        if end - len(buf) > _CHUNK:  # a large body: grown chunk by chunk as it arrives
            body = buf[8:]
            buf.clear()
            while len(body) < nbytes:
                part = recv(min(_CHUNK, nbytes - len(body)))
                if not part:
                    raise RPCError("peer closed the connection in the middle of a packet")
                body += part
            with memoryview(body) as view:
                return _I32.unpack_from(body)[0], bytes(view[4:])
        while len(buf) < end:
            part = recv(max(self.bufsize, end - len(buf)))
            if not part:
                raise RPCError("peer closed the connection in the middle of a packet")
            buf += part
        code = _I32.unpack_from(buf, 8)[0]
        payload = bytes(buf[12:end])
        del buf[:end]
        return code, payload
