"""A one-client fake RPC server on 127.0.0.1 for tests of the client against bad servers.

It shakes hands and answers ``kInitServer`` as TVM 0.16 does (unless told not to shake
hands), then hands the connection to a test's script, which reads the client's packets
with :func:`recv_packet` and answers with bytes it chose (:func:`ret` packs a
``kReturn``).
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tvmrt.rpc.codec import Dialect, encode_args
from tvmrt.rpc.wire import RPC_MAGIC, RPCCode, handshake_bytes, packet_bytes

HOST = "127.0.0.1"
Script = Callable[[socket.socket], None]


def recv_packet(conn: socket.socket) -> tuple[int, bytes]:
    """``(code, body)`` of the client's next packet; ConnectionError if it hangs up."""
    head = b""
    while len(head) < 8:
        part = conn.recv(8 - len(head))
        if not part:
            raise ConnectionError
        head += part
    (size,) = struct.unpack("<Q", head)
    body = b""
    while len(body) < size:
        part = conn.recv(size - len(body))
        if not part:
            raise ConnectionError
        body += part
    return struct.unpack_from("<i", body)[0], body[4:]


def ret(*values: object) -> bytes:
    """A ``kReturn`` packet carrying ``values`` (legacy dialect)."""
    return packet_bytes(RPCCode.kReturn, encode_args(list(values), Dialect.LEGACY))  # type: ignore[arg-type]


@contextmanager
def fake_server(script: Script, handshake: bool = True, join_s: float = 30) -> Iterator[int]:
    """Serve one client: handshake + kInitServer (if ``handshake``), then ``script(conn)``."""
    listener = socket.create_server((HOST, 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            try:
                conn.recv(4096)  # the client's handshake (small: one recv)
                if handshake:
                    conn.sendall(handshake_bytes(RPC_MAGIC, "server:"))
                    recv_packet(conn)  # kInitServer
                    conn.sendall(ret(None))
                script(conn)
            except OSError:  # ConnectionError included: the client hung up
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        listener.close()
        thread.join(join_s)
