"""The ``opencl`` device module of TVM blobs: OpenCL C source (or a binary) + FunctionInfo.

TVM saves it as ``string fmt`` (``"cl"``: OpenCL C source; ``"xclbin"``, ``"aocx"``...:
a device binary), the kernel table (see :mod:`tvmrt.runtime.launch`; TVM >= 0.21 adds
``arg_extra_tags`` to each entry, read when the bytes hold them) and ``string data``.
The program is built once per OpenCL context, on the first launch there, and each kernel
is created once per context. Host code launches kernels through
``TVMBackendGetFuncFromEnv`` + ``TVMFuncCall`` with buffer handles, scalars and the
launch extents; the handles are those of :mod:`tvmrt.runtime.backends.opencl`.

Loading needs no OpenCL driver; launching does (``pip install 'tvmrt[opencl]'``).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from tvmrt.binfmt.stream import ByteReader
from tvmrt.error import DeviceUnavailableError, KernelError, ModuleLoadError
from tvmrt.runtime.device import Device, opencl
from tvmrt.runtime.device_api import get_device_api
from tvmrt.runtime.launch import (
    DeviceKernel,
    FunctionInfo,
    WorkLoad,
    install_device_workspace,
    read_kernel_table,
)
from tvmrt.runtime.loaders import cuda_launch
from tvmrt.runtime.module import Module
from tvmrt.runtime.packed_func import PackedFunc

__all__ = ["OpenCLModule", "OpenCLKernel", "load_opencl_binary", "current_device"]

_current = threading.local()
_CUDA = 2  # kDLCUDA
# device binaries TVM's OpenCL module loads with clCreateProgramWithBinary
_BINARY_FORMATS = frozenset({"xclbin", "awsxclbin", "aocx"})


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
    """``__tvm_set_device``: compiled host code selects the device of its next launches."""
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


class OpenCLModule(Module):
    """Kernels of one OpenCL program, built per context on first use."""

    def __init__(self, fmt: str, data: bytes, table: dict[str, FunctionInfo]) -> None:
        super().__init__()
        self.fmt = fmt
        self.data = data
        self.table = table
        self._lock = threading.Lock()
        self._programs: dict[int, Any] = {}
        self._kernels: dict[tuple[int, str], Any] = {}
        self._funcs: dict[str, OpenCLKernel] = {}

    @property
    def type_key(self) -> str:
        return "opencl"

    @property
    def format(self) -> str:
        return self.fmt

    def get_source(self, fmt: str = "") -> str:
        """The OpenCL C source (modules saved in format ``cl``; ``""`` for binaries)."""
        return self.data.decode("utf-8", errors="replace") if self.fmt == "cl" else ""

    def _get_function(self, name: str) -> PackedFunc | None:
        func = self._funcs.get(name)
        if func is None:
            info = self.table.get(name)
            if info is None:
                return None
            func = self._funcs.setdefault(name, OpenCLKernel(self, info, name))
        return func

    def kernel(self, dev: Device, name: str) -> Any:
        """The ``cl.Kernel`` ``name`` in the context of ``dev`` (program built once)."""
        key = (dev.device_id, name)
        kern = self._kernels.get(key)
        if kern is not None:
            return kern
        from tvmrt.runtime.backends.opencl import cl

        with self._lock:
            program = self._programs.get(dev.device_id)
            if program is None:
                api = get_device_api(dev)
                context = api.context(dev)  # type: ignore[attr-defined]
                if self.fmt == "cl":
                    program = cl.Program(context, self.get_source())
                else:
                    cl_dev = api.cl_devices()[dev.device_id]  # type: ignore[attr-defined]
                    program = cl.Program(context, [cl_dev], [self.data])
                try:
                    program = program.build()
                except cl.Error as exc:
                    raise ModuleLoadError(
                        f"building the OpenCL program (format {self.fmt!r}) for {dev} failed: {exc}"
                    ) from exc
                self._programs[dev.device_id] = program
            try:
                kern = cl.Kernel(program, name)
            except cl.Error as exc:
                raise ModuleLoadError(
                    f"OpenCL program has no kernel {name!r} that its FunctionInfo table "
                    f"lists: {exc}"
                ) from exc
            self._kernels[key] = kern
        return kern


class OpenCLKernel(DeviceKernel):
    """One OpenCL kernel, launched with TVM's grid/block convention."""

    __slots__ = ("_lock", "_module", "_scalar_types")

    def __init__(self, module: OpenCLModule, info: FunctionInfo, name: str) -> None:
        super().__init__(info, name)
        self._module = module
        self._lock = threading.Lock()
        self._scalar_types = [None if h else t.numpy_dtype for h, t in
                              zip(info.handle_args, info.arg_types, strict=True)]  # fmt: skip

    def launch(self, args: tuple[Any, ...], work: WorkLoad) -> None:
        dev = current_device(opencl().device_type)
        try:
            api = get_device_api(dev)
        except DeviceUnavailableError as exc:
            raise KernelError(f"kernel {self.name!r} cannot run: {exc}") from None
        kern = self._module.kernel(dev, self.name)
        values: list[Any] = []
        for i, (arg, np_type) in enumerate(zip(args, self._scalar_types, strict=True)):
            if np_type is None:
                if not isinstance(arg, int):
                    raise KernelError(
                        f"kernel {self.name!r}: argument {i} must be an OpenCL buffer handle, "
                        f"got {arg!r}"
                    )
                values.append(api.buffer(arg))  # type: ignore[attr-defined]
            else:
                values.append(np.array(arg).astype(np_type)[()])
        from tvmrt.runtime.backends.opencl import cl

        queue = api.queue(dev)  # type: ignore[attr-defined]
        with self._lock:
            try:
                for i, value in enumerate(values):
                    kern.set_arg(i, value)
                cl.enqueue_nd_range_kernel(queue, kern, work.global_size, work.local_size)
            except cl.Error as exc:
                raise KernelError(
                    f"launching OpenCL kernel {self.name!r} on {dev} with grid {work.grid} "
                    f"and block {work.block} failed: {exc}"
                ) from exc


def load_opencl_binary(reader: ByteReader) -> OpenCLModule:
    """``runtime.module.loadbinary_opencl``: read an ``opencl`` module from a blob."""
    at = reader.offset
    fmt = reader.string("OpenCL module format")
    if fmt != "cl" and fmt not in _BINARY_FORMATS:
        raise reader.fail(
            f"OpenCL module format {fmt!r} is not one tvmrt loads: expected 'cl' (OpenCL C "
            f"source) or a device binary ({', '.join(sorted(_BINARY_FORMATS))})",
            at,
        )
    table, _ = read_kernel_table(reader, f"OpenCL module ({fmt})")
    data = bytes(reader.blob("OpenCL program"))
    if fmt == "cl":
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ModuleLoadError(
                f"OpenCL module: format 'cl' but the source is not text: {exc}"
            ) from None
    install_device_workspace()
    return OpenCLModule(fmt, data, table)
