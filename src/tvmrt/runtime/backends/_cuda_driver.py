"""The CUDA driver API (``libcuda.so.1``, shipped with the NVIDIA driver) through ctypes.

Only the entry points tvmrt calls are bound, each with its exact C signature, so a wrong
argument fails in Python rather than in the driver. ``TVMRT_LIBCUDA`` names another
library to load instead (tests use a recording stand-in written in C). Every call goes
through :meth:`Driver.call`, which turns a ``CUresult`` other than ``CUDA_SUCCESS`` into a
:class:`~tvmrt.error.TVMError` naming the call and the driver's error name and text.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

from tvmrt.error import (
    DeviceOutOfMemoryError,
    DeviceUnavailableError,
    KernelError,
    ModuleLoadError,
    TVMError,
)

__all__ = ["Driver", "driver", "LIBRARY_ENV", "CU_STREAM_NON_BLOCKING"]

LIBRARY_ENV = "TVMRT_LIBCUDA"
_DEFAULT_LIBRARY = "libcuda.so.1"
CU_STREAM_NON_BLOCKING = 1
CU_EVENT_DEFAULT = 0

_p = ctypes.c_void_p
_pp = ctypes.POINTER(ctypes.c_void_p)
_int = ctypes.c_int
_uint = ctypes.c_uint
_u64 = ctypes.c_uint64
_size = ctypes.c_size_t
_pint = ctypes.POINTER(ctypes.c_int)
_pu64 = ctypes.POINTER(ctypes.c_uint64)

# name -> argument types; every function returns CUresult (int)
_SIGNATURES: dict[str, list[Any]] = {
    "cuInit": [_uint],
    "cuDriverGetVersion": [_pint],
    "cuDeviceGetCount": [_pint],
    "cuDeviceGet": [_pint, _int],
    "cuDeviceGetName": [ctypes.c_char_p, _int, _int],
    "cuDeviceGetAttribute": [_pint, _int, _int],
    "cuDeviceTotalMem_v2": [ctypes.POINTER(_size), _int],
    "cuDevicePrimaryCtxRetain": [_pp, _int],
    "cuCtxSetCurrent": [_p],
    "cuCtxSynchronize": [],
    "cuMemAlloc_v2": [_pu64, _size],
    "cuMemFree_v2": [_u64],
    "cuMemAllocHost_v2": [_pp, _size],
    "cuMemFreeHost": [_p],
    "cuMemcpyHtoDAsync_v2": [_u64, _p, _size, _p],
    "cuMemcpyDtoHAsync_v2": [_p, _u64, _size, _p],
    "cuMemcpyDtoDAsync_v2": [_u64, _u64, _size, _p],
    "cuMemcpyHtoD_v2": [_u64, _p, _size],
    "cuMemsetD32_v2": [_u64, _uint, _size],
    "cuStreamCreate": [_pp, _uint],
    "cuStreamDestroy_v2": [_p],
    "cuStreamSynchronize": [_p],
    "cuModuleLoadData": [_pp, _p],
    "cuModuleUnload": [_p],
    "cuModuleGetFunction": [_pp, _p, ctypes.c_char_p],
    "cuModuleGetGlobal_v2": [_pu64, ctypes.POINTER(_size), _p, ctypes.c_char_p],
    "cuFuncSetAttribute": [_p, _int, _int],
    "cuLaunchKernel": [_p, _uint, _uint, _uint, _uint, _uint, _uint, _uint, _p, _pp, _pp],
    "cuLaunchCooperativeKernel": [_p, _uint, _uint, _uint, _uint, _uint, _uint, _uint, _p, _pp],
    "cuLaunchHostFunc": [_p, _p, _p],
    "cuEventCreate": [_pp, _uint],
    "cuEventRecord": [_p, _p],
    "cuEventSynchronize": [_p],
    "cuEventElapsedTime": [ctypes.POINTER(ctypes.c_float), _p, _p],
    "cuEventDestroy_v2": [_p],
    "cuGetErrorName": [_int, ctypes.POINTER(ctypes.c_char_p)],
    "cuGetErrorString": [_int, ctypes.POINTER(ctypes.c_char_p)],
}

# CUresult codes whose meaning picks the error class
_OUT_OF_MEMORY = 2
_NO_DEVICE = 100
_INVALID_DEVICE = 101
_MODULE_ERRORS = frozenset({200, 209, 218, 222, 300, 301, 302, 500})  # image, ptx, jit, file


class Driver:
    """``libcuda`` loaded and initialised (``cuInit(0)``), its functions typed."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self.lib = ctypes.CDLL(path)
        except OSError as exc:
            raise DeviceUnavailableError(
                f"CUDA: cannot load the NVIDIA driver library {path!r} ({exc}); CUDA devices "
                "need the NVIDIA driver installed (no CUDA toolkit is needed)"
            ) from None
        self._funcs: dict[str, Any] = {}
        for name, argtypes in _SIGNATURES.items():
            func = getattr(self.lib, name, None)
            if func is None:
                continue  # optional entry points fail when called, naming themselves
            func.argtypes = argtypes
            func.restype = _int
            self._funcs[name] = func
        if "cuInit" not in self._funcs or "cuDriverGetVersion" not in self._funcs:
            raise DeviceUnavailableError(
                f"CUDA: {path!r} is not the NVIDIA driver library (it has no cuInit or "
                "cuDriverGetVersion); TVMRT_LIBCUDA must name the driver's libcuda.so.1, or be "
                "unset"
            )
        self.call("cuInit", 0, error=DeviceUnavailableError)
        version = _int()
        self.call("cuDriverGetVersion", ctypes.byref(version))
        self.version = version.value

    @property
    def version_text(self) -> str:
        """The CUDA version the driver supports, e.g. ``"13.0"``."""
        return f"{self.version // 1000}.{self.version % 1000 // 10}"

    def error_text(self, code: int) -> str:
        """``CUDA_ERROR_X (text)`` for a ``CUresult``, as the driver names it."""
        name, text = ctypes.c_char_p(), ctypes.c_char_p()
        have_name = (
            "cuGetErrorName" in self._funcs
            and self._funcs["cuGetErrorName"](code, ctypes.byref(name)) == 0
            and name.value
        )
        if "cuGetErrorString" in self._funcs:
            self._funcs["cuGetErrorString"](code, ctypes.byref(text))
        shown = name.value.decode() if have_name and name.value else f"CUresult {code}"
        return f"{shown} ({text.value.decode()})" if text.value else shown

    def call(self, name: str, *args: Any, error: type[TVMError] | None = None) -> None:
        """Call driver function ``name``; a failure raises, naming the call and the error."""
        func = self._funcs.get(name)
        if func is None:
            raise DeviceUnavailableError(
                f"CUDA: the driver library {self.path!r} has no function {name}; the NVIDIA "
                "driver is too old for tvmrt"
            )
        code = func(*args)
        if code:
            raise self.failure(name, code, error)

    def failure(self, name: str, code: int, error: type[TVMError] | None = None) -> TVMError:
        """The exception for ``CUresult`` ``code`` returned by ``name``."""
        if error is None:
            if code == _OUT_OF_MEMORY:
                error = DeviceOutOfMemoryError
            elif code in (_NO_DEVICE, _INVALID_DEVICE):
                error = DeviceUnavailableError
            elif code in _MODULE_ERRORS:
                error = ModuleLoadError
            else:
                error = KernelError
        return error(f"CUDA: {name} failed: {self.error_text(code)}")

    def entry(self, name: str) -> Any:
        """The typed ctypes function ``name``, or None where the driver lacks it."""
        return self._funcs.get(name)

    def raw(self, name: str) -> Any:
        """The typed ctypes function ``name`` (for hot paths that check results themselves)."""
        return self._funcs[name]


_driver: list[Driver] = []
_lock = threading.Lock()


def driver() -> Driver:
    """The process's driver (loaded once); DeviceUnavailableError when it is missing."""
    if not _driver:
        with _lock:
            if not _driver:
                _driver.append(Driver(os.environ.get(LIBRARY_ENV) or _DEFAULT_LIBRARY))
    return _driver[0]
