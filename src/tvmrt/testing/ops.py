"""Reference kernels in numpy with TVM's calling convention: inputs, then outputs in place."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tvmrt.runtime.module import PyModule
from tvmrt.runtime.ndarray import NDArray

__all__ = ["numpy_op_library", "FrontendTestModule", "KERNELS"]


def _v(arr: NDArray) -> np.ndarray[Any, Any]:
    return arr.numpy_view()


def myadd(a: NDArray, b: NDArray) -> None:
    """``b = a + 1`` (the kernel of TVM's graph-executor tests)."""
    np.add(_v(a), 1, out=_v(b), casting="unsafe")


def add(a: NDArray, b: NDArray, out: NDArray) -> None:
    """``out = a + b`` (broadcasting)."""
    np.add(_v(a), _v(b), out=_v(out), casting="unsafe")


def subtract(a: NDArray, b: NDArray, out: NDArray) -> None:
    """``out = a - b``."""
    np.subtract(_v(a), _v(b), out=_v(out), casting="unsafe")


def multiply(a: NDArray, b: NDArray, out: NDArray) -> None:
    """``out = a * b``."""
    np.multiply(_v(a), _v(b), out=_v(out), casting="unsafe")


def relu(a: NDArray, out: NDArray) -> None:
    """``out = max(a, 0)``."""
    np.maximum(_v(a), 0, out=_v(out), casting="unsafe")


def matmul(a: NDArray, b: NDArray, out: NDArray) -> None:
    """``out = a @ b``."""
    np.matmul(_v(a), _v(b), out=_v(out))


def copy(a: NDArray, out: NDArray) -> None:
    """``out = a`` (same number of elements; shapes may differ)."""
    _v(out)[...] = _v(a).reshape(_v(out).shape)


def split(a: NDArray, *outs: NDArray) -> None:
    """Split ``a`` along axis 0 into ``len(outs)`` equal parts."""
    for part, out in zip(np.split(_v(a), len(outs), axis=0), outs, strict=True):
        _v(out)[...] = part


def nop(*args: NDArray) -> None:
    """Do nothing (the cheapest possible kernel, for overhead measurements)."""


KERNELS: dict[str, Callable[..., None]] = {
    "myadd": myadd,
    "add": add,
    "subtract": subtract,
    "multiply": multiply,
    "relu": relu,
    "matmul": matmul,
    "copy": copy,
    "split": split,
    "nop": nop,
}


def numpy_op_library(**extra: Callable[..., Any]) -> PyModule:
    """A module with the numpy kernels of :data:`KERNELS` plus ``extra`` ones.

    Examples
    --------
    >>> lib = numpy_op_library(double=lambda a, out: out.copyfrom(a.numpy() * 2))
    >>> sorted(lib.imported_modules), lib.implements_function("double")
    ([], True)
    """
    return PyModule({**KERNELS, **extra}, type_key="numpy_ops")


class FrontendTestModule(PyModule):
    """A module of Python functions, filled with ``mod["name"] = func`` (TVM's test helper)."""

    def __init__(self, entry_name: str | None = None) -> None:
        super().__init__(type_key="frontend_test")
        if entry_name is not None:
            self.entry_name = entry_name
