"""TVM's AOT executor modules: ``AotExecutorFactory``, ``metadata_module``, ``AotExecutor``.

A library built with ``Executor("aot")`` carries no graph: a generated entry function
``<mod_name>___tvm_main__`` (``tvmgen_default___tvm_main__``) calls the kernels in order,
and ``get_c_metadata`` returns a C ``TVMMetadata`` struct naming the inputs and outputs
(shape, dtype). Its module blob holds ``AotExecutorFactory`` (params, model name)
importing ``metadata_module`` importing the kernel library. ``factory["default"](dev)``
creates an ``AotExecutor`` that owns one array per input and output and calls the entry
with them (v0.19 ``aot_executor.cc``).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

from tvmrt.binfmt.stream import ByteReader
from tvmrt.error import InternalError, ModuleLoadError
from tvmrt.runtime._ctypes_api import DLDataType
from tvmrt.runtime.device import Device
from tvmrt.runtime.dtype import DataType
from tvmrt.runtime.executor import _aot_native
from tvmrt.runtime.executor._aot_io import AotIO
from tvmrt.runtime.executor.protocol import TensorInfo
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.packed_func import PackedFunc
from tvmrt.runtime.tensor_record import read_ndarray

__all__ = ["AotExecutor", "AotExecutorFactory", "TensorInfo", "read_c_metadata"]

_METADATA_VERSION = 1
_MAX_TENSORS = 1 << 16
_MAX_RANK = 64


class _TensorInfo(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("num_shape", ctypes.c_int64),
        ("dtype", DLDataType),
    ]


class _Metadata(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_int64),
        ("inputs", ctypes.POINTER(_TensorInfo)),
        ("num_inputs", ctypes.c_int64),
        ("outputs", ctypes.POINTER(_TensorInfo)),
        ("num_outputs", ctypes.c_int64),
        ("workspace_pools", ctypes.POINTER(_TensorInfo)),
        ("num_workspace_pools", ctypes.c_int64),
        ("constant_pools", ctypes.c_void_p),
        ("num_constant_pools", ctypes.c_int64),
        ("mod_name", ctypes.c_char_p),
    ]


def _tensors(array: Any, count: int, what: str) -> list[TensorInfo]:
    if count < 0 or count > _MAX_TENSORS:
        raise ModuleLoadError(f"AOT metadata: {count} {what} is out of range")
    out = []
    for i in range(count):
        info = array[i]
        if info.num_shape < 0 or info.num_shape > _MAX_RANK:
            raise ModuleLoadError(f"AOT metadata: {what} {i} has rank {info.num_shape}")
        shape = tuple(int(info.shape[d]) for d in range(info.num_shape))
        if any(d < 0 for d in shape):
            raise ModuleLoadError(f"AOT metadata: {what} {i} has a negative dimension {shape}")
        dtype = DataType.from_code(info.dtype.code, info.dtype.bits, info.dtype.lanes)
        name = (info.name or b"").decode("utf-8", errors="replace")
        out.append(TensorInfo(name, shape, str(dtype)))
    return out


def read_c_metadata(address: int) -> tuple[str, list[TensorInfo], list[TensorInfo]]:
    """``(model name, inputs, outputs)`` from the ``TVMMetadata`` at ``address``.

    Raises
    ------
    ModuleLoadError
        If the struct is of another version, or uses workspace pools (USMP).
    """
    if not address:
        raise ModuleLoadError("AOT metadata: get_c_metadata returned NULL")
    meta = _Metadata.from_address(address)
    if meta.version != _METADATA_VERSION:
        raise ModuleLoadError(
            f"AOT metadata version {meta.version} is not supported (tvmrt reads version "
            f"{_METADATA_VERSION}, TVM 0.10 to 0.20)"
        )
    if meta.num_workspace_pools:
        raise ModuleLoadError(
            "the AOT model was built with unified static memory planning (workspace pools); "
            "tvmrt runs AOT builds without USMP only"
        )
    inputs = _tensors(meta.inputs, meta.num_inputs, "inputs")
    outputs = _tensors(meta.outputs, meta.num_outputs, "outputs")
    name = (meta.mod_name or b"default").decode("utf-8", errors="replace")
    return name, inputs, outputs


class AotExecutor(AotIO):
    """TVM's ``AotExecutor`` module: inputs and outputs as owned arrays, ``run`` calls main.

    Parameters
    ----------
    lib
        The module holding ``get_c_metadata`` and the entry function (with imports).
    device
        ``cpu(0)``: TVM's AOT executor runs on the CPU only.
    """

    def __init__(self, lib: Module, device: Device) -> None:
        if device.device_type != 1 or device.device_id != 0:
            raise InternalError(f"the AOT executor runs on cpu(0) only (as in TVM), got {device}")
        get_metadata = lib.find_function("get_c_metadata", True)
        if get_metadata is None:
            raise ModuleLoadError(
                "the AOT library has no get_c_metadata function (not an AOT build of the "
                "C++ runtime interface)"
            )
        name, inputs, outputs = read_c_metadata(int(get_metadata() or 0))
        entry_name = f"{name}___tvm_main__"  # runtime::get_name_mangled(mod_name, main)
        entry = lib.find_function(entry_name, True)
        if entry is None:
            raise ModuleLoadError(f"the AOT library has no entry function {entry_name!r}")
        super().__init__(inputs, outputs, name, device)
        self.lib = lib
        self._entry = entry
        self._call: tuple[Callable[..., Any], tuple[Any, ...]] | None = None

    def run(self) -> None:
        """Call the model's entry function once."""
        if self._call is None:
            self._call = self._entry.prepare_call(self._args)
        fn, args = self._call
        fn(*args)

    def _functions(self) -> dict[str, Callable[..., Any]]:
        table = super()._functions()
        table["set_input_zero_copy"] = self._not_implemented
        table["set_output_zero_copy"] = self._not_implemented
        return table


