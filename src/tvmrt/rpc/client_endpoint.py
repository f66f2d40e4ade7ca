"""The client end of one RPC connection: requests out, replies in, one at a time.

It speaks the dialect the server answers in (TVM <= 0.20's type codes, or tvm-ffi's type
indices; :mod:`tvmrt.rpc.codec`), converts Python values to wire values and back, and
owns the session's :class:`~tvmrt.rpc.remote.RemoteDeviceAPI`. Replies are checked as
bad input: a lying length, an unknown code or a value of the wrong kind is an
:class:`~tvmrt.error.RPCProtocolError`, never a hang or a wrong answer.
"""

from __future__ import annotations

import contextlib
import math
import socket
import struct
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

from tvmrt.error import (
    ArgumentTypeError,
    GlobalFunctionNotFoundError,
    InvalidArgumentError,
    RPCError,
    RPCProtocolError,
    RPCSessionTimeoutError,
)
from tvmrt.rpc.client_values import from_return, single_handle, to_wire
from tvmrt.rpc.codec import (
    Dialect,
    Handle,
    Kind,
    Reader,
    Value,
    WireDevice,
    WireDType,
    WireTensor,
    decode_args,
    encode_args,
    encode_tensor,
    type_code,
)
from tvmrt.rpc.remote import RemoteDeviceAPI, RemoteFunc, RPCModule
from tvmrt.rpc.wire import (
    DEFAULT_LIMITS,
    PROTOCOL_VERSION,
    RPC_CODE_DUPLICATE,
    RPC_CODE_MISMATCH,
    RPC_MAGIC,
    Limits,
    RPCCode,
    handshake_bytes,
    packet_bytes,
    recv_exact,
    recv_packet,
)
from tvmrt.runtime.device import (
    RPC_SESS_MASK,
    Device,
    register_device_api,
    unregister_device_api,
)
from tvmrt.runtime.packed_func import PackedFunc

__all__ = ["ClientEndpoint", "open_endpoint"]


# how long past the session's timeout the client still waits for the server's answer
REPLY_GRACE_S = 2.0


def open_endpoint(
    url: str,
    port: int,
    key: str,
    table_index: int,
    timeout: float | None = 60.0,
    session_timeout: float = 0,
) -> ClientEndpoint:
    """Connect to ``url:port``, shake hands with ``key`` and initialise the session.

    ``timeout`` bounds connecting and the handshake. With a ``session_timeout`` the
    server must end the session by then, so the client waits for no reply longer than
    that plus :data:`REPLY_GRACE_S` (a silent server is an RPCSessionTimeoutError, not a
    hang); without one it waits as long as the server takes, as TVM's client does.

    Raises
    ------
    RPCError
        If nothing listens there, or the server refuses the key.
    """
    try:
        sock = socket.create_connection((url, int(port)), timeout=timeout)
    except TimeoutError:
        waited = "the system's limit" if timeout is None else f"{timeout:g} s"
        raise RPCSessionTimeoutError(
            f"cannot connect to the RPC server at {url}:{port}: no answer to the TCP "
            f"connect within {waited}"
        ) from None
    except OSError as exc:
        raise RPCError(f"cannot connect to the RPC server at {url}:{port}: {exc}") from exc
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    step = "handshake reply"
    waited = "the system's limit" if timeout is None else f"{timeout:g} s"
    try:
        sock.sendall(handshake_bytes(RPC_MAGIC, f"client:{key}"))
        by = _deadline(sock)  # the whole handshake, however the server trickles it
        # a refusal is the code alone (TVM's servers send 4 bytes and close)
        (code,) = struct.unpack("<i", recv_exact(sock, 4, "the server's handshake", by))
        if code == RPC_CODE_MISMATCH:
            raise RPCError(f"the RPC server at {url}:{port} has a different key than {key!r}")
        if code == RPC_CODE_DUPLICATE:
            raise RPCError(f"the RPC server at {url}:{port} refused key {key!r} as a duplicate")
        if code != RPC_MAGIC:
            raise RPCProtocolError(
                f"{url}:{port} answered the handshake with {code:#x}, not TVM's RPC magic"
            )
        (length,) = struct.unpack("<i", recv_exact(sock, 4, "the server's handshake", by))
        if not 0 <= length <= DEFAULT_LIMITS.max_key:
            raise RPCProtocolError(
                f"{url}:{port}: handshake key of {length} bytes, expected 0 to "
                f"{DEFAULT_LIMITS.max_key}"
            )
        recv_exact(sock, length, "the server's key", by)
        endpoint = ClientEndpoint(sock, table_index, f"{url}:{port}")
        step = "reply to the session's init"
        endpoint.init_server()
        sock.settimeout(session_timeout + REPLY_GRACE_S if session_timeout > 0 else None)
    except TimeoutError:
        sock.close()
        raise RPCSessionTimeoutError(
            f"{url}:{port} accepted the connection but sent no {step} within {waited}: "
            "is a TVM RPC server listening there (not a tracker or another service)?"
        ) from None
    except BaseException:
        sock.close()
        raise
    return endpoint


