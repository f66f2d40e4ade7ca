"""DLPack export: a capsule over an array's memory, without copying (see :mod:`._dlpack`).

:func:`export_capsule` takes the array as its parts (a numpy view of host memory, or the
device storage's handle) so that ``NDArray.__dlpack__`` can hand itself over; the stream,
device and copy policy is the NDArray's (:func:`tvmrt.runtime.ndarray.to_dlpack_capsule`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tvmrt.runtime._ctypes_api import (
    DLDataType,
    DLDevice,
    DLManagedTensor,
    DLManagedTensorVersioned,
    DLTensor,
)
from tvmrt.runtime._dlpack import (
    FLAG_IS_COPIED,
    FLAG_IS_SUBBYTE_TYPE_PADDED,
    VERSIONED,
    capsule_name,
    capsule_pointer,
    dlpack_dtype,
    is_subbyte,
)
from tvmrt.runtime.device import Device
from tvmrt.runtime.dtype import DataType

__all__ = ["export_capsule"]


class _ExportedView(np.ndarray):
    """The numpy view a capsule's manager holds; ``_tvmrt_source`` keeps the array alive."""

    _tvmrt_source: object


def export_capsule(
    view: np.ndarray[Any, Any] | None,
    shape: tuple[int, ...],
    dtype: DataType,
    device: Device,
    data: int,
    byte_offset: int,
    owner: object,
    copied: bool,
    max_version: tuple[int, int] | None,
) -> Any:
    """A DLPack capsule of an array's memory.

    Parameters
    ----------
    view
        The numpy view of the array's host memory, or ``None`` for device memory.
    shape, dtype, device
        The array's shape (lanes are not a dimension), dtype and device.
    data, byte_offset
        For device memory: the storage's handle and the array's offset in it.
    owner
        What the capsule keeps alive until the consumer's deleter runs (the array).
    copied
        The array is a copy made for this export (flagged ``IS_COPIED``).
    max_version
        The highest DLPack version the consumer reads: ``(1, x)`` or higher gives a
        ``"dltensor_versioned"`` capsule; ``None`` or ``(0, x)`` a legacy ``"dltensor"``.
    """
    capsule = _numpy_capsule(view, shape, dtype, owner, max_version)
    name = capsule_name(capsule)
    address = capsule_pointer(capsule, name)
    tensor: DLTensor
    if name == VERSIONED:
        managed = DLManagedTensorVersioned.from_address(address)
        tensor = managed.dl_tensor
        if copied:
            managed.flags |= FLAG_IS_COPIED
        if is_subbyte(dtype):
            managed.flags |= FLAG_IS_SUBBYTE_TYPE_PADDED
    else:
        tensor = DLManagedTensor.from_address(address).dl_tensor
    tensor.device = DLDevice(device.device_type, device.device_id)
    tensor.dtype = DLDataType(*dlpack_dtype(dtype))
    if view is None:  # point the stand-in at the device memory, dense row-major
        tensor.data = data
        tensor.byte_offset = byte_offset
        if tensor.strides:
            step = 1
            for i in reversed(range(tensor.ndim)):
                tensor.strides[i] = step
                step *= int(tensor.shape[i])
    lanes = dtype.lanes
    if lanes > 1:  # numpy saw the lanes as a trailing dimension of scalars
        ndim = tensor.ndim - 1
        if tensor.strides:
            if tensor.strides[ndim] != 1 or any(tensor.strides[i] % lanes for i in range(ndim)):
                raise BufferError(f"cannot export a {dtype} array whose lanes are strided")
            for i in range(ndim):
                tensor.strides[i] //= lanes
        tensor.ndim = ndim
    return capsule


def _numpy_capsule(
    view: np.ndarray[Any, Any] | None,
    shape: tuple[int, ...],
    dtype: DataType,
    owner: object,
    max_version: tuple[int, int] | None,
) -> Any:
    """numpy's capsule over ``view`` (a zero-strided stand-in for device memory)."""
    if view is None:  # device memory: numpy builds the structs over a stand-in view
        np_shape = (*shape, dtype.lanes) if dtype.lanes > 1 else shape
        view = np.lib.stride_tricks.as_strided(
            np.zeros(1, dtype.numpy_dtype), np_shape, (0,) * len(np_shape), writeable=True
        )
    if view.dtype.isbuiltin != 1:  # ml_dtypes' bfloat16/float8: export the raw bits
        view = view.view(f"u{view.dtype.itemsize}")
    exported = view.view(_ExportedView)
    exported._tvmrt_source = owner
    if max_version is None:
        return exported.__dlpack__()
    try:
        return exported.__dlpack__(max_version=(int(max_version[0]), int(max_version[1])))
    except TypeError:  # numpy < 2.1 only makes legacy capsules, which the standard allows
        return exported.__dlpack__()
