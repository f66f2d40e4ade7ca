"""One client session of the RPC server: packets in, replies out, handles in between.

:class:`ServerSession` answers every packet code of TVM's protocol (``rpc_endpoint.cc``)
in the client's dialect, which it learns from the client's first argument sequence. It
keeps the objects it hands out (modules, functions, arrays) in a handle table until the
client frees them; a handle, pointer or device the server never issued is refused with an
exception packet, and the session goes on.
"""

from __future__ import annotations

import contextlib
import socket
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tvmrt.error import RPCProtocolError
from tvmrt.rpc import codec, replies, wire
from tvmrt.rpc.codec import Dialect, Handle, Kind, Reader, Value, WireDevice, WireDType, WireTensor
from tvmrt.rpc.memory import RemoteMemory
from tvmrt.rpc.server_env import ServerEnv
from tvmrt.runtime.device import DEVICE_ATTR_KINDS, Device
from tvmrt.runtime.device_api import get_device_api
from tvmrt.runtime.dtype import DataType
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray, numpy_shape

__all__ = ["ServerSession", "serve_connection"]

C = wire.RPCCode
# TVM's DeviceAttrKind numbers -> tvmrt's attribute names (what kDevGetAttr asks for)
_ATTRS = {kind: name for name, kind in DEVICE_ATTR_KINDS.items()}


