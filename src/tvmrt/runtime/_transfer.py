"""Copies between arrays in any memory: numpy for host memory, else the backends' hooks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tvmrt.runtime.dtype import DataType, DataTypeCode

if TYPE_CHECKING:
    from tvmrt.runtime.ndarray import NDArray

__all__ = ["copy_between", "copy_numpy_into"]


def copy_between(src: NDArray, dst: NDArray) -> None:
    """Copy the bytes of ``src`` into ``dst`` (equal sizes), through the backends' hooks."""
    if src._np is not None and dst._np is not None:
        data = src._np if src.is_contiguous else np.ascontiguousarray(src._np)
        if dst.is_contiguous:
            dst._np.reshape(-1).view(np.uint8)[...] = data.reshape(-1).view(np.uint8)
        else:
            raw = data.reshape(-1).view(np.uint8).view(dst._np.dtype)
            dst._np[...] = raw.reshape(dst._np.shape)
    elif src._np is not None:
        store = dst._device_storage()
        store.api.copy_from_host(store, dst._byte_offset, np.ascontiguousarray(src._np))
    elif dst._np is not None:
        store = src._device_storage()
        if dst.is_contiguous:
            store.api.copy_to_host(store, src._byte_offset, dst._np)
        else:
            dst._np.reshape(-1).view(np.uint8)[...] = src.numpy().reshape(-1).view(np.uint8)
    else:
        s_store, d_store = src._device_storage(), dst._device_storage()
        if s_store.api is d_store.api:
            s_store.api.copy_device_to_device(
                s_store, src._byte_offset, d_store, dst._byte_offset, src.nbytes
            )
        else:  # two backends: stage through the host
            d_store.api.copy_from_host(d_store, dst._byte_offset, src.numpy())


def copy_numpy_into(
    target: np.ndarray[Any, Any], source: np.ndarray[Any, Any], dtype: DataType
) -> None:
    no_ml_dtypes = dtype.type_code == DataTypeCode.BFLOAT and target.dtype == np.uint16
    if no_ml_dtypes and source.dtype.kind == "f":  # round float32 to bfloat16, nearest even
        bits = np.ascontiguousarray(source, dtype=np.float32).view(np.uint32)
        rounded = bits + 0x7FFF + ((bits >> 16) & 1)
        source = (rounded >> 16).astype(np.uint16)
    np.copyto(target, source, casting="unsafe")
