"""Calling tvm-ffi kernels (TVM >= 0.21): ``TVMFFIAny`` arguments and ``FFIKernelFunc``.

A tvm-ffi kernel is ``int f(void* self, const TVMFFIAny* args, int32_t num_args,
TVMFFIAny* result)`` (tvm-ffi's ``TVMFFISafeCallType``). Tensors travel as ``DLTensor*``
(type index 7) with DLPack dtype codes (bool is ``(6, 8, 1)``) and the data pointer
already offset; :meth:`FFIKernelFunc.prepare_call` builds the argument array once and
returns a native call object. A failing kernel sets the backend's error slot with a kind
and a message, which become a :class:`~tvmrt.error.KernelError`. Loading such libraries is
:mod:`tvmrt.runtime.loaders.ffi`.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any, NoReturn

import numpy as np

from tvmrt.error import ArgumentTypeError, KernelError
from tvmrt.runtime import kernel_services
from tvmrt.runtime._ctypes_api import DLDataType, DLTensor, FFITypeIndex, TVMFFIAny
from tvmrt.runtime._dlpack import dlpack_dtype
from tvmrt.runtime.device import Device
from tvmrt.runtime.dtype import DataType
from tvmrt.runtime.loaders._dso import check_aligned
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.packed_func import PackedFunc, PreparedCall

__all__ = ["FFIKernelFunc", "kernel_call_parts"]

# the TVMFFITypeIndex values kernels pass and return (unchanged since v0.21)
_NONE, _INT, _BOOL, _FLOAT = (
    FFITypeIndex.NONE,
    FFITypeIndex.INT,
    FFITypeIndex.BOOL,
    FFITypeIndex.FLOAT,
)
_OPAQUE_PTR, _DATATYPE, _DEVICE = (
    FFITypeIndex.OPAQUE_PTR,
    FFITypeIndex.DATA_TYPE,
    FFITypeIndex.DEVICE,
)
_RAW_STR, _SMALL_STR = FFITypeIndex.RAW_STR, FFITypeIndex.SMALL_STR

# int (*)(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result)
_SafeCall = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p
)


def _error_text(name: str, kind: str, message: str) -> str:
    message = message.rstrip()
    if not message:
        return f"function {name!r} failed without setting an error message"
    return f"{kind}: {message}" if kind else message


def _ffi_dltensor(arr: NDArray) -> DLTensor:
    """A ``DLTensor`` for tvm-ffi kernels: DLPack dtype codes, data pointer already offset."""
    legacy = arr.dltensor()  # owns the shape/strides arrays (cached on the NDArray)
    code, bits, lanes = dlpack_dtype(arr.dtype)
    return DLTensor(
        data=arr.data_ptr or None,
        device=legacy.device,
        ndim=legacy.ndim,
        dtype=DLDataType(code, bits, lanes),
        shape=legacy.shape,
        strides=legacy.strides,
        byte_offset=0,
    )


def _check_tensor(arr: NDArray, index: int, name: str) -> None:
    check_aligned(arr, index, name)


def _set_any(slot: TVMFFIAny, arg: object, index: int, name: str, keep: list[object]) -> None:
    """Encode ``arg`` into ``slot``; objects the kernel will point into go to ``keep``."""
    if isinstance(arg, NDArray):
        _check_tensor(arg, index, name)
        dl = _ffi_dltensor(arg)
        slot.type_index, slot.v_ptr = FFITypeIndex.DLTENSOR_PTR, ctypes.addressof(dl)
        keep.extend((arg, dl))
    elif arg is None:
        slot.type_index = _NONE
    elif isinstance(arg, bool | np.bool_):
        slot.type_index, slot.v_int64 = _BOOL, int(arg)
    elif isinstance(arg, int | np.integer):
        slot.type_index, slot.v_int64 = _INT, int(arg)
    elif isinstance(arg, float | np.floating):
        slot.type_index, slot.v_float64 = _FLOAT, float(arg)
    elif isinstance(arg, DataType):
        code, bits, lanes = dlpack_dtype(arg)
        slot.type_index, slot.v_dtype = _DATATYPE, DLDataType(code, bits, lanes)
    elif isinstance(arg, Device):
        slot.type_index = _DEVICE
        slot.v_device.device_type, slot.v_device.device_id = arg.device_type, arg.device_id
    elif isinstance(arg, str):
        data = ctypes.create_string_buffer(arg.encode("utf-8"))
        slot.type_index, slot.v_ptr = _RAW_STR, ctypes.addressof(data)
        keep.append(data)
    else:
        raise ArgumentTypeError(
            f"function {name!r}: argument {index} of type {type(arg).__name__} cannot be passed "
            "to a tvm-ffi kernel; expected an NDArray, int, float, bool, str, DataType, Device "
            "or None"
        )


def _decode(result: TVMFFIAny, name: str) -> object:
    index = result.type_index
    if index == _NONE:
        return None
    if index == _INT:
        return int(result.v_int64)
    if index == _BOOL:
        return bool(result.v_int64)
    if index == _FLOAT:
        return float(result.v_float64)
    if index == _OPAQUE_PTR:
        return result.v_ptr
    if index == _SMALL_STR:
        raw = ctypes.string_at(ctypes.addressof(result) + 8, min(result.zero_padding, 7))
        return raw.decode("utf-8", errors="replace")
    # an object reference: releasing it needs libtvm_ffi, which tvmrt does not use
    raise ArgumentTypeError(
        f"function {name!r} returned a tvm-ffi value of type index {index}; tvmrt receives "
        "only None, int, bool, float, pointers and short strings from kernels"
    )


class FFIKernelFunc(PackedFunc):
    """A function of a tvm-ffi kernel library (``TVMFFISafeCallType``).

    Parameters
    ----------
    address
        Address of the C function.
    name
        Its name in the module (``add`` for the symbol ``__tvm_ffi_add``).
    library
        The module it belongs to (kept alive with the function).
    """

    __slots__ = ("address", "library")

    def __init__(self, address: int, name: str, library: Module) -> None:
        super().__init__(_SafeCall(address), name)
        self.address = address
        self.library = library

    def _raise_error(self) -> NoReturn:
        kind, message = kernel_services.take_last_error_with_kind()
        raise KernelError(_error_text(self.name, kind, message))

    def __call__(self, *args: Any) -> Any:
        """Call with tensors (as ``DLTensor*``), ints, floats, bools, strings or ``None``.

        Raises
        ------
        KernelError
            If the kernel reports an error, e.g. ``"ValueError: Invalid A.shape[0] ..."``.
        ArrayError
            If a tensor's data is not 64-byte aligned (the kernels assume it).
        """
        n = len(args)
        values = (TVMFFIAny * max(n, 1))()
        keep: list[object] = []
        for i, arg in enumerate(args):
            _set_any(values[i], arg, i, self.name, keep)
        result = TVMFFIAny()
        kernel_services.clear_last_error()  # a message an earlier call left is not this call's
        if self._func(None, values, n, ctypes.byref(result)) != 0:
            self._raise_error()
        del keep
        return _decode(result, self.name)

    def prepare_call(self, args: Sequence[NDArray]) -> PreparedCall:
        """Build the ``TVMFFIAny`` array once; ``fn()`` then runs the kernel from C.

        ``fn`` is a native call object (see :func:`tvmrt.runtime.kernel_services.make_kernel_call`)
        that owns the argument memory and keeps ``args`` alive; it raises
        :class:`KernelError` when the kernel fails.

        Raises
        ------
        TypeError
            If an argument is not an NDArray.
        ArrayError
            If a tensor's data is not 64-byte aligned.
        """
        n = len(args)
        values = (TVMFFIAny * max(n, 1))()
        keep: list[object] = []
        for i, arg in enumerate(args):
            if not isinstance(arg, NDArray):
                raise ArgumentTypeError(
                    f"function {self.name!r}: argument {i} must be an NDArray, "
                    f"got {type(arg).__name__}"
                )
            _set_any(values[i], arg, i, self.name, keep)
        result = TVMFFIAny()
        keep.extend((values, result, self))
        call = kernel_services.make_kernel_call(
            self.address,
            ctypes.addressof(values),
            n,
            ctypes.addressof(result),
            self._raise_error,
            tuple(keep),
        )
        return (call, ())

    def __repr__(self) -> str:
        return f"FFIKernelFunc({self.name!r}, {self.address:#x})"


def kernel_call_parts(prepared: PreparedCall) -> tuple[int, int, int] | None:
    """``(function, TVMFFIAny* args, num_args)`` of a prepared tvm-ffi kernel call.

    ``None`` if ``prepared`` did not come from :meth:`FFIKernelFunc.prepare_call`. The
    benchmark replays calls from C with these.
    """
    fn, fn_args = prepared
    parts = getattr(fn, "parts", None)
    if fn_args or type(fn).__name__ != "KernelCall" or parts is None:
        return None
    func, args, num_args, _ = parts()
    return int(func), int(args), int(num_args)
