"""The ``opencl`` device module of TVM blobs, and ``__tvm_set_device`` of compiled host code.

TVM saves an OpenCL module as ``string fmt`` (``"cl"``: OpenCL C source; ``"xclbin"``,
``"aocx"``...: a device binary), the kernel table (TVM >= 0.21 adds ``arg_extra_tags`` to
each entry) and ``string data``. The C runtime reads and checks it and runs it
(``_native/runtime/opencl_module.c``: the program is built per device at its first launch
there, each kernel created once per device, arguments set and the kernel enqueued with
``clSetKernelArg`` / ``clEnqueueNDRangeKernel``); :class:`OpenCLModule` is that module,
with what it holds (format, kernel table, source) for inspection. Host code launches
kernels through ``TVMBackendGetFuncFromEnv`` + ``TVMFuncCall`` with buffer handles (the C
runtime's OpenCL memory: :mod:`tvmrt.runtime.backends.opencl`), scalars and the launch
extents, and calls the C function directly.

Loading needs no OpenCL driver; launching does (the C runtime opens ``libOpenCL.so.1``).
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

from tvmrt.binfmt.stream import ByteReader
from tvmrt.error import ModuleLoadError
from tvmrt.runtime import kernel_services
from tvmrt.runtime.device import Device
from tvmrt.runtime.launch import FunctionInfo, read_kernel_table
from tvmrt.runtime.loaders import cuda_launch
from tvmrt.runtime.native_module import NativeModule, c_global, fail
from tvmrt.runtime.packed_func import PackedFunc

__all__ = ["OpenCLModule", "load_opencl_binary", "current_device", "set_device"]

_current = threading.local()
_CUDA, _OPENCL = 2, 4  # kDLCUDA, kDLOpenCL


def current_device(device_type: int) -> Device:
    """The device host code selected with ``__tvm_set_device`` on this thread (default 0).

    CUDA's is kept in C where the native backend is (the C launcher reads it and host code
    sets it there without Python: loaders/cuda_launch.py)."""
    if device_type == _CUDA:
        device_id = cuda_launch.selected_device()
        if device_id is not None:
            return Device(_CUDA, device_id)
    devices: dict[int, Device] = getattr(_current, "devices", {})
    return devices.get(device_type, Device(device_type, 0))


def set_device(device_type: int, device_id: int) -> None:
    """``__tvm_set_device``: compiled host code selects the device of its next launches
    (OpenCL's in the C runtime too, whose OpenCL modules launch there)."""
    if int(device_type) == _OPENCL:
        c_global("__tvm_set_device")(int(device_type), int(device_id))
    if not hasattr(_current, "devices"):
        _current.devices = {}
    _current.devices[int(device_type)] = Device(int(device_type), int(device_id))
    if int(device_type) == _CUDA:
        cuda_launch.select_device(int(device_id))


class _SetDevice(PackedFunc):
    """``__tvm_set_device`` as the registry gives it: :func:`set_device`, and for host code a
    C function that records kDLCUDA's device without Python (loaders/cuda_launch.py)."""

    __slots__ = ("_native_handle",)

    def __init__(self) -> None:
        super().__init__(set_device, "__tvm_set_device")
        self._native_handle: list[int | None] = []

    @property
    def native_handle(self) -> int | None:
        """The C function's handle (what kernel_callbacks gives host code), or None."""
        if not self._native_handle:
            self._native_handle.append(cuda_launch.set_device_handle())
        return self._native_handle[0]


SET_DEVICE = _SetDevice()


class OpenCLModule(NativeModule):
    """An ``opencl`` module of the C runtime: its kernels, and what it was read from."""

    def __init__(self, handle: Any, data: bytes) -> None:
        super().__init__(handle)
        # the module's bytes as saved (checked by the C loader), read here for inspection
        reader = ByteReader(data, "OpenCL module", ModuleLoadError)
        self.fmt = reader.string("OpenCL module format")
        self._rest = reader
        self._contents: tuple[dict[str, FunctionInfo], bytes] | None = None

    @property
    def type_key(self) -> str:
        return "opencl"

    @property
    def format(self) -> str:
        """How the program is saved: ``cl`` (OpenCL C source) or a device binary's format."""
        return self.fmt

    def _read(self) -> tuple[dict[str, FunctionInfo], bytes]:
        """The kernel table and the program, read once, when first asked for."""
        if self._contents is None:
            table, _ = read_kernel_table(self._rest, f"OpenCL module ({self.fmt})")
            self._contents = table, bytes(self._rest.blob("OpenCL program"))
        return self._contents

    @property
    def table(self) -> dict[str, FunctionInfo]:
        """The kernel table: each kernel's argument types and launch tags, by name."""
        return self._read()[0]

    def get_source(self, fmt: str = "") -> str:
        """The OpenCL C source (modules saved in format ``cl``; ``""`` for binaries)."""
        if self.fmt != "cl":
            return ""
        return self._read()[1].decode("utf-8", errors="replace")


_loader: list[Any] = []


def _load_binary() -> Any:
    if not _loader:
        func = kernel_services.native_library().tvmrt_module_load_binary
        func.restype = ctypes.c_int
        func.argtypes = [
            ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p,
            ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_void_p),
        ]  # fmt: skip
        _loader.append(func)
    return _loader[0]


def load_opencl_binary(reader: ByteReader) -> OpenCLModule:
    """``runtime.module.loadbinary_opencl``: the C runtime reads an ``opencl`` module at the
    reader's position (its checks and words) and the reader moves past it."""
    from tvmrt.runtime.native_module import _handle

    start = reader.offset
    rest = reader.raw(reader.remaining, "OpenCL module")  # a view: nothing is copied
    address = np.frombuffer(rest, np.uint8).ctypes.data if len(rest) else None
    consumed, out = ctypes.c_size_t(), ctypes.c_void_p()
    if _load_binary()(
        b"opencl", address, len(rest), reader.what.encode(), ctypes.byref(consumed),
        ctypes.byref(out),
    ):  # fmt: skip
        reader.offset = start
        raise fail()
    reader.offset = start + consumed.value
    module = _handle(int(out.value or 0), "TVMModFree")
    return OpenCLModule(module, bytes(rest[: consumed.value]))