class AotExecutorFactory(Module):
    """TVM's ``AotExecutorFactory``: ``factory[model](dev)`` creates an :class:`AotExecutor`."""

    def __init__(self, params: dict[str, NDArray], module_name: str = "default") -> None:
        super().__init__()
        self.params = params
        self.module_name = module_name

    @property
    def type_key(self) -> str:
        return "AotExecutorFactory"

    def create(self, *devices: Device) -> Module:
        """A new executor on ``devices`` (exactly one: cpu(0)) with the params set: the C
        runtime's where it may run the library (:mod:`._aot_native`), else this engine's."""
        if len(devices) != 1:
            raise InternalError(f"Expect exactly 1 device passed (got {len(devices)})")
        if not self._imports:
            raise ModuleLoadError("the AOT executor factory has no library imported")
        native = _aot_native.create(self, devices[0], self.params)
        if native is not None:
            return native
        executor = AotExecutor(self._imports[0], devices[0])
        for name, value in self.params.items():
            executor.input_array(name).copyfrom(value)
        return executor

    def _get_function(self, name: str) -> PackedFunc | None:
        if name == self.module_name:
            return PackedFunc(self.create, name)
        if name == "list_module_names":
            return PackedFunc(lambda: [self.module_name], name)
        if name == "remove_params":
            return PackedFunc(self._without_params, name)
        return None

    def _without_params(self) -> AotExecutorFactory:
        factory = AotExecutorFactory({}, self.module_name)
        for imported in self._imports:
            factory.import_module(imported)
        return factory


class _MetadataModule(Module):
    """``metadata_module``: holds nothing itself; the metadata is in the library it imports."""

    @property
    def type_key(self) -> str:
        return "metadata_module"


def load_factory_binary(reader: ByteReader) -> AotExecutorFactory:
    count = reader.count("number of params", 8)
    names = reader.strings("param names")
    if len(names) != count:
        raise reader.fail(f"AOT factory lists {count} params but {len(names)} names")
    arrays = [read_ndarray(reader) for _ in range(count)]
    module_name = reader.string("module_name")
    return AotExecutorFactory(dict(zip(names, arrays, strict=True)), module_name)


def load_metadata_module(reader: ByteReader) -> Module:
    return _MetadataModule()