class ServerSession:
    """The state of one session: dialect, handle table, remote memory, work folder."""

    def __init__(self, workdir: Path, limits: wire.Limits = wire.DEFAULT_LIMITS) -> None:
        self.env = ServerEnv(workdir, limits.max_workdir)
        self.limits = limits
        self.dialect: Dialect | None = None
        self.handles: dict[int, Any] = {}
        self.array_bases: dict[int, int] = {}  # NDArray handle -> the region it holds
        self.memory = RemoteMemory()
        self._next = 0x1000
        self.initialised = False

    # -- packets ----------------------------------------------------------------------
    def handle_packet(self, code: int, payload: bytes) -> bytes | None:
        """The reply packet to one packet; ``None`` for kShutdown (the session ends)."""
        if code == C.kShutdown:
            return None
        try:
            return self._dispatch(code, payload)
        except RPCProtocolError as exc:
            return self._exception(f"RPCError: {exc}")
        except Exception as exc:  # the client's call raised: report it, keep serving
            return self._exception(f"{type(exc).__name__}: {exc}")

    def _dispatch(self, code: int, payload: bytes) -> bytes:
        if code == C.kInitServer:
            return self._init_server(payload)
        if not self.initialised:
            raise RPCProtocolError(f"packet code {code} before kInitServer")
        if code == C.kCopyFromRemote:
            r = Reader(payload, "kCopyFromRemote")
            t = codec.decode_tensor(r, self.limits)
            nbytes = r.u64()
            r.end()
            arr = self._checked(t, nbytes)
            return wire.packet_bytes(C.kCopyAck, arr.numpy().tobytes())
        if code == C.kCopyToRemote:
            r = Reader(payload, "kCopyToRemote")
            t = codec.decode_tensor(r, self.limits)
            nbytes = r.u64()
            data = r.take(nbytes)
            r.end()
            arr = self._checked(t, nbytes)
            flat = np.frombuffer(data, dtype=arr.dtype.numpy_dtype)
            arr.copyfrom(flat.reshape(numpy_shape(arr.shape, arr.dtype)))
            return self._void()
        if code == C.kCallFunc:
            if payload[8:] == _NO_ARGS:  # the common call with no arguments: nothing to decode
                func = self._object(Handle(Kind.FUNC, _U64.unpack_from(payload)[0]))
                args: list[Value] = []
            else:
                r = Reader(payload, "kCallFunc")
                func = self._object(Handle(Kind.FUNC, r.u64()))
                args = self._args(r.data[r.pos :])
            if not callable(func):
                handle = _U64.unpack_from(payload)[0]
                raise RPCProtocolError(f"handle {handle:#x} is not a function")
            return self._return(func(*[self._local(a) for a in args]))
        handler = _SYSCALLS.get(code)
        if handler is None:
            raise RPCProtocolError(f"unknown or unsupported RPC packet code {code}")
        return handler(self, self._args(payload))

    def _init_server(self, payload: bytes) -> bytes:
        r = Reader(payload, "kInitServer")
        ver = r.take(min(r.u64(), self.limits.max_key)).decode(errors="replace")
        if ver != wire.PROTOCOL_VERSION:
            raise RPCProtocolError(
                f"client protocol {ver!r} does not match the server's {wire.PROTOCOL_VERSION!r}"
            )
        rest = r.data[r.pos :]
        if rest != struct.pack("<i", 0):
            self.dialect = self.dialect or codec.guess_dialect(rest, self.limits)
            raise RPCProtocolError("custom session constructors are not supported by tvmrt")
        self.initialised = True
        # both dialects accept an empty sequence; the client's next one tells its dialect
        return wire.packet_bytes(C.kReturn, struct.pack("<i", 0))

    def _args(self, data: bytes) -> list[Value]:
        if self.dialect is None:
            if data[:4] == struct.pack("<i", 0):
                return codec.decode_args(data, Dialect.FFI, self.limits)
            self.dialect = codec.guess_dialect(data, self.limits)
        return codec.decode_args(data, self.dialect, self.limits)

    # -- values -----------------------------------------------------------------------
    def _issue(self, obj: object) -> int:
        handle = self._next
        self._next += 0x10
        self.handles[handle] = obj
        return handle

    def _object(self, h: Handle) -> Any:
        if h.value not in self.handles:
            raise RPCProtocolError(f"handle {h.value:#x} was never issued by this server")
        return self.handles[h.value]

    def _local(self, v: Value) -> Any:
        if isinstance(v, Handle):
            if v.value == 0:
                return None
            return self._object(v)
        if isinstance(v, WireTensor):
            return self.memory.array(v)
        if isinstance(v, WireDevice):
            return Device(v.device_type, v.device_id)
        if isinstance(v, WireDType):
            return DataType.from_code(v.code, v.bits, v.lanes)
        return v

    def _checked(self, t: WireTensor, nbytes: int) -> NDArray:
        arr = self.memory.array(t)
        if nbytes != arr.nbytes:
            raise RPCProtocolError(
                f"copy of {nbytes} bytes for a DLTensor of {arr.nbytes} bytes "
                f"(shape {t.shape}, {arr.dtype})"
            )
        return arr

    def _seq(self, values: list[Value], code: int = C.kReturn) -> bytes:
        assert self.dialect is not None
        return wire.packet_bytes(code, codec.encode_args(values, self.dialect))

    def _void(self) -> bytes:
        assert self.dialect is not None
        return replies.VOID[self.dialect]

    def _exception(self, message: str) -> bytes:
        dialect = self.dialect or Dialect.LEGACY
        return wire.packet_bytes(C.kException, codec.encode_args([message], dialect))

    def _return(self, rv: Any) -> bytes:
        """A call's result as TVM returns it: ``[type code, value(, handle)]``."""
        d = self.dialect
        assert d is not None

        def code(kind: Kind) -> int:
            return codec.type_code(d, kind)

        if rv is None:
            return replies.NONE_RETURN[d]
        if isinstance(rv, np.bool_ | np.integer | np.floating):  # a numpy scalar: a number,
            rv = rv.item()  # as TVM's server converts it (not an object left on the server)
        if type(rv) is int and replies.I64_MIN <= rv <= replies.I64_MAX:
            return replies.int_return(d, rv)
        if isinstance(rv, bool):
            if d is Dialect.LEGACY:  # TVM 0.16 has no bool type code
                return self._seq([code(Kind.INT), int(rv)])
            return self._seq([code(Kind.BOOL), rv])
        if isinstance(rv, int):
            return self._seq([code(Kind.INT), rv])
        if isinstance(rv, float):
            return self._seq([code(Kind.FLOAT), rv])
        if isinstance(rv, str):
            return self._seq([code(Kind.FFI_STR), rv])
        if isinstance(rv, bytes | bytearray):
            return self._seq([code(Kind.FFI_BYTES), bytes(rv)])
        if isinstance(rv, Device):
            return self._seq([code(Kind.DEVICE), WireDevice(rv.device_type, rv.device_id)])
        if isinstance(rv, NDArray):
            tensor = self.memory.add_array(rv)
            handle = self._issue(rv)
            self.array_bases[handle] = tensor.data
            return self._seq([code(Kind.NDARRAY), tensor, Handle(Kind.OPAQUE, handle)])
        if isinstance(rv, Module):
            return self._seq([code(Kind.MODULE), Handle(Kind.OPAQUE, self._issue(rv))])
        if callable(rv):
            return self._seq([code(Kind.FUNC), Handle(Kind.OPAQUE, self._issue(rv))])
        # any other object stays on the server; the client holds it as an RPCObjectRef
        return self._seq([code(Kind.OBJECT), Handle(Kind.OPAQUE, self._issue(rv))])

    # -- syscalls ---------------------------------------------------------------------
    def get_global_func(self, args: list[Value]) -> bytes:
        (name,) = _expect(args, "kGetGlobalFunc", str)
        found = self.env.lookup(name)
        return self._seq([Handle(Kind.OPAQUE, 0 if found is None else self._issue(found))])

    def free_handle(self, args: list[Value]) -> bytes:
        if not args or not isinstance(args[0], Handle):
            raise RPCProtocolError("kFreeHandle: expected [handle] or [handle, type code]")
        handle = args[0].value
        self._object(args[0])
        del self.handles[handle]
        base = self.array_bases.pop(handle, None)
        if base is not None:
            self.memory.release(base)
        return self._void()

    def _device(self, value: Value, what: str) -> Device:
        if not isinstance(value, WireDevice):
            raise RPCProtocolError(f"{what}: expected a device, got {value!r}")
        return Device(value.device_type, value.device_id)

    def set_device(self, args: list[Value]) -> bytes:
        self._device(args[0] if args else None, "kDevSetDevice")
        return self._void()

    def get_attr(self, args: list[Value]) -> bytes:
        dev_v, kind = _expect(args, "kDevGetAttr", WireDevice, int)
        dev = self._device(dev_v, "kDevGetAttr")
        name = _ATTRS.get(kind)
        value = dev._attr(name) if name is not None else None
        if name == "exist":
            value = int(bool(value))
        if isinstance(value, list | tuple):
            value = str(list(value))
        if value is None:
            return self._seq([None])
        return self._seq([value])

    def alloc(self, dev: Device, nbytes: int) -> bytes:
        if not 0 <= nbytes <= self.limits.max_alloc:
            raise RPCProtocolError(
                f"allocation of {nbytes} bytes: expected 0 to {self.limits.max_alloc} (the limit)"
            )
        storage = get_device_api(dev).alloc(dev, nbytes)
        return self._seq([Handle(Kind.OPAQUE, self.memory.add_storage(storage))])

    def alloc_data(self, args: list[Value]) -> bytes:
        dev_v, nbytes, _align, _dtype = _expect(
            args, "kDevAllocData", WireDevice, int, int, WireDType
        )
        return self.alloc(self._device(dev_v, "kDevAllocData"), nbytes)

    def alloc_with_scope(self, args: list[Value]) -> bytes:
        if len(args) != 2 or not isinstance(args[0], WireTensor):
            raise RPCProtocolError("kDevAllocDataWithScope: expected [DLTensor, scope]")
        t, scope = args[0], args[1]
        if scope not in (None, "", "global"):
            raise RPCProtocolError(f"memory scope {scope!r} is not supported; only 'global' is")
        dt = DataType.from_code(t.dtype.code, t.dtype.bits, t.dtype.lanes)
        nbytes = dt.itemsize
        for d in t.shape:
            nbytes *= d
        return self.alloc(self._device(t.device, "kDevAllocDataWithScope"), nbytes)

    def free_data(self, args: list[Value]) -> bytes:
        _dev, ptr = _expect(args, "kDevFreeData", WireDevice, Handle)
        self.memory.release(ptr.value)
        return self._void()

    def stream_sync(self, args: list[Value]) -> bytes:
        dev = self._device(args[0] if args else None, "kDevStreamSync")
        stream = args[1] if len(args) > 1 else None
        dev.sync(stream.value if isinstance(stream, Handle) else 0)
        return self._void()

    def copy_among(self, args: list[Value]) -> bytes:
        if len(args) < 2 or not all(isinstance(a, WireTensor) for a in args[:2]):
            raise RPCProtocolError(
                "kCopyAmongRemote: expected [DLTensor from, DLTensor to, stream]"
            )
        src = self._local(args[0])
        dst = self._local(args[1])
        src.copyto(dst)
        return self._void()

    def create_stream(self, args: list[Value]) -> bytes:
        dev = self._device(args[0] if args else None, "kDevCreateStream")
        return self._seq([Handle(Kind.OPAQUE, int(dev.create_raw_stream().value or 0))])

    def free_stream(self, args: list[Value]) -> bytes:
        dev = self._device(args[0] if args else None, "kDevFreeStream")
        stream = (
            args[1] if len(args) > 1 and isinstance(args[1], Handle) else Handle(Kind.OPAQUE, 0)
        )
        dev.free_raw_stream(stream.value)
        return self._void()

    def set_stream(self, args: list[Value]) -> bytes:
        dev = self._device(args[0] if args else None, "kDevSetStream")
        stream = (
            args[1] if len(args) > 1 and isinstance(args[1], Handle) else Handle(Kind.OPAQUE, 0)
        )
        dev.set_raw_stream(stream.value)
        return self._void()

    def current_stream(self, args: list[Value]) -> bytes:
        self._device(args[0] if args else None, "kDevGetCurrentStream")
        return self._seq([Handle(Kind.OPAQUE, 0)])