class _Lifeline:
    """Kept alive by a session's remote objects; its finalizer closes the session."""

    __slots__ = ("__weakref__",)


class ClientEndpoint:
    """One connected session; every method is one request and its reply."""

    def __init__(
        self, sock: socket.socket, table_index: int, peer: str, limits: Limits = DEFAULT_LIMITS
    ) -> None:
        self._sock: socket.socket | None = sock
        self.peer = peer
        self.table_index = table_index
        self.limits = limits
        self.dialect = Dialect.LEGACY
        self._lock = threading.RLock()
        self._to_free: list[tuple[int, Kind]] = []
        self._free_lock = threading.Lock()
        self._globals: dict[str, int] = {}  # handles: globals are never freed
        # Every remote object holds the lifeline; when the last of them and the session
        # are gone, the session closes. The endpoint itself keeps only a weak reference.
        line = _Lifeline()
        self._lifeline = weakref.ref(line)
        self._first_line: _Lifeline | None = line
        weakref.finalize(line, self.close)
        self._device_apis: dict[int, RemoteDeviceAPI] = {}

    # -- life ------------------------------------------------------------------------------
    def lifeline(self) -> object:
        """The object whose life keeps the session open (held by every remote object)."""
        line = self._first_line or self._lifeline()
        self._first_line = None  # from now on only holders keep it alive
        if line is None:
            raise RPCError(f"the RPC session with {self.peer} is closed")
        return line

    @property
    def closed(self) -> bool:
        return self._sock is None

    def close(self) -> None:
        """Send kShutdown (best effort), close the socket, drop the session's devices."""
        with self._lock:
            sock, self._sock = self._sock, None
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.sendall(packet_bytes(RPCCode.kShutdown))
                sock.close()
            for device_type in self._device_apis:
                unregister_device_api(device_type)
            self._device_apis.clear()

    def release(self, handle: int, kind: Kind) -> None:
        """Queue ``handle`` for kFreeHandle before the next request (safe in finalizers)."""
        if self._sock is not None:
            with self._free_lock:
                self._to_free.append((handle, kind))

    # -- devices ---------------------------------------------------------------------------
    def remote_device(self, device_type: int, device_id: int) -> Device:
        """The device ``device_type``/``device_id`` of this session, with its backend.

        Raises
        ------
        RPCProtocolError
            If ``device_type`` is not a device type of a server (1 to 127): the encoded
            type would name a local device or another session's, whose backend a session
            must never replace.
        """
        _check_device_type(device_type, self.peer)
        encoded = (self.table_index + 1) * RPC_SESS_MASK + int(device_type)
        if encoded not in self._device_apis:
            api = RemoteDeviceAPI(self)
            register_device_api(encoded, api, override=True)
            self._device_apis[encoded] = api
        return Device(encoded, device_id)

    def local_device_type(self, dev: Device) -> int:
        """``dev``'s type on the server; it must be a device of this session."""
        if not isinstance(dev, Device):
            raise ArgumentTypeError(f"expected a Device of the remote session, got {dev!r}")
        if dev.device_type // RPC_SESS_MASK - 1 != self.table_index:
            raise InvalidArgumentError(
                f"device {dev} is not a device of the RPC session with {self.peer} "
                "(use session.cpu() or session.device(...))"
            )
        return dev.device_type % RPC_SESS_MASK

    def _wire_device(self, dev: Device) -> WireDevice:
        return WireDevice(self.local_device_type(dev), dev.device_id)

    # -- requests --------------------------------------------------------------------------
    def init_server(self) -> None:
        """kInitServer with no arguments; the reply's null tells the server's dialect."""
        version = PROTOCOL_VERSION.encode()
        payload = struct.pack("<Q", len(version)) + version + struct.pack("<i", 0)
        body = self._request(RPCCode.kInitServer, payload)
        reader = Reader(body, "the kInitServer reply")
        count = reader.i32() if reader.left >= 4 else 0
        if count == 1 and reader.left >= 4:
            code = reader.i32()
            if code == type_code(Dialect.FFI, Kind.NULL):
                self.dialect = Dialect.FFI
        self._decode(body, "the kInitServer reply")

    def get_global(self, name: str) -> RemoteFunc | None:
        """The server's global function ``name``, or ``None`` if it has none."""
        handle = self._globals.get(name)
        if handle is None:
            values = self._syscall(RPCCode.kGetGlobalFunc, [name])
            with self._refused_ends():
                handle = single_handle(values, f"kGetGlobalFunc({name!r})")
            self._globals[name] = handle
        return None if handle == 0 else RemoteFunc(self, handle, name, owned=False)

    def call_global(self, name: str, args: Sequence[object]) -> Any:
        """Call the server's global function ``name``."""
        func = self.get_global(name)
        if func is None:
            raise GlobalFunctionNotFoundError(
                f"the RPC server at {self.peer} has no global function {name!r}"
            )
        return func(*args)

    def module_function(
        self, module: RPCModule, name: str, query_imports: bool
    ) -> PackedFunc | None:
        """``module``'s function ``name`` (``tvm.rpc.server.ModuleGetFunction``), or ``None``."""
        found = self.call_global("tvm.rpc.server.ModuleGetFunction", (module, name, query_imports))
        if found is None:
            return None
        if not isinstance(found, RemoteFunc):
            raise RPCProtocolError(
                f"ModuleGetFunction({name!r}) returned {found!r}, not a function"
            )
        found.name = name
        return found

    def call_function(self, handle: int, args: Sequence[object], name: str) -> Any:
        """kCallFunc of ``handle`` on ``args``; the result as a client object."""
        wire = [to_wire(self, arg, i, name) for i, arg in enumerate(args)]
        payload = struct.pack("<Q", handle) + encode_args(wire, self.dialect, ffi_objects=True)
        with self._lock:
            body = self._request(RPCCode.kCallFunc, payload, f"calling {name}")
            values = self._decode(body, f"the reply of {name}")
        with self._refused_ends():
            return from_return(self, values, name)

    def device_attr(self, dev: Device, kind: int) -> Any:
        values = self._syscall(RPCCode.kDevGetAttr, [self._wire_device(dev), kind])
        return values[0] if values else None

    def alloc_data(self, dev: Device, nbytes: int, alignment: int) -> int:
        if nbytes > self.limits.max_alloc:
            raise InvalidArgumentError(
                f"cannot allocate {nbytes} bytes on {dev}: above the client's limit "
                f"{self.limits.max_alloc}"
            )
        args: list[Value] = [
            self._wire_device(dev),
            int(nbytes),
            int(alignment),
            WireDType(1, 8, 1),
        ]
        return single_handle(self._syscall(RPCCode.kDevAllocData, args), "kDevAllocData")

    def free_data(self, dev: Device, ptr: int) -> None:
        if self._sock is not None:
            args: list[Value] = [self._wire_device(dev), Handle(Kind.OPAQUE, ptr)]
            self._syscall(RPCCode.kDevFreeData, args)

    def stream_sync(self, dev: Device, stream: int) -> None:
        args: list[Value] = [self._wire_device(dev), Handle(Kind.OPAQUE, stream)]
        self._syscall(RPCCode.kDevStreamSync, args)

    def copy_to_remote(self, tensor: WireTensor, data: memoryview) -> None:
        head = encode_tensor(tensor) + struct.pack("<Q", data.nbytes)
        with self._lock:
            self._flush_frees()
            self._send(RPCCode.kCopyToRemote, head, data)
            self._decode(self._reply("kCopyToRemote"), "the reply of kCopyToRemote")

    def copy_from_remote(self, tensor: WireTensor) -> bytes:
        nbytes = math.prod(tensor.shape) * ((tensor.dtype.bits + 7) // 8) * tensor.dtype.lanes
        payload = encode_tensor(tensor) + struct.pack("<Q", nbytes)
        with self._lock:
            self._flush_frees()
            self._send(RPCCode.kCopyFromRemote, payload)
            code, body = self._recv("kCopyFromRemote")
            if code != RPCCode.kCopyAck:
                self._raise_unexpected(code, body, "kCopyFromRemote")
            if len(body) != nbytes:
                self._drop()
                raise RPCProtocolError(
                    f"kCopyFromRemote: the server at {self.peer} sent {len(body)} bytes, "
                    f"{nbytes} were asked for"
                )
            return body

    # -- plumbing --------------------------------------------------------------------------
    def _syscall(self, code: RPCCode, args: list[Value]) -> list[Value]:
        with self._lock:
            body = self._request(code, encode_args(args, self.dialect))
            return self._decode(body, f"the reply of {code.name}")

    def _request(self, code: RPCCode, payload: bytes, what: str = "") -> bytes:
        with self._lock:
            if code not in (RPCCode.kFreeHandle, RPCCode.kInitServer):
                self._flush_frees()
            self._send(code, payload)
            return self._reply(what or code.name)

    def _flush_frees(self) -> None:
        with self._free_lock:
            pending, self._to_free = self._to_free, []
        for handle, kind in pending:
            args: list[Value] = [Handle(Kind.OPAQUE, handle)]
            if self.dialect is Dialect.LEGACY:
                args.append(type_code(Dialect.LEGACY, kind))
            self._request(RPCCode.kFreeHandle, encode_args(args, self.dialect))

    def _send(self, code: int, head: bytes, data: memoryview | None = None) -> None:
        sock = self._sock
        if sock is None:
            raise RPCError(f"the RPC session with {self.peer} is closed")
        size = 4 + len(head) + (data.nbytes if data is not None else 0)
        try:
            sock.sendall(struct.pack("<Qi", size, code) + head)
            if data is not None and data.nbytes:
                sock.sendall(data)
        except OSError as exc:
            self._drop()
            raise RPCError(f"lost the RPC session with {self.peer}: {exc}") from exc

    def _recv(self, what: str) -> tuple[int, bytes]:
        sock = self._sock
        if sock is None:
            raise RPCError(f"the RPC session with {self.peer} is closed")
        try:
            packet = recv_packet(sock, self.limits, _deadline(sock))
        except TimeoutError as exc:
            self._drop()
            raise RPCSessionTimeoutError(
                f"{what}: the RPC server at {self.peer} did not answer within the session's "
                f"timeout (+{REPLY_GRACE_S:g} s)"
            ) from exc
        except OSError as exc:
            self._drop()
            raise RPCError(f"lost the RPC session with {self.peer}: {exc}") from exc
        except RPCError:
            self._drop()
            raise
        if packet is None:
            self._drop()
            raise RPCError(f"the RPC server at {self.peer} closed the session during {what}")
        return packet

    def _reply(self, what: str) -> bytes:
        code, body = self._recv(what)
        if code != RPCCode.kReturn:
            self._raise_unexpected(code, body, what)
        return body

    def _raise_unexpected(self, code: int, body: bytes, what: str) -> NoReturn:
        if code == RPCCode.kException:
            values = self._decode(body, "an exception")
            text = str(values[0]) if values else "(no message)"
            if "RPCSessionTimeoutError" in text[:200]:
                self._drop()
                raise RPCSessionTimeoutError(f"{what} on {self.peer}: {text}")
            text = text or "(the server sent no message)"
            raise RPCError(f"Error caught from RPC call ({what} on {self.peer}):\n{text}")
        self._drop()
        raise RPCProtocolError(
            f"{what}: the server at {self.peer} answered with packet code {code}; "
            "expected kReturn or kException"
        )

    @contextlib.contextmanager
    def _refused_ends(self) -> Iterator[None]:
        """A reply the client refuses ends the session, as a packet it cannot decode does:
        whatever the server sends after it cannot be trusted to answer the next request."""
        try:
            yield
        except RPCProtocolError:
            self._drop()
            raise

    def _drop(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    def _decode(self, body: bytes, what: str) -> list[Value]:
        try:
            return decode_args(body, self.dialect, self.limits)
        except RPCProtocolError as exc:
            self._drop()
            raise RPCProtocolError(f"{what} from {self.peer}: {exc}") from exc


def _deadline(sock: socket.socket) -> float | None:
    """A reply's total deadline: the socket's timeout counts for the whole packet, so a
    server trickling bytes cannot stretch it (a per-``recv`` timeout would never fire)."""
    budget = sock.gettimeout()
    return None if budget is None else time.monotonic() + budget


def _check_device_type(device_type: int, peer: str) -> None:
    if isinstance(device_type, bool) or not 0 < device_type < RPC_SESS_MASK:
        raise RPCProtocolError(
            f"the RPC server at {peer} named device type {device_type}: expected 1 to "
            f"{RPC_SESS_MASK - 1} (a device type of the server)"
        )
