"""One ``InvokePacked`` site: the kernel's prepared call, re-pointed at new arrays.

A VM allocates new arrays on every invoke, so the graph executor's prepare-once calls do
not apply as they are. Each site prepares its kernel call once
(``PackedFunc.prepare_call``); for a legacy-ABI kernel later calls with the same number
of arguments only write the new ``DLTensor`` addresses into the prepared ``TVMValue``
array. Other kernels (tvm-ffi), a changed argument count or an array whose data is not
64-byte aligned go through ``prepare_call`` again, which checks and packs everything.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from typing import Any

from tvmrt.runtime.device_api import ALLOC_ALIGNMENT
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.packed_func import PackedFunc

__all__ = ["KernelSite"]


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
