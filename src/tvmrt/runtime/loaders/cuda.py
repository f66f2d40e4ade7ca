"""The ``cuda`` device module: PTX, cubin or fatbin + TVM's FunctionInfo table.

Where it comes from:

* the ``cuda`` entry of a module blob: ``str fmt`` (``ptx``, ``cubin``, ``fatbin``), the
  kernel table (:mod:`tvmrt.runtime.launch`), ``str data``; TVM >= 0.21 adds
  ``vec<i32> arg_extra_tags`` to each table entry (the loader reads whichever layout the
  bytes hold: an entry with extra tags has exactly one per argument, each 0 or 1);
* separate files (``lib.imported_modules[0].save("x.ptx")``): ``x.ptx``/``x.cubin``/
  ``x.fatbin`` beside ``x.tvm_meta.json``, through ``load_module`` + ``import_module``.

Loading needs no driver. On the first launch on a GPU the image is checked against it
(:func:`~tvmrt.runtime.loaders.cuda_image.check_runs_on`) and loaded with
``cuModuleLoadData``; each launch packs the arguments as TVM's ``PackFuncVoidAddr`` does
(int32, uint32 and float32 narrowed to 32 bits; 64-bit values and handles as they are)
and calls ``cuLaunchKernel`` on the thread's current stream, without waiting. Host code
calls a kernel's C launcher instead (:mod:`~tvmrt.runtime.loaders.cuda_launch`), which does
the same in C once the kernel has launched through here on the device.
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
from pathlib import Path
from typing import Any

from tvmrt.binfmt.files import MAX_LIBRARY_BYTES, MAX_META_BYTES, read_regular
from tvmrt.binfmt.stream import ByteReader
from tvmrt.error import DeviceUnavailableError, KernelError, ModuleLoadError, TVMError
from tvmrt.runtime.device import Device, cuda
from tvmrt.runtime.device_api import get_device_api
from tvmrt.runtime.dtype import DataType
from tvmrt.runtime.launch import (
    DeviceKernel,
    FunctionInfo,
    WorkLoad,
    install_device_workspace,
    read_kernel_table,
)
from tvmrt.runtime.loaders import cuda_launch
from tvmrt.runtime.loaders.cuda_image import CudaImage, check_runs_on, describe_image
from tvmrt.runtime.loaders.opencl import current_device
from tvmrt.runtime.module import Module
from tvmrt.runtime.packed_func import PackedFunc

__all__ = [
    "CUDAModule",
    "CUDAKernel",
    "load_cuda_binary",
    "load_cuda_file",
    "argument_ctype",
    "kernel_timer",
]

FORMATS = ("ptx", "cubin", "fatbin")
_SMEM_ATTRIBUTE = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
_SMEM_DEFAULT_LIMIT = 48 * 1024
_BARRIER = "__tvm_prepare_global_barrier"
_BARRIER_STATE = b"__tvm_global_barrier_state"
_CTYPES: dict[tuple[int, int], Any] = {
    (0, 32): ctypes.c_int32, (0, 64): ctypes.c_int64, (1, 32): ctypes.c_uint32,
    (1, 64): ctypes.c_uint64, (2, 32): ctypes.c_float, (2, 64): ctypes.c_double,
    (3, 64): ctypes.c_uint64,
}  # fmt: skip
_timing = threading.local()


def argument_ctype(dtype: DataType, kernel: str, index: int) -> Any:
    """The C type a kernel argument is passed as (TVM's ``GetArgConvertCode``), or refuse."""
    ctype = _CTYPES.get((dtype.type_code, dtype.bits)) if dtype.lanes == 1 else None
    if ctype is None:
        raise ModuleLoadError(
            f"CUDA kernel {kernel!r}: cannot handle argument {index} of type {dtype} as a "
            "device function argument (TVM passes only 32/64-bit ints, floats and handles)"
        )
    return ctype


class kernel_timer:
    """Within ``with kernel_timer() as t``, time this thread's CUDA launches with events.

    ``t.times`` gets ``(kernel name, milliseconds)`` per launch once the block exits (the
    events are read after the stream has finished).
    """

    def __init__(self) -> None:
        self.times: list[tuple[str, float]] = []
        self._pending: list[tuple[str, Any, Any, Any]] = []

    def __enter__(self) -> kernel_timer:
        _timing.timer = self
        cuda_launch.set_timing(True)  # the C launcher leaves timed launches to Python
        return self

    def __exit__(self, *exc: object) -> None:
        _timing.timer = None
        cuda_launch.set_timing(False)
        self.drain()

    def drain(self) -> None:
        """Read the events of the launches so far into :attr:`times` (waits for them)."""
        pending, self._pending = self._pending, []
        for name, drv, start, end in pending:
            ms = ctypes.c_float()
            drv.call("cuEventSynchronize", end)
            drv.call("cuEventElapsedTime", ctypes.byref(ms), start, end)
            drv.call("cuEventDestroy_v2", start)
            drv.call("cuEventDestroy_v2", end)
            self.times.append((name, float(ms.value)))

    def clock_ns(self) -> int:
        """A clock for the time evaluator: the kernel time (events) of this block's launches
        so far, in nanoseconds; it moves only while kernels run, so an evaluator's reading
        after ``sync`` is the kernels' own time, without launch overhead."""
        self.drain()
        return round(sum(ms for _, ms in self.times) * 1e6)


class CUDAModule(Module):
    """Kernels of one CUDA image, loaded per GPU on first launch there."""

    def __init__(self, fmt: str, data: bytes, table: dict[str, FunctionInfo], what: str) -> None:
        super().__init__()
        self.fmt = fmt
        self.data = data
        self.table = table
        self.what = what
        self.image: CudaImage = describe_image(data, what)
        self._lock = threading.Lock()
        self._modules: dict[int, int] = {}
        self._functions: dict[tuple[int, str], int] = {}
        self._funcs: dict[str, PackedFunc] = {}
        for info in table.values():
            if 1 in info.arg_extra_tags:
                raise ModuleLoadError(
                    f"{what}: kernel {info.name!r} takes a TMA tensor map argument "
                    "(arg_extra_tags = 1, TVM >= 0.21); tvmrt does not pass tensor maps"
                )
            for i, dtype in enumerate(info.arg_types):
                argument_ctype(dtype, info.name, i)

    @property
    def type_key(self) -> str:
        return "cuda"

    @property
    def format(self) -> str:
        return self.fmt

    def get_source(self, fmt: str = "") -> str:
        """The PTX text (``""`` for machine code)."""
        return self.data.decode("utf-8", errors="replace") if self.image.kind == "ptx" else ""

    def _get_function(self, name: str) -> PackedFunc | None:
        func = self._funcs.get(name)
        if func is None:
            if name == _BARRIER:
                func = PackedFunc(self._prepare_global_barrier, _BARRIER)
            elif name in self.table:
                func = CUDAKernel(self, self.table[name], name)
            else:
                return None
            func = self._funcs.setdefault(name, func)
        return func

    def api(self, dev: Device, kernel: str) -> Any:
        """The CUDA backend serving ``dev``, its context current on this thread."""
        from tvmrt.runtime.backends.cuda import CUDADeviceAPI

        api = get_device_api(dev)
        if not isinstance(api, CUDADeviceAPI):
            reason = getattr(api, "reason", f"{dev} is served by backend {api.name!r}")
            raise DeviceUnavailableError(f"CUDA kernel {kernel!r} cannot run: {reason}")
        api.activate(dev)
        return api

    def cu_module(self, dev: Device, api: Any) -> int:
        """The ``CUmodule`` on ``dev`` (checked against the GPU, then loaded, once)."""
        handle = self._modules.get(dev.device_id)
        if handle is not None:
            return handle
        with self._lock:
            handle = self._modules.get(dev.device_id)
            if handle is None:
                version = api.attribute(dev, "compute_version")
                major, minor = (int(x) for x in str(version).split("."))
                check_runs_on(self.image, major * 10 + minor, api.driver.version, self.what)
                data = self.data + b"\0" if self.image.kind == "ptx" else self.data
                out = ctypes.c_void_p()
                api.driver.call("cuModuleLoadData", ctypes.byref(out), data)
                handle = self._modules[dev.device_id] = int(out.value or 0)
        return handle

    def cu_function(self, dev: Device, api: Any, name: str) -> int:
        """The ``CUfunction`` ``name`` on ``dev``."""
        key = (dev.device_id, name)
        func = self._functions.get(key)
        if func is None:
            module = self.cu_module(dev, api)
            out = ctypes.c_void_p()
            try:
                api.driver.call(
                    "cuModuleGetFunction", ctypes.byref(out), ctypes.c_void_p(module),
                    name.encode(), error=ModuleLoadError,
                )  # fmt: skip
            except ModuleLoadError as exc:
                raise ModuleLoadError(
                    f"{self.what}: the CUDA image has no kernel {name!r} that its FunctionInfo "
                    f"table lists: {exc}"
                ) from None
            func = self._functions[key] = int(out.value or 0)
        return func

    def _prepare_global_barrier(self) -> None:
        dev = current_device(cuda().device_type)
        api = self.api(dev, _BARRIER)
        module = self.cu_module(dev, api)
        ptr, size = ctypes.c_uint64(), ctypes.c_size_t()
        api.driver.call(
            "cuModuleGetGlobal_v2", ctypes.byref(ptr), ctypes.byref(size),
            ctypes.c_void_p(module), _BARRIER_STATE,
        )  # fmt: skip
        api.driver.call("cuMemsetD32_v2", ptr.value, 0, 1)


class CUDAKernel(DeviceKernel):
    """One CUDA kernel, launched with TVM's grid/block convention and argument packing."""

    __slots__ = (
        "__weakref__",
        "_ctypes",
        "_launcher",
        "_lock",
        "_module",
        "_params",
        "_slots",
        "_smem",
        "native_handle",
    )  # fmt: skip

    def __init__(self, module: CUDAModule, info: FunctionInfo, name: str) -> None:
        super().__init__(info, name)
        self._module = module
        self._lock = threading.Lock()
        self._ctypes = [argument_ctype(t, name, i) for i, t in enumerate(info.arg_types)]
        self._slots = [c() for c in self._ctypes]
        params = (ctypes.c_void_p * max(len(self._slots), 1))()
        for i, slot in enumerate(self._slots):
            params[i] = ctypes.cast(ctypes.pointer(slot), ctypes.c_void_p)
        self._params = params
        self._smem: dict[int, int] = {}
        # host code calls the C launcher (cuda_launch.c) where the native backend is
        self._launcher = cuda_launch.Launcher.create(self, self.config, info.arg_types)
        self.native_handle = self._launcher.handle if self._launcher is not None else None

    def launch(self, args: tuple[Any, ...], work: WorkLoad) -> None:
        dev = current_device(cuda().device_type)
        module = self._module
        api = module.api(dev, self.name)
        func = module.cu_function(dev, api, self.name)
        if self._launcher is not None:
            self._launcher.bind(api, dev, func)
        drv = api.driver
        smem = work.dyn_shared_memory
        if smem >= _SMEM_DEFAULT_LIMIT and self._smem.get(dev.device_id, 0) < smem:
            drv.call("cuFuncSetAttribute", ctypes.c_void_p(func), _SMEM_ATTRIBUTE, smem)
            self._smem[dev.device_id] = smem
        stream = ctypes.c_void_p(api.stream(dev))
        timer: kernel_timer | None = getattr(_timing, "timer", None)
        launch = "cuLaunchCooperativeKernel" if "use_cooperative_launch" in self.config.flags \
            else "cuLaunchKernel"  # fmt: skip
        with self._lock:
            for i, (slot, value) in enumerate(zip(self._slots, args, strict=True)):
                try:
                    slot.value = 0 if value is None else value
                except TypeError:
                    raise KernelError(
                        f"kernel {self.name!r}: argument {i} must be a "
                        f"{self.info.arg_types[i]} value, got {value!r}"
                    ) from None
            events = _events(drv, stream) if timer is not None else None
            (gx, gy, gz), (bx, by, bz) = work.grid, work.block
            extra = () if launch != "cuLaunchKernel" else (None,)
            try:
                drv.call(launch, ctypes.c_void_p(func), gx, gy, gz, bx, by, bz, smem, stream,
                         self._params, *extra)  # fmt: skip
            except TVMError as exc:
                raise KernelError(
                    f"launching CUDA kernel {self.name!r} on {dev} with grid {work.grid}, "
                    f"block {work.block} and {smem} bytes of dynamic shared memory failed: {exc}"
                ) from None
            if events is not None and timer is not None:
                drv.call("cuEventRecord", events[1], stream)
                timer._pending.append((self.name, drv, *events))


def _events(drv: Any, stream: ctypes.c_void_p) -> tuple[ctypes.c_void_p, ctypes.c_void_p]:
    start, end = ctypes.c_void_p(), ctypes.c_void_p()
    drv.call("cuEventCreate", ctypes.byref(start), 0)
    drv.call("cuEventCreate", ctypes.byref(end), 0)
    drv.call("cuEventRecord", start, stream)
    return start, end


def load_cuda_binary(reader: ByteReader) -> CUDAModule:
    """``runtime.module.loadbinary_cuda``: read a ``cuda`` module from a blob."""
    at = reader.offset
    fmt = reader.string("CUDA module format")
    if fmt not in FORMATS:
        source = fmt in ("cu", "cuda")  # TVM built without CUDA keeps the CUDA C source
        what = "is CUDA C source, which needs the CUDA toolkit to compile" if source else ""
        raise reader.fail(
            f"CUDA module format {fmt!r} {what or 'is not one tvmrt loads'}: expected "
            f"{', '.join(FORMATS)}",
            at,
        )
    what = f"{reader.what}: CUDA module ({fmt})"
    table, _ = read_kernel_table(reader, what)
    data = bytes(reader.blob("CUDA image"))
    install_device_workspace()
    return CUDAModule(fmt, data, table, what)


def load_cuda_file(path: str) -> CUDAModule:
    """``runtime.module.loadfile_ptx`` (``_cubin``, ``_fatbin``): image + ``x.tvm_meta.json``."""
    file = Path(path)
    fmt = file.suffix[1:]
    meta_path = file.with_suffix(".tvm_meta.json")
    if not os.path.lexists(meta_path):
        raise ModuleLoadError(
            f"CUDA module {path!r}: its kernel table {meta_path.name!r} is missing (TVM "
            "saves it beside the image)"
        )
    text = read_regular(meta_path, "CUDA kernel table", MAX_META_BYTES, ModuleLoadError)
    try:
        meta = json.loads(text)
        info = meta["func_info"]
        table: dict[str, FunctionInfo] = {}
        for key, entry in info.items():
            types = tuple(DataType(t) for t in entry.get("arg_types", []))
            tags = entry.get("launch_param_tags", entry.get("thread_axis_tags", []))
            extra = tuple(int(t) for t in entry.get("arg_extra_tags", []))
            table[key] = FunctionInfo(entry.get("name") or key, types, tuple(tags), extra)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ModuleLoadError(
            f"CUDA module {path!r}: {meta_path.name!r} is not a TVM kernel table "
            f"({{'func_info': {{name: {{arg_types, launch_param_tags}}}}}}): {exc}"
        ) from None
    for key, entry in table.items():  # the tags must be ones TVM knows, within C's limits
        from tvmrt.runtime.launch import LaunchConfig, check_kernel_limits

        check_kernel_limits(key, len(entry.arg_types), entry.launch_param_tags)
        LaunchConfig.from_info(entry, key)
    install_device_workspace()
    image = read_regular(file, "CUDA image", MAX_LIBRARY_BYTES, ModuleLoadError)
    return CUDAModule(fmt, image, table, f"CUDA module {path!r}")
