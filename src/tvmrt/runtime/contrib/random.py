"""``tvm.contrib.random.*``: random tensors, as TVM v0.19's CPU runtime filled them.

TVM draws from a per-thread ``std::mt19937`` seeded with the time, so its values cannot be
reproduced; these follow the same rules (ranges, dtypes, checks) with a per-thread numpy
``MT19937`` generator seeded from the operating system.

- ``randint(low, high, out)``: integers in ``[low, high)`` clipped to ``out``'s int8/16/32
  or uint8/16/32 range.
- ``uniform(low, high, out)``, ``normal(loc, scale, out)``: float32 ``out`` only.
- ``random_fill(out)``, ``random_fill_for_measure(out)``: values in [1, 10) stored the way
  TVM stores them for the element width (8-bit: the integer part; 16/32/64-bit: float16 /
  float32 / float64 bits, whatever the dtype; 1-bit: true).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from tvmrt.error import ArgumentTypeError, ArrayError, InvalidArgumentError
from tvmrt.runtime.ndarray import NDArray

__all__ = ["randint", "uniform", "normal", "random_fill", "random_fill_for_measure"]

_local = threading.local()
_INTS = ("int8", "int16", "int32", "uint8", "uint16", "uint32")


def _generator() -> np.random.Generator:
    gen = getattr(_local, "generator", None)
    if gen is None:
        gen = _local.generator = np.random.Generator(np.random.MT19937())
    return gen


def _out(func: str, out: object) -> np.ndarray[Any, Any]:
    if not isinstance(out, NDArray):
        raise ArgumentTypeError(f"{func}: out must be a tensor, got {type(out).__name__}")
    if out.device.device_type != 1:
        raise ArrayError(f"{func}: out is on {out.device}; tvmrt fills CPU tensors only")
    view = out.numpy_view()
    if not view.flags.c_contiguous:
        raise ArrayError(f"{func}: out must be a compact tensor (TVM checks strides == NULL)")
    return view


def randint(low: int, high: int, out: NDArray) -> None:
    """``out`` = integers drawn uniformly from ``[low, high)`` (clipped to its dtype)."""
    func = "tvm.contrib.random.randint"
    if high <= low:
        raise InvalidArgumentError(f"{func}: high must be bigger than low ({low}, {high})")
    view = _out(func, out)
    if str(view.dtype) not in _INTS:
        raise ArrayError(f"{func}: unknown data type {view.dtype}; expected one of {_INTS}")
    info = np.iinfo(view.dtype)
    lo, hi = max(int(low), int(info.min)), min(int(high), int(info.max) + 1)
    view[...] = _generator().integers(lo, hi, size=view.shape, dtype=np.int64)


def _float32(func: str, out: NDArray) -> np.ndarray[Any, Any]:
    view = _out(func, out)
    if view.dtype != np.float32:
        raise ArrayError(f"{func}: out has dtype {view.dtype}; expected float32")
    return view


def uniform(low: float, high: float, out: NDArray) -> None:
    """``out`` (float32) = draws from Uniform(low, high)."""
    func = "tvm.contrib.random.uniform"
    if not high > low:
        raise InvalidArgumentError(f"{func}: high must be bigger than low ({low}, {high})")
    view = _float32(func, out)
    view[...] = _generator().uniform(low, high, size=view.shape)


def normal(loc: float, scale: float, out: NDArray) -> None:
    """``out`` (float32) = draws from Normal(loc, scale**2)."""
    func = "tvm.contrib.random.normal"
    if not scale > 0:
        raise InvalidArgumentError(f"{func}: standard deviation must be positive, got {scale}")
    view = _float32(func, out)
    view[...] = _generator().normal(loc, scale, size=view.shape)


def random_fill(out: NDArray) -> None:
    """Fill ``out`` with values in [1, 10) as TVM's ``RandomFill`` does for its bit width."""
    func = "tvm.contrib.random.random_fill"
    view = _out(func, out)
    bits = out.dtype.bits
    raw = view.reshape(-1).view(np.uint8)
    count = view.size * max(out.dtype.lanes, 1)
    values = _generator().uniform(1.0, 10.0, size=count)
    if bits == 1:
        raw[...] = 1
    elif bits == 4:  # two 4-bit values per byte: TVM draws bytes from [17, 30)
        raw[: raw.size] = _generator().uniform(17.0, 30.0, size=raw.size).astype(np.uint8)
    elif bits == 8:
        raw[...] = values.astype(np.uint8)
    elif bits in (16, 32, 64):
        kind = {16: np.float16, 32: np.float32, 64: np.float64}[bits]
        raw.view(kind)[...] = values.astype(kind)
    else:
        raise ArrayError(f"{func}: doesn't support dtype {out.dtype} ({bits} bits)")


random_fill_for_measure = random_fill
