"""What a client holds of a remote session: devices, arrays, functions and modules.

TVM's design, kept: a remote device is an ordinary :class:`~tvmrt.runtime.Device` whose
type carries the session (``(table_index + 1) * RPC_SESS_MASK + device_type``), served by
a :class:`RemoteDeviceAPI` registered for that type, so ``tvmrt.nd.array(x, remote.cpu())``,
``.numpy()`` and ``copyto`` are the runtime's own code over remote memory. Functions and
modules returned by the server are :class:`RemoteFunc` and :class:`RPCModule`, which the
runtime's Python faces (``GraphModule``...) use like local ones. Nothing here imports the
layers above the runtime.

Every handle the server issues is freed (``kFreeHandle``) once its Python object is gone;
finalizers only queue the handle, and the client sends the queue before its next request,
so a garbage collection in the middle of a request never interleaves packets.
"""

from __future__ import annotations

import math
import os
import struct
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from tvmrt.error import (
    ArgumentTypeError,
    DeviceUnavailableError,
    FunctionNotFoundError,
    GlobalFunctionNotFoundError,
    InvalidArgumentError,
    RPCError,
)
from tvmrt.rpc.codec import Kind, WireDevice, WireDType, WireTensor
from tvmrt.runtime.benchmark import BenchmarkResult
from tvmrt.runtime.device import DEVICE_ATTR_KINDS, RPC_SESS_MASK, STR2MASK, Device
from tvmrt.runtime.device_api import DeviceAPI, DeviceStorage, Storage
from tvmrt.runtime.dtype import DataType
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.packed_func import PackedFunc

__all__ = ["RemoteDeviceAPI", "RemoteFunc", "RPCModule", "RemoteObject", "SessionFiles"]

# the properties a remote device is asked for (kDevGetAttr), by TVM's DeviceAttrKind number:
# those up to kMaxThreadDimensions, which every TVM server answers
_ATTR_KINDS = {name: kind for name, kind in DEVICE_ATTR_KINDS.items() if kind <= 8}


class ClientEndpoint(Protocol):
    """What remote objects ask of their session's connection (``client_endpoint``)."""

    peer: str

    def lifeline(self) -> object: ...
    def remote_device(self, device_type: int, device_id: int) -> Device: ...
    def release(self, handle: int, kind: Kind) -> None: ...
    def call_function(self, handle: int, args: Sequence[object], name: str) -> Any: ...
    def module_function(
        self, module: RPCModule, name: str, query_imports: bool
    ) -> PackedFunc | None: ...
    def get_global(self, name: str) -> RemoteFunc | None: ...
    def call_global(self, name: str, args: Sequence[object]) -> Any: ...
    def local_device_type(self, dev: Device) -> int: ...
    def device_attr(self, dev: Device, kind: int) -> Any: ...
    def alloc_data(self, dev: Device, nbytes: int, alignment: int) -> int: ...
    def free_data(self, dev: Device, ptr: int) -> None: ...
    def stream_sync(self, dev: Device, stream: int) -> None: ...
    def copy_to_remote(self, tensor: WireTensor, data: memoryview) -> None: ...
    def copy_from_remote(self, tensor: WireTensor) -> bytes: ...


class RemoteObject:
    """A server-side object the client cannot read (TVM's ``RPCObjectRef``); freed when dropped."""

    def __init__(self, endpoint: ClientEndpoint, handle: int) -> None:
        self._endpoint = endpoint
        self._lifeline = endpoint.lifeline()  # the session lives while this does
        self.handle = handle
        weakref.finalize(self, endpoint.release, handle, Kind.OBJECT)

    def __repr__(self) -> str:
        return f"RemoteObject({self.handle:#x})"


class RemoteFunc(PackedFunc):
    """A function of the remote session; calling it is one ``kCallFunc`` round trip."""

    __slots__ = ("__weakref__", "_endpoint", "_lifeline", "handle")

    def __init__(
        self, endpoint: ClientEndpoint, handle: int, name: str, owned: bool = True
    ) -> None:
        super().__init__(self._call, name)
        self._endpoint = endpoint
        self._lifeline = endpoint.lifeline()  # the session lives while this does
        self.handle = handle
        if owned:
            weakref.finalize(self, endpoint.release, handle, Kind.FUNC)

    def _call(self, *args: Any) -> Any:
        return self._endpoint.call_function(self.handle, args, self.name)

    def prepare_call(
        self, args: Sequence[NDArray]
    ) -> tuple[Callable[..., object], tuple[Any, ...]]:
        return (self._call, tuple(args))

    def __repr__(self) -> str:
        return f"RemoteFunc({self.name!r}, {self.handle:#x})"


