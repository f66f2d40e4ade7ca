"""TVM's ctypes view of a numpy array: ``TVMArray`` (DLPack's ``DLTensor``) and
``numpyasarray``, as ``tvm.runtime.ndarray`` has them."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from tvmrt.error import ArgumentTypeError, ArrayError
from tvmrt.runtime._ctypes_api import DLDataType, DLDevice, DLTensor
from tvmrt.runtime.device import DLDeviceType
from tvmrt.runtime.dtype import DataType

__all__ = ["TVMArray", "TVMArrayHandle", "numpyasarray"]

# TVM's names of DLPack's tensor struct (what numpyasarray returns) and a pointer to it
TVMArray = DLTensor
TVMArrayHandle = ctypes.POINTER(DLTensor)


def numpyasarray(np_data: np.ndarray[Any, Any]) -> tuple[DLTensor, Any]:
    """A ``DLTensor`` describing a C-contiguous numpy array, and its shape array.

    As TVM's ``nd.numpyasarray``: the tensor borrows ``np_data``'s memory (keep the
    array and the returned shape alive while the tensor is used) and is on ``cpu(0)``.

    Raises
    ------
    ArrayError
        If the array is not C-contiguous.
    """
    if not isinstance(np_data, np.ndarray):
        raise ArgumentTypeError(f"numpyasarray takes a numpy array, got {type(np_data).__name__}")
    if not np_data.flags["C_CONTIGUOUS"]:
        raise ArrayError("numpyasarray needs a C-contiguous array; use np.ascontiguousarray")
    dtype = DataType(np_data.dtype)
    shape = (ctypes.c_int64 * max(np_data.ndim, 1))(*np_data.shape)
    tensor = DLTensor(
        data=np_data.ctypes.data,
        device=DLDevice(int(DLDeviceType.kDLCPU), 0),
        ndim=np_data.ndim,
        dtype=DLDataType(dtype.type_code, dtype.bits, dtype.lanes),
        shape=ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)),
        strides=None,
        byte_offset=0,
    )
    return tensor, shape
