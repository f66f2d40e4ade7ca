"""Faults and hostile clients against ``tvmrt rpc server``: it must keep serving.

Session timeout, a kernel that reports an error, a kernel that crashes its process, a
client killed in the middle of an upload, malformed packets (lying lengths, unknown
codes, handles and pointers never issued, huge allocations) and a seeded fuzzed packet
stream. After each, a fresh well-behaved session must still get correct answers.
Raise ``TVMRT_RPC_FUZZ_SESSIONS`` for a longer fuzz run (default 25 sessions).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.rpc_server import tvmrt_rpc
from tvmrt.error import RPCError
from tvmrt.rpc import codec, wire
from tvmrt.rpc.codec import Dialect, Handle, Kind, WireDevice, WireDType, WireTensor
from tvmrt.testing.kernels_c import KERNEL_PRELUDE

C = wire.RPCCode
D = Dialect.LEGACY
CPU = WireDevice(1, 0)
F32 = WireDType(2, 32, 1)

KERNELS_C = (
    KERNEL_PRELUDE
    + r"""
#include <stddef.h>
int fails(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc, void* res) {
  __TVMAPISetLastError("fails: this kernel always reports an error");
  return -1;
}
int crashes(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc, void* res) {
  volatile int* p = NULL;
  return *p;
}
int twice(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc, void* res) {
  float* x = (float*)TENSOR(0)->data; float* y = (float*)TENSOR(1)->data; int64_t i;
  for (i = 0; i < TENSOR(0)->shape[0]; ++i) y[i] = 2.0f * x[i];
  return 0;
}
"""
)


class Client:
    """A minimal TVM <= 0.20 client on raw sockets (TVM's own clients are tested elsewhere)."""

    def __init__(self, port: int, key: str = "client:", timeout: float = 30) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.sendall(wire.handshake_bytes(wire.RPC_MAGIC, key))
        code, _ = wire.recv_handshake(self.sock)
        assert code == wire.RPC_MAGIC
        ver = wire.PROTOCOL_VERSION.encode()
        self.send(C.kInitServer, struct.pack("<Q", len(ver)) + ver + struct.pack("<i", 0))
        assert self.recv()[0] == C.kReturn

    def close(self) -> None:
        self.sock.close()

    def send(self, code: int, payload: bytes) -> None:
        self.sock.sendall(wire.packet_bytes(code, payload))

    def recv(self) -> tuple[int, bytes]:
        packet = wire.recv_packet(self.sock)
        assert packet is not None, "the server closed the session"
        return packet

    def request(self, code: int, args: list[codec.Value]) -> list[codec.Value]:
        self.send(code, codec.encode_args(args, D))
        return self._reply()

    def _reply(self) -> list[codec.Value]:
        code, payload = self.recv()
        values = codec.decode_args(payload, D)
        if code == C.kException:
            raise RPCError(str(values[0]))
        assert code == C.kReturn
        return values

    def func(self, name: str) -> Handle:
        (h,) = self.request(C.kGetGlobalFunc, [name])
        assert isinstance(h, Handle)
        assert h.value != 0, name
        return h

    def call(self, func: Handle, *args: codec.Value) -> list[codec.Value]:
        self.send(C.kCallFunc, struct.pack("<Q", func.value) + codec.encode_args(list(args), D))
        return self._reply()

    def alloc(self, n: int) -> WireTensor:
        template = WireTensor(0, CPU, F32, (n,))
        (ptr,) = self.request(C.kDevAllocDataWithScope, [template, None])
        assert isinstance(ptr, Handle)
        return WireTensor(ptr.value, CPU, F32, (n,))

    def copy_to(self, t: WireTensor, data: bytes) -> None:
        self.send(C.kCopyToRemote, codec.encode_tensor(t) + struct.pack("<Q", len(data)) + data)
        self._reply()

    def copy_from(self, t: WireTensor, nbytes: int) -> bytes:
        self.send(C.kCopyFromRemote, codec.encode_tensor(t) + struct.pack("<Q", nbytes))
        code, payload = self.recv()
        if code == C.kException:
            raise RPCError(str(codec.decode_args(payload, D)[0]))
        assert code == C.kCopyAck
        return payload


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler to build the test kernels")
    folder = tmp_path_factory.mktemp("kernels")
    (folder / "k.c").write_text(KERNELS_C)
    subprocess.run(
        [cc, "-shared", "-fPIC", "-O1", "-o", str(folder / "k.so"), str(folder / "k.c")],
        check=True,
    )
    return (folder / "k.so").read_bytes()


@pytest.fixture(scope="module")
def server() -> Iterator[int]:
    with tvmrt_rpc("server", "--max-alloc-mb", "64", "--max-packet-mb", "16") as (proc, port):
        yield port
        assert proc.poll() is None, "the server died"


def healthy(port: int, kernels: bytes) -> None:
    """A full good session: upload, load, alloc, copy, call, read back."""
    c = Client(port)
    try:
        c.call(c.func("tvm.rpc.server.upload"), "k.so", kernels)
        (_, mod) = c.call(c.func("tvm.rpc.server.load_module"), "k.so")
        assert isinstance(mod, Handle)
        (_, twice) = c.call(
            c.func("tvm.rpc.server.ModuleGetFunction"), Handle(Kind.MODULE, mod.value), "twice", 1
        )
        assert isinstance(twice, Handle)
        x, y = c.alloc(4), c.alloc(4)
        c.copy_to(x, struct.pack("<4f", 1, 2, 3, 4))
        c.call(twice, x, y)
        assert struct.unpack("<4f", c.copy_from(y, 16)) == (2, 4, 6, 8)
    finally:
        c.close()


def _kernel(c: Client, kernels: bytes, name: str) -> Handle:
    c.call(c.func("tvm.rpc.server.upload"), "k.so", kernels)
    (_, mod) = c.call(c.func("tvm.rpc.server.load_module"), "k.so")
    assert isinstance(mod, Handle)
    (_, f) = c.call(
        c.func("tvm.rpc.server.ModuleGetFunction"), Handle(Kind.MODULE, mod.value), name, 1
    )
    assert isinstance(f, Handle)
    return f


def test_a_kernel_that_reports_an_error_raises_and_the_session_goes_on(
    server: int, kernels: bytes
) -> None:
    c = Client(server)
    try:
        fails = _kernel(c, kernels, "fails")
        with pytest.raises(RPCError, match="always reports an error"):
            c.call(fails)
        assert c.call(c.func("tvm.rpc.server.listdir"), ".") == [11, "k.so,"]
    finally:
        c.close()
    healthy(server, kernels)


def test_a_kernel_that_crashes_ends_its_session_only(server: int, kernels: bytes) -> None:
    c = Client(server)
    try:
        crashes = _kernel(c, kernels, "crashes")
        c.send(C.kCallFunc, struct.pack("<Q", crashes.value) + codec.encode_args([], D))
        assert wire.recv_packet(c.sock) is None  # the session process died: EOF
    finally:
        c.close()
    healthy(server, kernels)


def test_session_timeout_gives_tvms_error_and_the_server_goes_on(
    server: int, kernels: bytes
) -> None:
    c = Client(server, "client: -timeout=1")
    try:
        # listdir timed with min_repeat_ms of a minute: busy far past the 1 s timeout
        evaluator = c.func("runtime.RPCTimeEvaluator")
        listdir = "tvm.rpc.server.listdir"
        (_, timer) = c.call(evaluator, None, listdir, 1, 0, 1, 1, 60000, 100, 0, 1, 0, "")
        assert isinstance(timer, Handle)
        start = time.monotonic()
        with pytest.raises(RPCError, match=r"^RPCSessionTimeoutError: "):
            c.call(timer, ".")
        assert time.monotonic() - start < 20
    finally:
        c.close()
    healthy(server, kernels)


def test_client_killed_mid_upload(server: int, kernels: bytes) -> None:
    script = f"""
import socket, struct, sys, time
sys.path[:0] = {[str(Path(__file__).parents[2] / "src")]!r}
from tvmrt.rpc import wire
s = socket.create_connection(("127.0.0.1", {server}))
s.sendall(wire.handshake_bytes(wire.RPC_MAGIC, "client:"))
wire.recv_handshake(s)
s.sendall(struct.pack("<Qi", 8 << 20, 3) + b"\\0" * (1 << 20))  # 1 of 8 MiB
print("sent", flush=True)
time.sleep(60)
"""
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "sent"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    healthy(server, kernels)


def test_bad_packets_get_clear_errors_and_the_session_goes_on(server: int, kernels: bytes) -> None:
    c = Client(server)
    try:
        with pytest.raises(RPCError, match="never issued"):
            c.call(Handle(Kind.FUNC, 0xDEADBEEF))
        with pytest.raises(RPCError, match="never handed out"):
            c.copy_from(WireTensor(0x1234000, CPU, F32, (4,)), 16)
        x = c.alloc(4)
        with pytest.raises(RPCError, match="needs 64 bytes"):
            c.copy_from(WireTensor(x.data, CPU, F32, (16,)), 64)
        with pytest.raises(RPCError, match="allocation of"):
            c.request(C.kDevAllocData, [CPU, 1 << 50, 64, F32])
        with pytest.raises(RPCError, match="unknown or unsupported RPC packet code 99"):
            c.request(99, [])
        c.send(C.kGetGlobalFunc, struct.pack("<ii", 1, 77))
        with pytest.raises(RPCError, match="type code 77"):
            c._reply()
        with pytest.raises(RPCError, match="leaves the server's work folder"):
            c.call(c.func("tvm.rpc.server.upload"), "../escape.so", b"x")
        with pytest.raises(RPCError, match="leaves the server's work folder"):
            c.call(c.func("tvm.rpc.server.download"), "/etc/passwd")
        assert c.call(c.func("tvm.rpc.server.listdir"), ".") == [11, ""]
    finally:
        c.close()
    # a lying packet length above the limit closes that session only
    c = Client(server)
    try:
        c.sock.sendall(struct.pack("<Q", 1 << 40))
        code, payload = c.recv()
        assert code == C.kException
        assert "packet limit" in str(codec.decode_args(payload, D)[0])
        assert wire.recv_packet(c.sock) is None
    finally:
        c.close()
    healthy(server, kernels)


def _valid_stream(kernels: bytes) -> list[bytes]:
    """The packets of a good session, to mutate."""
    upload = struct.pack("<Q", 0x1000) + codec.encode_args(["k.so", kernels[:256]], D)
    return [
        wire.packet_bytes(C.kGetGlobalFunc, codec.encode_args(["tvm.rpc.server.upload"], D)),
        wire.packet_bytes(C.kCallFunc, upload),
        wire.packet_bytes(
            C.kDevAllocDataWithScope, codec.encode_args([WireTensor(0, CPU, F32, (4,)), None], D)
        ),
        wire.packet_bytes(
            C.kCopyToRemote,
            codec.encode_tensor(WireTensor(0x1000, CPU, F32, (4,)))
            + struct.pack("<Q", 16)
            + b"\0" * 16,
        ),
        wire.packet_bytes(C.kDevGetAttr, codec.encode_args([CPU, 0], D)),
        wire.packet_bytes(C.kFreeHandle, codec.encode_args([Handle(Kind.OPAQUE, 0x1000), 10], D)),
    ]


def test_fuzzed_packet_streams(server: int, kernels: bytes) -> None:
    rng = random.Random(19)
    sessions = int(os.environ.get("TVMRT_RPC_FUZZ_SESSIONS", "25"))
    packets = _valid_stream(kernels)
    for _ in range(sessions):
        stream = bytearray(b"".join(rng.choice(packets) for _ in range(rng.randint(1, 6))))
        for _ in range(rng.randint(1, 8)):
            stream[rng.randrange(len(stream))] = rng.randrange(256)
        if rng.random() < 0.3:
            del stream[rng.randrange(len(stream)) :]
        c = Client(server)
        try:
            c.sock.settimeout(10)
            c.sock.sendall(bytes(stream))
            c.sock.shutdown(socket.SHUT_WR)
            while wire.recv_packet(c.sock) is not None:  # replies until the server closes
                pass
        except (RPCError, OSError):
            pass  # the server may cut a malformed session short: allowed
        finally:
            c.close()
    healthy(server, kernels)


def test_copies_honour_byte_offsets_and_bounds(server: int) -> None:
    c = Client(server)
    try:
        x = c.alloc(8)
        c.copy_to(x, struct.pack("<8f", *range(8)))
        # the middle four floats, named by a byte offset into the allocation
        mid = WireTensor(x.data, CPU, F32, (4,), byte_offset=8)
        assert struct.unpack("<4f", c.copy_from(mid, 16)) == (2, 3, 4, 5)
        c.copy_to(mid, struct.pack("<4f", -1, -1, -1, -1))
        assert struct.unpack("<8f", c.copy_from(x, 32)) == (0, 1, -1, -1, -1, -1, 6, 7)
        with pytest.raises(RPCError, match="needs 16 bytes"):
            c.copy_from(WireTensor(x.data, CPU, F32, (4,), byte_offset=20), 16)
        with pytest.raises(RPCError, match="copy of 8 bytes"):
            c.copy_from(mid, 8)
        c.request(C.kDevFreeData, [CPU, Handle(Kind.OPAQUE, x.data)])
        with pytest.raises(RPCError, match="never handed out"):
            c.copy_from(x, 32)
    finally:
        c.close()


def test_remove_follows_tvms_remove_file(server: int) -> None:
    c = Client(server)
    try:
        remove, upload, listdir = (
            c.func(f"tvm.rpc.server.{n}") for n in ("remove", "upload", "listdir")
        )
        c.call(upload, "sub/a.bin", b"a")
        c.call(remove, "missing.so")  # MetaSchedule removes files that may not exist
        c.call(remove, "")  # the work folder itself stays
        c.call(remove, "sub")  # a folder that is not empty stays, as std::remove
        assert c.call(listdir, "sub") == [11, "a.bin,"]
        c.call(remove, "sub/a.bin")
        c.call(remove, "sub")
        assert c.call(listdir, ".") == [11, ""]
        with pytest.raises(RPCError, match="leaves the server's work folder"):
            c.call(remove, "../../etc/passwd")
    finally:
        c.close()
