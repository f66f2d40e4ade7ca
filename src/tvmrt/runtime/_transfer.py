"""Copies between memories: numpy for host memory, else the backends' copy hooks.

The functions take an array's memory as its parts: the numpy view of host memory (or
``None``), the device storage (for device memory) and the byte offset in it. NDArray's
``copyto`` / ``copyfrom`` are the callers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tvmrt.runtime.device_api import Storage
from tvmrt.runtime.dtype import DataType, DataTypeCode

__all__ = ["copy_between", "copy_numpy_into"]

HostView = np.ndarray[Any, Any]


def copy_between(
    src_host: HostView | None,
    src_storage: Storage | None,
    src_offset: int,
    dst_host: HostView | None,
    dst_storage: Storage | None,
    dst_offset: int,
    nbytes: int,
) -> None:
    """Copy ``nbytes`` (both sizes) from one array's memory into another's.

    An array in host memory is given as its numpy view (``*_host``); one in device memory
    as its storage and byte offset (``*_host`` is ``None``).
    """
    if src_host is not None and dst_host is not None:
        data = src_host if src_host.flags.c_contiguous else np.ascontiguousarray(src_host)
        if dst_host.flags.c_contiguous:
            dst_host.reshape(-1).view(np.uint8)[...] = data.reshape(-1).view(np.uint8)
        else:
            raw = data.reshape(-1).view(np.uint8).view(dst_host.dtype)
            dst_host[...] = raw.reshape(dst_host.shape)
    elif src_host is not None:
        assert dst_storage is not None
        dst_storage.api.copy_from_host(dst_storage, dst_offset, np.ascontiguousarray(src_host))
    elif dst_host is not None:
        assert src_storage is not None
        if dst_host.flags.c_contiguous:
            src_storage.api.copy_to_host(src_storage, src_offset, dst_host)
        else:
            staged = _staged(src_storage, src_offset, nbytes)
            dst_host.reshape(-1).view(np.uint8)[...] = staged
    else:
        assert src_storage is not None
        assert dst_storage is not None
        if src_storage.api is dst_storage.api:
            src_storage.api.copy_device_to_device(
                src_storage, src_offset, dst_storage, dst_offset, nbytes
            )
        else:  # two backends: stage through the host
            staged = _staged(src_storage, src_offset, nbytes)
            dst_storage.api.copy_from_host(dst_storage, dst_offset, staged)


def _staged(storage: Storage, offset: int, nbytes: int) -> HostView:
    """A host copy of ``nbytes`` of device memory."""
    out = np.empty(nbytes, np.uint8)
    storage.api.copy_to_host(storage, offset, out)
    return out


def copy_numpy_into(target: HostView, source: HostView, dtype: DataType) -> None:
    """Convert ``source`` into ``target`` (an array of ``dtype``'s storage type) in place.

    Without ml_dtypes, bfloat16 is stored as ``uint16``: a float source is rounded to
    bfloat16 (to nearest even) rather than cast to an integer.
    """
    no_ml_dtypes = dtype.type_code == DataTypeCode.BFLOAT and target.dtype == np.uint16
    if no_ml_dtypes and source.dtype.kind == "f":  # round float32 to bfloat16, nearest even
        bits = np.ascontiguousarray(source, dtype=np.float32).view(np.uint32)
        rounded = bits + 0x7FFF + ((bits >> 16) & 1)
        source = (rounded >> 16).astype(np.uint16)
    np.copyto(target, source, casting="unsafe")