class RPCModule(Module):
    """A module living in the remote session (TVM's ``RPCModule``, type key ``"rpc"``).

    Function lookups go to the server (``tvm.rpc.server.ModuleGetFunction``); a name the
    module lacks is ``None`` there and :class:`~tvmrt.error.FunctionNotFoundError` here.
    ``time_evaluator`` runs remotely (``runtime.RPCTimeEvaluator``): the server times the
    calls, so the network is not in the figures.
    """

    def __init__(self, endpoint: ClientEndpoint, handle: int, name: str = "") -> None:
        super().__init__()
        self._endpoint = endpoint
        self._lifeline = endpoint.lifeline()  # the session lives while this does
        self.handle = handle
        self.name = name
        weakref.finalize(self, endpoint.release, handle, Kind.MODULE)

    @property
    def type_key(self) -> str:
        return "rpc"

    def __repr__(self) -> str:
        return f"Module(type_key='rpc', {self.name or 'remote'}@{self.handle:#x})"

    def _get_function(self, name: str) -> PackedFunc | None:
        return self._endpoint.module_function(self, name, query_imports=False)

    def remote_global_func(self, name: str) -> RemoteFunc:
        """The global function ``name`` of this module's session (how the Python faces
        reach the server, e.g. ``tvm.graph_executor.create``, without importing rpc)."""
        func = self._endpoint.get_global(name)
        if func is None:
            raise FunctionNotFoundError(f"the RPC server has no global function {name!r}")
        return func

    def find_function(self, name: str, query_imports: bool = False) -> PackedFunc | None:
        return self._endpoint.module_function(self, name, query_imports)

    def import_module(self, module: Module) -> None:
        if not isinstance(module, RPCModule) or module._endpoint is not self._endpoint:
            raise ArgumentTypeError(
                f"a remote module can only import a module of the same session, got {module!r}"
            )
        self._endpoint.call_global("tvm.rpc.server.ImportModule", (self, module))

    def time_evaluator(
        self,
        func_name: str,
        dev: Device,
        number: int = 10,
        repeat: int = 1,
        min_repeat_ms: float = 0,
        limit_zero_time_iterations: int = 100,
        cooldown_interval_ms: float = 0,
        repeats_to_cooldown: int = 1,
        cache_flush_bytes: int = 0,
        f_preproc: str = "",
    ) -> Callable[..., BenchmarkResult]:
        """Time ``func_name`` on the server (TVM's ``Module.time_evaluator`` of an RPC module).

        Returns ``evaluator(*args)``: it runs the timing remotely and returns a
        :class:`~tvmrt.runtime.BenchmarkResult` of seconds per call for each repeat.
        """
        local_type = self._endpoint.local_device_type(dev)
        remote = self._endpoint.call_global(
            "runtime.RPCTimeEvaluator",
            (
                self,
                func_name,
                local_type,
                dev.device_id,
                int(number),
                int(repeat),
                int(min_repeat_ms),
                int(limit_zero_time_iterations),
                int(cooldown_interval_ms),
                int(repeats_to_cooldown),
                int(cache_flush_bytes),
                f_preproc,
            ),
        )
        if not isinstance(remote, RemoteFunc):
            raise FunctionNotFoundError(
                f"the server's runtime.RPCTimeEvaluator returned {remote!r}, not a function"
            )

        def evaluator(*args: Any) -> BenchmarkResult:
            blob = remote(*args)
            if not isinstance(blob, bytes | bytearray) or len(blob) % 8:
                raise InvalidArgumentError(
                    f"the server's time evaluator returned {type(blob).__name__} "
                    f"({len(blob) if isinstance(blob, bytes | bytearray) else '?'} bytes); "
                    "expected packed float64 seconds"
                )
            return BenchmarkResult(struct.unpack(f"<{len(blob) // 8}d", bytes(blob)))

        evaluator.remote = remote  # type: ignore[attr-defined]  # keeps the handle alive
        return evaluator


class SessionFiles:
    """A session's work folder, module loader and devices: the runtime's
    :class:`~tvmrt.runtime.remote_session.RemoteSession` (``RPCSession`` forwards to it)."""

    def __init__(self, endpoint: ClientEndpoint) -> None:
        self.endpoint = endpoint

    def global_func(self, name: str) -> RemoteFunc:
        """The server's global function ``name``.

        Raises
        ------
        GlobalFunctionNotFoundError
            If the server has no such function.
        """
        func = self.endpoint.get_global(name)
        if func is None:
            raise GlobalFunctionNotFoundError(
                f"the RPC server at {self.endpoint.peer} has no global function {name!r}"
            )
        return func

    def upload(
        self, data: str | os.PathLike[str] | bytes | bytearray, target: str | None = None
    ) -> None:
        """Write a local file, or bytes named by ``target``, into the server's work folder."""
        if isinstance(data, bytes | bytearray):
            if not target:
                raise InvalidArgumentError("target must present when file is a bytearray")
            blob = bytes(data)
        else:
            path = os.fspath(data)
            with open(path, "rb") as handle:
                blob = handle.read()
            target = target or os.path.basename(path)
        self.global_func("tvm.rpc.server.upload")(target, blob)

    def load_module(self, path: str) -> RPCModule:
        """Load ``path`` (uploaded before) on the server; returns the remote module."""
        try:
            loaded = self.global_func("tvm.rpc.server.load_module")(path)
        except RPCError as exc:
            raise RPCError(f"load_module({path!r}) failed on the server: {exc}") from None
        return self.module(loaded, path)

    def module(self, value: object, what: str) -> RPCModule:
        """``value`` checked to be a module of the session, named ``what``."""
        if not isinstance(value, RPCModule):
            raise RPCError(f"{what} returned {value!r}, not a module")
        value.name = what
        return value

    def device(self, dev_type: int | str, dev_id: int = 0) -> Device:
        """Device ``dev_type``/``dev_id`` of the server, encoded with this session."""
        if isinstance(dev_type, str):
            name = dev_type.split()[0] if dev_type.strip() else dev_type
            if name not in STR2MASK:
                raise InvalidArgumentError(
                    f"unknown device type {dev_type!r}; expected one of {sorted(STR2MASK)}"
                )
            code = STR2MASK[name]
        elif isinstance(dev_type, int) and not isinstance(dev_type, bool):
            code = dev_type
        else:
            raise ArgumentTypeError(f"dev_type must be an int or a str, got {dev_type!r}")
        if not 0 < code < RPC_SESS_MASK:
            raise InvalidArgumentError(f"device type {code} is not a local device type (1..127)")
        return self.endpoint.remote_device(code, dev_id)


