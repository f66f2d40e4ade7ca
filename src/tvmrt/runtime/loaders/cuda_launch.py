"""The C launcher of CUDA kernels (``src/tvmrt/_native/cuda_launch.c``), from Python.

Compiled host code calls each CUDA kernel, and ``__tvm_set_device``, through
``TVMFuncCall``. With the native backend present, :class:`~tvmrt.runtime.loaders.cuda.CUDAKernel`
hands host code the address of a C launcher instead of a Python handle
(``kernel_callbacks`` gives out a function's ``native_handle``), and ``__tvm_set_device``
is a C function too: a warm launch then packs the arguments, computes the grid and block
and calls ``cuLaunchKernel`` without entering Python.

This module prepares the launchers (argument kinds and launch-parameter slots, from
:class:`~tvmrt.runtime.launch.LaunchConfig`), binds each to its ``CUfunction`` and the
ctypes driver's entry points after its first launch through Python on a device, mirrors
into C the per-thread state the Python path reads (the device ``__tvm_set_device``
selected, the backend's current context and stream, whether a kernel timer runs), and
serves the C side's cold path: whatever C does not cover runs the Python launch with the
same arguments, so both give the same launches and the same errors.
"""

from __future__ import annotations

import ctypes
import itertools
import threading
import weakref
from functools import partial
from typing import Any

from tvmrt.error import KernelError, ModuleLoadError
from tvmrt.runtime import kernel_services
from tvmrt.runtime._ctypes_api import TVM_CALL_ARGTYPES
from tvmrt.runtime.backends import cuda as cuda_backend
from tvmrt.runtime.kernel_callbacks import call_python
from tvmrt.runtime.launch import LaunchConfig
from tvmrt.runtime.packed_func import PackedFunc
from tvmrt.runtime.registry import get_global_func

__all__ = [
    "Launcher",
    "enable",
    "select_device",
    "selected_device",
    "set_device_handle",
    "set_timing",
]

# the Python launch C falls back to: a kernel id, then TVMFuncCall's arguments
_ColdCallback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int64, *TVM_CALL_ARGTYPES)
_u64, _int, _p, _s = ctypes.c_uint64, ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p
_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "tvmrt_cuda_set_cold": (None, [_p]),
    "tvmrt_cuda_set_enabled": (None, [_int]),
    "tvmrt_cuda_thread_activate": (None, [_u64, _int, ctypes.c_size_t]),
    "tvmrt_cuda_thread_stream": (None, [_u64, _int, ctypes.c_size_t]),
    "tvmrt_cuda_select_device": (None, [_int]),
    "tvmrt_cuda_selected_device": (_int, []),
    "tvmrt_cuda_set_timing": (None, [_int]),
    "tvmrt_cuda_launcher_new": (_p, [ctypes.c_int64, _s, _int, _s, _int, _s, _int, _int]),
    "tvmrt_cuda_launcher_bind": (None, [_p, _u64, _int, _p, _p, _p, _p, _p]),
    "tvmrt_cuda_launcher_release": (None, [_p]),
    "tvmrt_cuda_set_device_function": (_p, []),
    "tvmrt_cuda_arg_kind": (_int, [_int, _int, _int]),
}  # fmt: skip

_lock = threading.Lock()
_state: list[Any] = []  # [the native library, the cold callback] once set up; [None] without
_kernels: dict[int, weakref.ref[PackedFunc]] = {}
_ids = itertools.count(1)


def _native() -> Any:
    """The native backend with the launcher's functions typed, or None where it is absent."""
    if _state:
        return _state[0]
    with _lock:
        if not _state:
            try:
                lib = kernel_services.native_library()
                for name, (restype, argtypes) in _SIGNATURES.items():
                    func = getattr(lib, name)
                    func.restype, func.argtypes = restype, argtypes
            except (OSError, AttributeError, ModuleLoadError):
                _state.append(None)  # no extension (or an old one): kernels launch from Python
                return None
            callback = _ColdCallback(_cold)
            lib.tvmrt_cuda_set_cold(ctypes.cast(callback, ctypes.c_void_p))
            cuda_backend.mirror_thread_state(_Mirror(lib))
            _state.extend([lib, callback])  # the callback lives as long as the process
    return _state[0]


class _Mirror:
    """What backends/cuda.py reports of a thread's context and streams, written into C."""

    def __init__(self, lib: Any) -> None:
        self._activate = lib.tvmrt_cuda_thread_activate
        self._stream = lib.tvmrt_cuda_thread_stream

    def activated(self, api: int, device_id: int, stream: int) -> None:
        self._activate(api, device_id, stream)

    def stream_set(self, api: int, device_id: int, stream: int) -> None:
        self._stream(api, device_id, stream)


def _cold(kernel_id: int, args: Any, codes: Any, num_args: int, ret_val: Any, ret_code: Any) -> int:
    """The Python launch of kernel ``kernel_id`` (0: ``__tvm_set_device``), run as
    kernel_callbacks runs any Python function: errors go to the thread's error slot."""
    return call_python(partial(_python_launch, kernel_id), args, codes, num_args, ret_val, ret_code)


