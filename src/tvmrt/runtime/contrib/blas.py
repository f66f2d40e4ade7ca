"""``tvm.contrib.{cblas,mkl,dnnl}.*``: the GEMM externs of ``-libs=cblas|mkl|dnnl`` builds.

TVM v0.19 registered (src/runtime/contrib/cblas/ there):

- ``tvm.contrib.cblas.matmul(A, B, C, transa, transb[, alpha[, beta]])`` and the same for
  ``mkl``: ``C = alpha * op(A) @ op(B) + beta * C`` on row-major 2-D tensors, float32 or
  float64, ``op`` transposing when its flag is set; alpha 1.0 and beta 0.0 by default.
- ``batch_matmul`` / ``batch_matmul_iterative`` (cblas and mkl): the same on 3-D tensors,
  a batch of 1 in ``A`` or ``B`` broadcast against the other.
- ``tvm.contrib.mkl.matmul_u8s8s32``: uint8 ``A`` times int8 ``B`` into int32 ``C``.
- ``tvm.contrib.dnnl.matmul``: float32 only.

All run on numpy's BLAS (numpy ships OpenBLAS; ``np.matmul`` calls its ``sgemm`` /
``dgemm``), measured against alternatives in bench/README.md ("contrib"). Results match
TVM's to BLAS summation order, not bitwise. Unlike TVM, shapes are checked: a call
whose shapes do not fit raises :class:`~tvmrt.error.ArrayError` naming the function.

>>> import numpy as np
>>> from tvmrt import runtime
>>> a = runtime.array(np.arange(6, dtype="float32").reshape(2, 3))
>>> c = runtime.empty((2, 2), "float32")
>>> matmul(a, a, c, False, True)
>>> c.numpy().tolist()
[[5.0, 14.0], [14.0, 50.0]]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tvmrt.error import ArgumentTypeError, ArrayError, InvalidArgumentError
from tvmrt.runtime.ndarray import NDArray

__all__ = [
    "matmul",
    "batch_matmul",
    "batch_matmul_iterative",
    "matmul_u8s8s32",
    "dnnl_matmul",
]

_Array = np.ndarray[Any, Any]
_FLOATS = ("float32", "float64")


def _view(func: str, arg: object, what: str, ndim: int) -> _Array:
    if not isinstance(arg, NDArray):
        raise ArgumentTypeError(f"{func}: {what} must be a tensor, got {type(arg).__name__}")
    if arg.device.device_type != 1:
        raise ArrayError(f"{func}: {what} is on {arg.device}; these functions run on the CPU")
    view = arg.numpy_view()
    if view.ndim != ndim:
        raise ArrayError(f"{func}: {what} has {view.ndim} dimensions; expected {ndim}")
    if not view.flags.c_contiguous:
        raise ArrayError(f"{func}: {what} is not a compact row-major tensor")
    return view


def _check_dtypes(func: str, views: list[_Array], allowed: tuple[str, ...]) -> None:
    dtype = str(views[0].dtype)
    if dtype not in allowed:
        raise ArrayError(f"{func}: unsupported dtype {dtype}; expected {' or '.join(allowed)}")
    for what, view in zip(("B", "C"), views[1:], strict=True):
        if view.dtype != views[0].dtype:
            raise ArrayError(f"{func}: {what} has dtype {view.dtype}; expected {dtype} like A")


def _scalars(func: str, rest: tuple[Any, ...]) -> tuple[bool, bool, float, float]:
    if not 2 <= len(rest) <= 4:
        raise InvalidArgumentError(
            f"{func}: expected (A, B, C, transa, transb[, alpha[, beta]]), got {3 + len(rest)} "
            "arguments"
        )
    transa, transb = bool(rest[0]), bool(rest[1])
    alpha = float(rest[2]) if len(rest) > 2 else 1.0
    beta = float(rest[3]) if len(rest) > 3 else 0.0
    return transa, transb, alpha, beta


def _gemm(func: str, a: _Array, b: _Array, c: _Array, alpha: float, beta: float) -> None:
    """``c = alpha * a @ b + beta * c`` (a, b already transposed as asked; shapes checked)."""
    if a.shape[-1] != b.shape[-2] or c.shape[-2:] != (a.shape[-2], b.shape[-1]):
        raise ArrayError(
            f"{func}: op(A) {a.shape[-2:]} times op(B) {b.shape[-2:]} does not fit C {c.shape[-2:]}"
        )
    if alpha == 1.0 and beta == 0.0:
        np.matmul(a, b, out=c)
        return
    product = np.matmul(a, b)
    if alpha != 1.0:
        np.multiply(product, c.dtype.type(alpha), out=product)
    if beta != 0.0:  # BLAS ignores C's contents when beta is 0
        np.multiply(c, c.dtype.type(beta), out=c)
        np.add(c, product, out=c)
    else:
        c[...] = product


def _matmul(func: str, allowed: tuple[str, ...], args: tuple[Any, ...]) -> None:
    if len(args) < 3:
        raise InvalidArgumentError(f"{func}: expected (A, B, C, transa, transb[, alpha[, beta]])")
    a, b, c = (_view(func, x, w, 2) for x, w in zip(args[:3], "ABC", strict=True))
    _check_dtypes(func, [a, b, c], allowed)
    transa, transb, alpha, beta = _scalars(func, tuple(args[3:]))
    _gemm(func, a.T if transa else a, b.T if transb else b, c, alpha, beta)


def matmul(*args: Any) -> None:
    """``tvm.contrib.cblas.matmul`` / ``tvm.contrib.mkl.matmul``."""
    _matmul("tvm.contrib.cblas.matmul", _FLOATS, args)


def dnnl_matmul(*args: Any) -> None:
    """``tvm.contrib.dnnl.matmul`` (float32 only, as TVM's)."""
    _matmul("tvm.contrib.dnnl.matmul", ("float32",), args)


def batch_matmul(*args: Any) -> None:
    """``tvm.contrib.{cblas,mkl}.batch_matmul``: 3-D, a batch of 1 broadcasts."""
    func = "tvm.contrib.cblas.batch_matmul"
    if len(args) < 3:
        raise InvalidArgumentError(f"{func}: expected (A, B, C, transa, transb[, alpha[, beta]])")
    a, b, c = (_view(func, x, w, 3) for x, w in zip(args[:3], "ABC", strict=True))
    _check_dtypes(func, [a, b, c], _FLOATS)
    transa, transb, alpha, beta = _scalars(func, tuple(args[3:]))
    batch = c.shape[0]
    sizes = (a.shape[0], b.shape[0])
    if sizes not in ((batch, batch), (1, batch), (batch, 1)):
        raise ArrayError(
            f"{func}: batch sizes A {a.shape[0]}, B {b.shape[0]} do not fit C {batch} (each "
            "must equal it or be 1)"
        )
    at = a.transpose(0, 2, 1) if transa else a
    bt = b.transpose(0, 2, 1) if transb else b
    _gemm(func, at, bt, c, alpha, beta)


batch_matmul_iterative = batch_matmul


def matmul_u8s8s32(*args: Any) -> None:
    """``tvm.contrib.mkl.matmul_u8s8s32``: uint8 A, int8 B, int32 C (exact integer sums)."""
    func = "tvm.contrib.mkl.matmul_u8s8s32"
    if len(args) < 3:
        raise InvalidArgumentError(f"{func}: expected (A, B, C, transa, transb[, alpha[, beta]])")
    a, b, c = (_view(func, x, w, 2) for x, w in zip(args[:3], "ABC", strict=True))
    for what, view, want in (("A", a, "uint8"), ("B", b, "int8"), ("C", c, "int32")):
        if str(view.dtype) != want:
            raise ArrayError(f"{func}: {what} has dtype {view.dtype}; expected {want}")
    transa, transb, alpha, beta = _scalars(func, tuple(args[3:]))
    if alpha != 1.0 or beta != 0.0:
        raise InvalidArgumentError(
            f"{func}: alpha={alpha}, beta={beta} are not supported (MKL's rounding of scaled "
            "int32 results is not reproduced); expected alpha 1 and beta 0, as TOPI passes"
        )
    op_a = (a.T if transa else a).astype(np.int64)
    op_b = (b.T if transb else b).astype(np.int64)
    if op_a.shape[1] != op_b.shape[0] or c.shape != (op_a.shape[0], op_b.shape[1]):
        raise ArrayError(
            f"{func}: op(A) {op_a.shape} times op(B) {op_b.shape} does not fit C {c.shape}"
        )
    product = op_a @ op_b
    if product.size and (product.min() < -(2**31) or product.max() >= 2**31):
        raise ArrayError(f"{func}: a sum overflows int32")
    c[...] = product
