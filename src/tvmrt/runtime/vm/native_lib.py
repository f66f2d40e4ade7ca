"""The C runtime (``libtvmrt_runtime``) from Python through ctypes: its packed-function
calls and errors, and DLTensor views of numpy arrays (for :mod:`.native`).

The C runtime is tvmrt's one native library, the one
:func:`tvmrt.runtime.kernel_services.native_library` loads: its engines share the process's
thread pool, workspace pool and error slots with the kernels Python runs.
"""

from __future__ import annotations

import ctypes
import re
import threading
from pathlib import Path
from typing import Any

import numpy as np

from tvmrt import error as errors
from tvmrt.error import ArgumentTypeError, TVMError, UnsupportedError
from tvmrt.runtime import kernel_services
from tvmrt.runtime._ctypes_api import ArgTypeCode, DLDataType, DLDevice, DLTensor, TVMValue
from tvmrt.runtime.device_type import DLDeviceType
from tvmrt.runtime.dtype import DataTypeCode

__all__ = ["CFunc", "Owned", "dl_of", "dtype_name", "fail", "library_file", "runtime_library"]

_STR, _INT = ArgTypeCode.STR, ArgTypeCode.INT
_KIND = re.compile(r"^([A-Za-z]+Error): ")
_lock = threading.Lock()
_declared = False


def library_file() -> Path:
    """``tvmrt/lib/libtvmrt_runtime.so`` of this package (checkout or installed wheel)."""
    return Path(kernel_services.library_path())


def runtime_library() -> ctypes.CDLL:
    """The native library with the C runtime's API typed; ModuleLoadError if it is missing."""
    global _declared
    lib = kernel_services.native_library()
    if not _declared:
        with _lock:
            if not _declared:
                _declare(lib)
                _declared = True
    return lib


def _declare(lib: ctypes.CDLL) -> None:
    """The C signatures (pointers must not pass as 32-bit ints)."""
    vp, out, i32 = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int
    lib.TVMGetLastError.restype = ctypes.c_char_p
    lib.TVMGetLastError.argtypes = []
    sigs: dict[str, list[Any]] = {
        "TVMFuncCall": [vp, vp, vp, i32, vp, vp],
        "TVMFuncFree": [vp],
        "TVMFuncGetGlobal": [ctypes.c_char_p, out],
        "TVMModLoadFromFile": [ctypes.c_char_p, ctypes.c_char_p, out],
        "TVMModGetFunction": [vp, ctypes.c_char_p, i32, out],
        "TVMModFree": [vp],
        "TVMObjectFree": [vp],
        "TVMArrayFree": [vp],
        "TVMArrayAlloc": [vp, i32, i32, i32, i32, i32, i32, out],
        "TVMArrayCopyFromBytes": [vp, vp, ctypes.c_size_t],
        "tvmrt_set_num_threads": [i32],
    }
    for name, argtypes in sigs.items():
        func = getattr(lib, name)
        func.argtypes = argtypes
        func.restype = ctypes.c_int


def fail(lib: ctypes.CDLL, what: str) -> TVMError:
    raw = lib.TVMGetLastError() or b""
    msg = raw.decode("utf-8", "replace")
    match = _KIND.match(msg)
    cls: Any = getattr(errors, match.group(1), None) if match else None
    if not (isinstance(cls, type) and issubclass(cls, TVMError)):
        cls = TVMError
    return cls(f"{what} (C VM): {msg[match.end() :] if match else msg}")  # type: ignore[no-any-return]


class CFunc:
    """A C packed function handle, called with ``TVMFuncCall``.

    The argument and return buffers are made once and reused under a lock (a call costs
    a few microseconds less; concurrent callers take turns).
    """

    def __init__(self, lib: ctypes.CDLL, handle: int, name: str) -> None:
        self.lib, self.handle, self.name = lib, ctypes.c_void_p(handle), name
        self._lock = threading.Lock()
        self._size = 0
        self._ret, self._ret_code = TVMValue(), ctypes.c_int(0)
        self._ret_at, self._code_at = ctypes.addressof(self._ret), ctypes.addressof(self._ret_code)
        self._grow(4)

    def _grow(self, n: int) -> None:
        self._values = (TVMValue * n)()
        self._codes = (ctypes.c_int * n)()
        self._at = (ctypes.addressof(self._values), ctypes.addressof(self._codes))
        self._size = n
        # TVMFuncCall over these buffers, called from C (a ctypes call costs ~1 us more)
        self._call = kernel_services.make_packed_call(
            ctypes.cast(self.lib.TVMFuncCall, ctypes.c_void_p).value or 0,
            self.handle.value or 0,
            self._at[0],
            self._at[1],
            n,
            self._ret_at,
            self._code_at,
        )

    def __del__(self) -> None:
        if getattr(self, "handle", None):
            self.lib.TVMFuncFree(self.handle)

    def __call__(self, *args: tuple[int, Any]) -> tuple[int, int]:
        """(type code, value): an int, or a handle's address (user-space addresses are
        positive, so the value's int64 is the address)."""
        with self._lock:
            if len(args) > self._size:
                self._grow(len(args))
            values, codes = self._values, self._codes
            for i, (code, value) in enumerate(args):
                codes[i] = code
                if code == _INT:
                    values[i].v_int64 = value
                elif code == _STR:
                    values[i].v_str = value
                else:
                    values[i].v_handle = value
            if self._call(len(args)) != 0:
                raise fail(self.lib, self.name)
            return self._ret_code.value, self._ret.v_int64


def dtype_name(dt: DLDataType) -> str:
    if dt.lanes == 1 and dt.code == DataTypeCode.UINT and dt.bits == 1:
        return "bool"
    names = {DataTypeCode.INT: "int", DataTypeCode.UINT: "uint", DataTypeCode.FLOAT: "float"}
    if dt.lanes != 1 or dt.code not in names or dt.bits not in (8, 16, 32, 64):
        raise UnsupportedError(
            f"the C VM returned a tensor of type code {dt.code}, {dt.bits} bits, {dt.lanes} "
            "lanes; the Python face reads int, uint, float and bool"
        )
    return f"{names[dt.code]}{dt.bits}"


def dl_of(arr: np.ndarray[Any, Any]) -> tuple[DLTensor, Any]:
    """A DLTensor viewing a C-contiguous numpy array, and what keeps its shape alive."""
    codes = {"i": DataTypeCode.INT, "u": DataTypeCode.UINT, "f": DataTypeCode.FLOAT}
    kind = codes.get(arr.dtype.kind, DataTypeCode.UINT if arr.dtype.kind == "b" else None)
    if kind is None:
        raise ArgumentTypeError(f"the C VM takes int, uint, float or bool tensors, not {arr.dtype}")
    shape = (ctypes.c_int64 * max(arr.ndim, 1))(*arr.shape)
    bits = 1 if arr.dtype.kind == "b" else arr.dtype.itemsize * 8
    dl = DLTensor(
        data=arr.ctypes.data,
        device=DLDevice(DLDeviceType.kDLCPU, 0),
        ndim=arr.ndim,
        dtype=DLDataType(kind, bits, 1),
        shape=shape,
        strides=None,
        byte_offset=0,
    )
    return dl, shape


class Owned:
    """A C object handle released when the Python side drops it."""

    def __init__(self, lib: ctypes.CDLL, handle: ctypes.c_void_p, array_handle: bool = False):
        self.lib, self.handle, self.array_handle = lib, handle, array_handle

    def __del__(self) -> None:
        if self.handle.value:
            (self.lib.TVMArrayFree if self.array_handle else self.lib.TVMObjectFree)(self.handle)