_U64 = struct.Struct("<Q")
_NO_ARGS = struct.pack("<i", 0)


def _expect(args: list[Value], what: str, *types: type) -> list[Any]:
    """``args`` if they are exactly of ``types`` (an int may stand for a handle)."""
    if len(args) != len(types):
        raise RPCProtocolError(f"{what}: expected {len(types)} arguments, got {len(args)}")
    out: list[Any] = []
    for i, (a, t) in enumerate(zip(args, types, strict=True)):
        if t is Handle and isinstance(a, int) and not isinstance(a, bool):
            a = Handle(Kind.OPAQUE, a)
        if t is int and isinstance(a, bool):
            a = int(a)
        if not isinstance(a, t):
            raise RPCProtocolError(f"{what}: argument {i} is {a!r}, expected a {t.__name__}")
        out.append(a)
    return out


_SYSCALLS: dict[int, Callable[[ServerSession, list[Value]], bytes]] = {
    C.kGetGlobalFunc: ServerSession.get_global_func,
    C.kFreeHandle: ServerSession.free_handle,
    C.kDevSetDevice: ServerSession.set_device,
    C.kDevGetAttr: ServerSession.get_attr,
    C.kDevAllocData: ServerSession.alloc_data,
    C.kDevFreeData: ServerSession.free_data,
    C.kDevStreamSync: ServerSession.stream_sync,
    C.kCopyAmongRemote: ServerSession.copy_among,
    C.kDevAllocDataWithScope: ServerSession.alloc_with_scope,
    C.kDevCreateStream: ServerSession.create_stream,
    C.kDevFreeStream: ServerSession.free_stream,
    C.kDevSetStream: ServerSession.set_stream,
    C.kDevGetCurrentStream: ServerSession.current_stream,
}


def serve_connection(
    sock: socket.socket,
    workdir: Path,
    limits: wire.Limits = wire.DEFAULT_LIMITS,
    report_dialect: Callable[[Dialect], None] | None = None,
) -> None:
    """Serve one client on ``sock`` (after the handshake) until kShutdown or EOF.

    Raises
    ------
    RPCError
        If the stream breaks inside a packet or its framing is malformed (the caller
        closes the connection; the server goes on).
    """
    session = ServerSession(workdir, limits)
    with contextlib.suppress(OSError):  # not a TCP socket (a test's socketpair)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    packets = wire.PacketReader(sock, limits)
    reported = False
    while True:
        try:
            packet = packets.next()
        except RPCProtocolError as exc:  # the framing is lost: say why, then close
            with contextlib.suppress(OSError):
                sock.sendall(session._exception(f"RPCError: {exc}"))
            raise
        if packet is None:
            return
        reply = session.handle_packet(*packet)
        if not reported and session.dialect is not None and report_dialect is not None:
            report_dialect(session.dialect)
            reported = True
        if reply is None:
            return
        sock.sendall(reply)