class _RemoteArrayStorage(DeviceStorage):
    """Memory of an array the server returned: freed through the array's handle.

    ``obj`` is ``(array handle, session lifeline)``.
    """

    __slots__ = ()

    def __del__(self) -> None:
        api = self.api
        if isinstance(api, RemoteDeviceAPI) and isinstance(self.obj, tuple):
            api.endpoint.release(self.obj[0], Kind.NDARRAY)


class RemoteDeviceAPI(DeviceAPI):
    """Memory and copies of one device type of one session, done by the server."""

    name = "rpc"

    def __init__(self, endpoint: ClientEndpoint) -> None:
        self.endpoint = endpoint
        self._exist: dict[Device, bool] = {}

    @property
    def session(self) -> SessionFiles:
        """The session serving this device type (``runtime.remote_session`` finds it here)."""
        return SessionFiles(self.endpoint)

    def attribute(self, dev: Device, name: str) -> Any:
        if name == "exist" and dev in self._exist:
            return self._exist[dev]
        kind = _ATTR_KINDS.get(name)
        if kind is None:
            return None
        value = self.endpoint.device_attr(dev, kind)
        if name == "exist":
            self._exist[dev] = bool(value)
        return value

    def alloc(self, dev: Device, nbytes: int, alignment: int = 64) -> Storage:
        if nbytes >= 0 and not self.attribute(dev, "exist"):
            raise DeviceUnavailableError(
                f"device {dev} does not exist on the RPC server: its machine has no such "
                "device, or no driver for it (for CUDA: the NVIDIA driver and a GPU)"
            )
        return super().alloc(dev, nbytes, alignment)

    def _alloc(self, dev: Device, nbytes: int, alignment: int) -> Any:
        handle = self.endpoint.alloc_data(dev, nbytes, alignment)
        # obj: the session lives while its arrays do
        return DeviceStorage(self, dev, handle, nbytes, None, self.endpoint.lifeline())

    def free(self, storage: Storage) -> None:
        if not isinstance(storage, _RemoteArrayStorage):
            self.endpoint.free_data(storage.device, storage.handle)

    def copy_from_host(self, dst: Storage, offset: int, src: np.ndarray[Any, Any]) -> None:
        data = np.ascontiguousarray(src).reshape(-1).view(np.uint8)
        self.endpoint.copy_to_remote(_raw_desc(dst, offset, data.size), data.data)

    def copy_to_host(self, src: Storage, offset: int, dst: np.ndarray[Any, Any]) -> None:
        raw = self.endpoint.copy_from_remote(_raw_desc(src, offset, dst.nbytes))
        dst.reshape(-1).view(np.uint8)[...] = np.frombuffer(raw, np.uint8)

    def sync(self, dev: Device, stream: int = 0) -> None:
        self.endpoint.stream_sync(dev, stream)

    def wrap_returned(self, tensor: WireTensor, dev: Device, array_handle: int) -> NDArray:
        """An NDArray over a tensor the server returned, freed through ``array_handle``."""
        dtype = DataType.from_code(tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes)
        nbytes = tensor.byte_offset + math.prod(tensor.shape) * dtype.itemsize
        owner = (array_handle, self.endpoint.lifeline())
        storage = _RemoteArrayStorage(self, dev, tensor.data, nbytes, None, owner)
        return NDArray.from_storage(storage, tensor.byte_offset, tensor.shape, dtype)


def _raw_desc(storage: Storage, offset: int, nbytes: int) -> WireTensor:
    if offset < 0 or offset + nbytes > storage.nbytes:
        raise InvalidArgumentError(
            f"copy of {nbytes} bytes at offset {offset} does not fit the "
            f"{storage.nbytes}-byte remote allocation on {storage.device}"
        )
    dev = storage.device
    device = WireDevice(dev.device_type % RPC_SESS_MASK, dev.device_id)
    return WireTensor(storage.handle, device, WireDType(1, 8, 1), (nbytes,), offset)
