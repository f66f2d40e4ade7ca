"""One ``InvokePacked`` site: the kernel's prepared call, re-pointed at new arrays.

A VM allocates new arrays on every invoke, so the graph executor's prepare-once calls do
not apply as they are. Each site prepares its kernel call once
(``PackedFunc.prepare_call``); for a legacy-ABI kernel later calls with the same number
of arguments only write the new ``DLTensor`` addresses into the prepared ``TVMValue``
array. Other kernels (tvm-ffi), a changed argument count or an array whose data is not
64-byte aligned go through ``prepare_call`` again, which checks and packs everything.

One ``AllocTensor``/``AllocTensorReg`` site (:class:`TensorSite`) likewise keeps the
``DLTensor`` of the array it made last; a new array of the same shape, dtype and device
gets a copy of it with its own data address instead of a ``DLTensor`` built field by
field. Only the struct layout and the shape array are shared, never memory.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from typing import Any

from tvmrt.runtime._ctypes_api import DLTensor
from tvmrt.runtime.device_api import ALLOC_ALIGNMENT, Storage
from tvmrt.runtime.dtype import DataType
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.packed_func import PackedFunc

__all__ = ["KernelSite", "TensorSite"]


class KernelSite:
    """The prepared call of one ``InvokePacked`` instruction."""

    __slots__ = ("fn", "fn_args", "kernel", "values")

    def __init__(self, kernel: PackedFunc) -> None:
        self.kernel = kernel
        self.fn: Callable[..., object] | None = None
        self.fn_args: tuple[Any, ...] = ()
        self.values: Any = None

    def prepare(self, args: Sequence[NDArray]) -> tuple[Callable[..., object], tuple[Any, ...]]:
        """``(fn, fn_args)``: ``fn(*fn_args)`` runs the kernel on ``args``."""
        values = self.values
        if values is not None and len(args) == self.fn_args[3]:
            for i, arr in enumerate(args):
                dl = arr.dltensor()
                if ((dl.data or 0) + dl.byte_offset) % ALLOC_ALIGNMENT:
                    break  # prepare_call reports it
                values[i].v_handle = ctypes.addressof(dl)
            else:
                assert self.fn is not None
                return self.fn, self.fn_args
        fn, fn_args = self.kernel.prepare_call(args)
        legacy = len(fn_args) == 6 and isinstance(fn_args[1], ctypes.Array)
        self.fn, self.fn_args, self.values = fn, fn_args, fn_args[1] if legacy else None
        return fn, fn_args


class TensorSite:
    """One allocation instruction: the ``DLTensor`` layout of the array it made last."""

    __slots__ = ("keep", "key", "template")

    def __init__(self) -> None:
        self.key: tuple[object, ...] | None = None
        self.template: DLTensor | None = None
        self.keep: Any = None

    def tensor(
        self, storage: Storage, offset: int, shape: tuple[int, ...], dtype: DataType
    ) -> NDArray:
        """A new dense array over ``storage`` from ``offset`` (checked as ever)."""
        arr = NDArray.from_storage(storage, offset, shape, dtype)
        key = (shape, dtype, storage.device)
        if key == self.key and self.template is not None:
            data = storage.handle + (offset if storage.host is not None else 0)
            arr._adopt_dltensor(self.template, self.keep, data)
        else:
            self.template = arr.dltensor()
            self.keep = arr._dl[1] if arr._dl is not None else None
            self.key = key
        return arr