def _python_launch(kernel_id: int, *values: Any) -> Any:
    if kernel_id == 0:  # __tvm_set_device with arguments C leaves to Python
        return get_global_func("__tvm_set_device")(*values)
    ref = _kernels.get(kernel_id)
    kernel = ref() if ref is not None else None
    if kernel is None:
        raise KernelError(f"TVMFuncCall: CUDA kernel {kernel_id} was released with its module")
    return kernel(*values)


def _address(func: Any) -> int:
    return int(ctypes.cast(func, ctypes.c_void_p).value or 0) if func is not None else 0


class Launcher:
    """The C launcher of one kernel: ``handle`` is what host code calls through TVMFuncCall."""

    def __init__(self, lib: Any, handle: int, cooperative: bool) -> None:
        self._lib = lib
        self.handle = handle
        self._cooperative = cooperative
        self._bound: set[tuple[int, int, int]] = set()

    @classmethod
    def create(cls, kernel: PackedFunc, config: LaunchConfig, arg_types: Any) -> Launcher | None:
        """A launcher for ``kernel``, or None (no native backend, or one C does not take)."""
        lib = _native()
        if lib is None:
            return None
        # the C table's kind of each argument (255: none, so C refuses the launcher)
        kinds = [lib.tvmrt_cuda_arg_kind(t.type_code, t.bits, t.lanes) % 256 for t in arg_types]
        kernel_id = next(_ids)
        handle = lib.tvmrt_cuda_launcher_new(
            kernel_id, repr(kernel.name).encode("utf-8", errors="replace"), len(kinds),
            bytes(kinds) or None, len(config.slots), bytes(config.slots) or None,
            int(config.dyn_shared_memory), int("use_cooperative_launch" in config.flags),
        )  # fmt: skip
        if not handle:
            return None
        _kernels[kernel_id] = weakref.ref(kernel)
        weakref.finalize(kernel, _release, lib, handle, kernel_id)
        return cls(lib, int(handle), "use_cooperative_launch" in config.flags)

    def bind(self, api: Any, dev: Any, func: int) -> None:
        """After a Python launch on ``dev`` (its context current on this thread): tell C this
        thread's state and, once per function, the ``CUfunction`` and driver entries."""
        token, stream, device_id = api.token, api.stream(dev), dev.device_id
        self._lib.tvmrt_cuda_thread_activate(token, device_id, stream)
        if (token, device_id, func) in self._bound:
            return
        drv = api.driver
        launch, coop = drv.entry("cuLaunchKernel"), drv.entry("cuLaunchCooperativeKernel")
        if not (coop if self._cooperative else launch):
            return  # the Python launch reports the missing entry point
        self._lib.tvmrt_cuda_launcher_bind(
            self.handle, token, device_id, func, _address(launch), _address(coop),
            _address(drv.entry("cuGetErrorName")), _address(drv.entry("cuGetErrorString")),
        )  # fmt: skip
        self._bound.add((token, device_id, func))


def _release(lib: Any, handle: int, kernel_id: int) -> None:
    lib.tvmrt_cuda_launcher_release(handle)
    _kernels.pop(kernel_id, None)


def select_device(device_id: int) -> bool:
    """Record ``__tvm_set_device(kDLCUDA, device_id)`` for C; False where C does not hold it
    (no native backend: the caller keeps it)."""
    lib = _native()
    if lib is None:
        return False
    lib.tvmrt_cuda_select_device(device_id if 0 <= device_id < 2**31 else -1)
    return 0 <= device_id < 2**31


def selected_device() -> int | None:
    """This thread's CUDA device as C holds it, or None (no native backend, or an id C does
    not hold)."""
    lib = _native()
    if lib is None:
        return None
    device_id = int(lib.tvmrt_cuda_selected_device())
    return device_id if device_id >= 0 else None


def set_timing(on: bool) -> None:
    """A kernel timer starts or stops on this thread: timed launches go through Python."""
    lib = _native()
    if lib is not None:
        lib.tvmrt_cuda_set_timing(int(on))


def enable(on: bool) -> bool:
    """Turn the C launches on or off for the whole process (off: every launch and
    ``__tvm_set_device`` from host code runs the Python path, as without the native
    backend; for benchmarks and diagnosis). Returns whether a C launcher exists at all."""
    lib = _native()
    if lib is not None:
        lib.tvmrt_cuda_set_enabled(int(on))
    return lib is not None


def set_device_handle() -> int | None:
    """The handle of ``__tvm_set_device`` in C (kDLCUDA there, the rest through
    :func:`_cold` to the registry's Python function), or None without the native backend."""
    lib = _native()
    handle = lib.tvmrt_cuda_set_device_function() if lib is not None else None
    return int(handle) if handle else None
