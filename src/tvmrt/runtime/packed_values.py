"""Conversion between Python values and the legacy packed-function ABI (``TVMValue`` + code).

Type codes are :class:`~tvmrt.runtime._ctypes_api.ArgTypeCode` (``TVMArgTypeCode`` of
``src/tvmrt/include/tvm/runtime/c_runtime_api.h``, TVM v0.19's values); tensors always
travel as ``DLTENSOR_HANDLE`` (``DLTensor*``).
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tvmrt.error import ArgumentTypeError, ArrayError
from tvmrt.runtime._ctypes_api import ArgTypeCode, DLTensor, TVMByteArray, TVMValue
from tvmrt.runtime.device import Device
from tvmrt.runtime.dtype import DataType
from tvmrt.runtime.ndarray import NDArray

__all__ = [
    "pack_args",
    "from_tvm_value",
    "to_tvm_value",
    "ndarray_from_dltensor",
    "EXTENSION_TYPES",
    "extension_arg",
]

# classes registered with tvmrt.register_extension (TVM's): their objects pass as the handle
# their ``_tvm_handle`` gives, with the type code their ``_tvm_tcode`` says
EXTENSION_TYPES: list[type] = []


def extension_arg(arg: object) -> tuple[int, int] | None:
    """``(type code, handle)`` of an object of a registered extension class, else None."""
    if not EXTENSION_TYPES or not isinstance(arg, tuple(EXTENSION_TYPES)):
        return None
    code, handle = int(arg._tvm_tcode), arg._tvm_handle  # type: ignore[attr-defined]
    if not isinstance(handle, int) or isinstance(handle, bool):
        raise ArgumentTypeError(
            f"{type(arg).__name__}._tvm_handle is {type(handle).__name__}, expected an int "
            "address (a registered extension's handle)"
        )
    return code, handle


INT, UINT, FLOAT, HANDLE, NULL = (ArgTypeCode.INT, ArgTypeCode.UINT, ArgTypeCode.FLOAT,
                                  ArgTypeCode.HANDLE, ArgTypeCode.NULL)  # fmt: skip
DATATYPE, DEVICE, DLTENSOR = ArgTypeCode.TVM_TYPE, ArgTypeCode.DLDEVICE, ArgTypeCode.DLTENSOR_HANDLE
STR, BYTES, NDARRAY = ArgTypeCode.STR, ArgTypeCode.BYTES, ArgTypeCode.NDARRAY_HANDLE
_CPU = 1


def _set(value: TVMValue, codes: Any, i: int, arg: object, keep: list[object]) -> None:
    """Encode ``arg`` into ``value`` / ``codes[i]``; objects C will point into go to ``keep``."""
    if isinstance(arg, NDArray):
        dl = arg.dltensor()
        value.v_handle = ctypes.addressof(dl)
        codes[i] = DLTENSOR
        keep.append(arg)
    elif arg is None:
        value.v_handle = None
        codes[i] = NULL
    elif isinstance(arg, bool | int | np.integer):
        value.v_int64 = int(arg)
        codes[i] = INT
    elif isinstance(arg, float | np.floating):
        value.v_float64 = float(arg)
        codes[i] = FLOAT
    elif isinstance(arg, DataType):
        value.v_int64 = arg.type_code | (arg.bits << 8) | (arg.lanes << 16)
        codes[i] = DATATYPE
    elif isinstance(arg, Device):
        value.v_int64 = (arg.device_type & 0xFFFFFFFF) | ((arg.device_id & 0xFFFFFFFF) << 32)
        codes[i] = DEVICE
    elif isinstance(arg, str):
        data = arg.encode("utf-8")
        value.v_str = data
        codes[i] = STR
        keep.append(data)
    elif isinstance(arg, bytes | bytearray):
        buf = ctypes.create_string_buffer(bytes(arg), len(arg))
        array = TVMByteArray(ctypes.cast(buf, ctypes.c_void_p), len(arg))
        value.v_handle = ctypes.addressof(array)
        codes[i] = BYTES
        keep.extend((buf, array))
    elif (extension := extension_arg(arg)) is not None:
        codes[i], value.v_handle = extension
        keep.append(arg)
    else:
        raise ArgumentTypeError(
            f"argument {i} of type {type(arg).__name__} cannot be passed to a compiled "
            "function; expected an NDArray, int, float, str, bytes, DataType, Device or None"
        )


def pack_args(args: Sequence[object]) -> tuple[Any, Any, list[object]]:
    """``(TVMValue[n], int[n], keepalive)`` for a call with ``args``."""
    n = len(args)
    values = (TVMValue * max(n, 1))()
    codes = (ctypes.c_int * max(n, 1))()
    keep: list[object] = []
    for i, arg in enumerate(args):
        _set(values[i], codes, i, arg, keep)
    return values, codes, keep


def from_tvm_value(value: TVMValue, code: int) -> object:
    """The Python value of one C argument or return value."""
    if code in (INT, UINT):
        return int(value.v_int64)
    if code == FLOAT:
        return float(value.v_float64)
    if code == NULL:
        return None
    if code == HANDLE:
        return value.v_handle
    if code == STR:
        return (value.v_str or b"").decode("utf-8", errors="replace")
    if code == BYTES:
        if not value.v_handle:
            return b""
        array = TVMByteArray.from_address(value.v_handle)
        return ctypes.string_at(array.data, array.size) if array.size else b""
    if code == DATATYPE:
        raw = value.v_int64 & 0xFFFFFFFF
        return DataType.from_code(raw & 0xFF, (raw >> 8) & 0xFF, raw >> 16)
    if code == DEVICE:
        raw = value.v_int64
        return Device(raw & 0xFFFFFFFF, (raw >> 32) & 0xFFFFFFFF)
    if code in (DLTENSOR, NDARRAY):
        if not value.v_handle:
            return None
        return ndarray_from_dltensor(value.v_handle)
    raise ArgumentTypeError(f"values of type code {code} are not supported by tvmrt's legacy ABI")


def to_tvm_value(result: object, value: Any, code: Any) -> list[object]:
    """Store a Python return value in ``value[0]`` / ``code[0]``; returns what must stay alive."""
    keep: list[object] = []
    _set(value[0], code, 0, result, keep)
    return keep


def _memory(address: int, nbytes: int) -> memoryview:
    """A writable view of ``nbytes`` of foreign memory at ``address``."""
    return memoryview((ctypes.c_uint8 * nbytes).from_address(address)).cast("B")


def ndarray_from_dltensor(address: int) -> NDArray:
    """An NDArray sharing the memory a ``DLTensor*`` describes (CPU only; no copy).

    Raises
    ------
    ArrayError
        If the tensor is not on the CPU or has an unsupported dtype.
    """
    dl = DLTensor.from_address(address)
    if dl.device.device_type != _CPU:
        raise ArrayError(
            f"tensor on device type {dl.device.device_type} cannot be viewed from Python; "
            "only CPU tensors (device type 1) can"
        )
    dtype = DataType.from_code(dl.dtype.code, dl.dtype.bits, dl.dtype.lanes)
    shape = tuple(int(dl.shape[i]) for i in range(dl.ndim))
    np_dtype = dtype.numpy_dtype
    lanes = (dtype.lanes,) if dtype.lanes > 1 else ()
    elem = np_dtype.itemsize * dtype.lanes
    count = math.prod(shape)
    data = (dl.data or 0) + dl.byte_offset
    if count == 0 or not data:
        view = np.empty(shape + lanes, dtype=np_dtype)
    elif dl.strides:
        strides = tuple(int(dl.strides[i]) for i in range(dl.ndim))
        if any(s < 0 for s in strides):
            raise ArrayError(f"tensor with negative strides {strides} is not supported")
        span = sum((d - 1) * s for d, s in zip(shape, strides, strict=True)) + 1
        flat = np.frombuffer(_memory(data, span * elem), dtype=np_dtype)
        byte_strides = tuple(s * elem for s in strides) + ((np_dtype.itemsize,) if lanes else ())
        view = np.lib.stride_tricks.as_strided(flat, shape + lanes, byte_strides)
    else:
        view = np.frombuffer(_memory(data, count * elem), dtype=np_dtype).reshape(shape + lanes)
    return NDArray.from_host_memory(view, dtype, Device(_CPU, dl.device.device_id))
