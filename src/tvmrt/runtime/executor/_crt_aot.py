"""The executor of an MLF AOT package compiled for the host (microTVM's AOT on a PC).

:mod:`tvmrt.runtime.loaders.mlf_aot` compiles the package's C code with the host CRT
platform into a shared library; :func:`create_factory` (the global
``tvm.crt_aot_factory.create``) loads it and returns a :class:`CrtAotFactory`, whose
``default(dev)`` makes a :class:`CrtAotExecutor` with the packed functions of TVM's
``AotExecutor`` (``set_input``, ``run``, ``get_output``, ...), so TVM's face
:class:`~tvmrt.runtime.executor.AotModule` runs it as it runs a host-driven AOT build.

Each executor owns one 64-byte aligned array per input and output and calls the entry
function with them: the ``c`` interface through two structs of data pointers, the
``packed`` interface through ``TVMValue`` handles of ``DLTensor`` s (type code 7). Static
workspace and constant pools live in the library once, so runs of one library (replicas
included) hold its lock in turn.
"""

from __future__ import annotations

import ctypes
import json
import threading
from collections.abc import Callable
from typing import Any

from tvmrt.error import InternalError, ModuleLoadError, TVMError
from tvmrt.runtime._ctypes_api import ArgTypeCode, DLTensor, TVMValue
from tvmrt.runtime.device import Device
from tvmrt.runtime.executor._aot_io import AotIO
from tvmrt.runtime.executor.protocol import TensorInfo
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.packed_func import PackedFunc

__all__ = ["CrtAotExecutor", "CrtAotFactory", "create_factory"]

_ENTRY = ctypes.CFUNCTYPE(ctypes.c_int32)


class _Library:
    """The loaded library: its entry, the guarded callers and the run lock."""

    def __init__(self, path: str, entry: str) -> None:
        try:
            self.dll = ctypes.CDLL(path)
            self.entry = ctypes.cast(getattr(self.dll, entry), ctypes.c_void_p)
        except (OSError, AttributeError) as exc:
            raise ModuleLoadError(
                f"cannot load the compiled MLF AOT library {path!r}: {exc}"
            ) from exc
        self.call_c = self.dll.tvmrt_crt_call_c
        self.call_c.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self.call_c.restype = ctypes.c_int32
        self.call_packed = self.dll.tvmrt_crt_call_packed
        self.call_packed.argtypes = [
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_int,
        ]
        self.call_packed.restype = ctypes.c_int32
        self.last_error = self.dll.tvmrt_crt_last_error
        self.last_error.restype = ctypes.c_char_p
        self.lock = threading.Lock()
        self.path = path


class CrtAotExecutor(AotIO):
    """An AOT executor over a compiled MLF package (TVM's ``AotExecutor`` functions)."""

    def __init__(self, library: _Library, spec: dict[str, Any], device: Device) -> None:
        if device.device_type != 1:
            raise InternalError(f"an MLF AOT package runs on the CPU only, got {device}")
        super().__init__(
            [TensorInfo(t["name"], tuple(t["shape"]), t["dtype"]) for t in spec["inputs"]],
            [TensorInfo(t["name"], tuple(t["shape"]), t["dtype"]) for t in spec["outputs"]],
            f"tvmgen_{spec['model']}",
            device,
        )
        self._library = library
        self.entry_name = str(spec["entry"])
        self.interface = str(spec["interface"])
        self._call = self._prepare()

    def _prepare(self) -> Callable[[], int]:
        lib = self._library
        count = len(self._args)
        if self.interface == "c":
            pointers = [ctypes.c_void_p(a.data_ptr) for a in self._args]
            ins = (ctypes.c_void_p * max(len(self.inputs), 1))(*pointers[: len(self.inputs)])
            outs = (ctypes.c_void_p * max(len(self.outputs), 1))(*pointers[len(self.inputs) :])
            self._keep: tuple[Any, ...] = (ins, outs)
            in_address, out_address = ctypes.addressof(ins), ctypes.addressof(outs)
            return lambda: int(lib.call_c(lib.entry, in_address, out_address))
        tensors: list[DLTensor] = [a.dltensor() for a in self._args]
        values = (TVMValue * count)()
        for i, tensor in enumerate(tensors):
            values[i].v_handle = ctypes.addressof(tensor)
        codes = (ctypes.c_int * count)(*([ArgTypeCode.DLTENSOR_HANDLE] * count))
        self._keep = (tensors, values, codes)
        value_address, code_address = ctypes.addressof(values), ctypes.addressof(codes)
        return lambda: int(lib.call_packed(lib.entry, value_address, code_address, count))

    def run(self) -> None:
        """Call the entry function once (runs of one library take turns)."""
        lib = self._library
        with lib.lock:
            code = self._call()
            message = (lib.last_error() or b"").decode("utf-8", errors="replace")
        if code != 0:
            why = message or "no message"
            raise TVMError(f"{self.entry_name} returned {code}: {why}")


class CrtAotFactory(Module):
    """``factory["default"](dev)`` makes a :class:`CrtAotExecutor` over the library."""

    def __init__(self, library: _Library, spec: dict[str, Any]) -> None:
        super().__init__()
        self._library = library
        self.spec = spec
        self.params: dict[str, NDArray] = {}  # the constants are compiled into the code

    @property
    def type_key(self) -> str:
        return "AotExecutorFactory"

    def create(self, *devices: Device) -> CrtAotExecutor:
        """A new executor on ``devices`` (exactly one: the CPU)."""
        if len(devices) != 1:
            raise InternalError(f"Expect exactly 1 device passed (got {len(devices)})")
        return CrtAotExecutor(self._library, self.spec, devices[0])

    def _get_function(self, name: str) -> PackedFunc | None:
        if name == "default":
            return PackedFunc(self.create, name)
        if name == "list_module_names":
            return PackedFunc(lambda: ["default"], name)
        return None


def create_factory(library_path: str, spec_json: str) -> CrtAotFactory:
    """The global ``tvm.crt_aot_factory.create``: the factory over a compiled package."""
    spec = json.loads(spec_json)
    return CrtAotFactory(_Library(library_path, str(spec["entry"])), spec)
