"""tvm.contrib.{cblas,mkl,dnnl} GEMM externs and tvm.contrib.random against numpy.

The reference is numpy in float64 of ``alpha * op(A) @ op(B) + beta * C`` (TVM v0.19's
gemm_common.h conventions: row-major, transa/transb, alpha 1 and beta 0 by default).
"""

from __future__ import annotations

import numpy as np
import pytest

from tvmrt import runtime
from tvmrt.error import ArrayError, InvalidArgumentError

RNG = np.random.default_rng(25)


def _fn(name: str):
    return runtime.get_global_func(name)


def _reference(a, b, c, transa, transb, alpha, beta):
    op_a = a.T if transa else a
    op_b = b.T if transb else b
    return alpha * (op_a.astype(np.float64) @ op_b.astype(np.float64)) + beta * c


@pytest.mark.parametrize("lib", ["cblas", "mkl"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("transa", "transb"), [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("scalars", [(), (2.0,), (0.5, -1.5)])
def test_matmul(lib, dtype, transa, transb, scalars):
    m, k, n = 5, 7, 3
    a = RNG.standard_normal((k, m) if transa else (m, k)).astype(dtype)
    b = RNG.standard_normal((n, k) if transb else (k, n)).astype(dtype)
    c0 = RNG.standard_normal((m, n)).astype(dtype)
    c = runtime.array(c0)
    _fn(f"tvm.contrib.{lib}.matmul")(
        runtime.array(a), runtime.array(b), c, transa, transb, *scalars
    )
    alpha = scalars[0] if scalars else 1.0
    beta = scalars[1] if len(scalars) > 1 else 0.0
    want = _reference(a, b, c0, transa, transb, alpha, beta)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(c.numpy(), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["batch_matmul", "batch_matmul_iterative"])
@pytest.mark.parametrize(("batch_a", "batch_b"), [(4, 4), (1, 4), (4, 1)])
def test_batch_matmul_broadcasts_a_batch_of_one(name, batch_a, batch_b):
    a = RNG.standard_normal((batch_a, 3, 6)).astype("float32")
    b = RNG.standard_normal((batch_b, 2, 6)).astype("float32")  # transb
    c = runtime.empty((4, 3, 2), "float32")
    _fn(f"tvm.contrib.cblas.{name}")(runtime.array(a), runtime.array(b), c, False, True)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64).transpose(0, 2, 1))
    np.testing.assert_allclose(c.numpy(), np.broadcast_to(want, (4, 3, 2)), rtol=1e-5, atol=1e-5)


def test_dnnl_matmul_is_float32_only():
    a = runtime.array(np.ones((2, 2)))
    with pytest.raises(
        ArrayError,
        match=r"^tvm\.contrib\.dnnl\.matmul: unsupported dtype float64; expected float32$",
    ):
        _fn("tvm.contrib.dnnl.matmul")(a, a, runtime.empty((2, 2), "float64"), False, False)


def test_unsupported_dtype_names_the_function():
    a = runtime.array(np.ones((2, 2), "float16"))
    with pytest.raises(
        ArrayError,
        match=r"^tvm\.contrib\.cblas\.matmul: unsupported dtype float16; expected float32 or float64$",
    ):
        _fn("tvm.contrib.cblas.matmul")(a, a, runtime.empty((2, 2), "float16"), False, False)


def test_shapes_that_do_not_fit_are_refused():
    a = runtime.array(np.ones((2, 3), "float32"))
    with pytest.raises(ArrayError, match=r"^tvm\.contrib\.cblas\.matmul: op\(A\) \(2, 3\) times"):
        _fn("tvm.contrib.cblas.matmul")(a, a, runtime.empty((2, 2), "float32"), False, False)


def test_mkl_u8s8s32_is_exact():
    a = RNG.integers(0, 256, (3, 8)).astype("uint8")
    b = RNG.integers(-128, 128, (5, 8)).astype("int8")
    c = runtime.empty((3, 5), "int32")
    _fn("tvm.contrib.mkl.matmul_u8s8s32")(runtime.array(a), runtime.array(b), c, False, True)
    assert np.array_equal(c.numpy(), a.astype(np.int64) @ b.astype(np.int64).T)
    with pytest.raises(InvalidArgumentError, match=r"alpha=2\.0, beta=0\.0 are not supported"):
        _fn("tvm.contrib.mkl.matmul_u8s8s32")(
            runtime.array(a), runtime.array(b), c, False, True, 2.0
        )


@pytest.mark.parametrize(("dtype", "low", "high"), [("int8", -1000, 1000), ("uint16", 3, 9)])
def test_random_randint_stays_in_range(dtype, low, high):
    out = runtime.empty((4096,), dtype)
    _fn("tvm.contrib.random.randint")(low, high, out)
    info = np.iinfo(dtype)
    values = out.numpy().astype(np.int64)
    assert values.min() >= max(low, info.min)
    assert values.max() < min(high, info.max + 1)
    assert len(np.unique(values)) > 1


def test_random_uniform_normal_and_fill():
    out = runtime.empty((20000,), "float32")
    _fn("tvm.contrib.random.uniform")(-2.0, 3.0, out)
    assert out.numpy().min() >= -2.0
    assert out.numpy().max() < 3.0
    _fn("tvm.contrib.random.normal")(1.0, 2.0, out)
    assert abs(out.numpy().mean() - 1.0) < 0.1
    assert abs(out.numpy().std() - 2.0) < 0.1
    _fn("tvm.contrib.random.random_fill")(out)
    assert out.numpy().min() >= 1.0
    assert out.numpy().max() < 10.0
    with pytest.raises(ArrayError, match=r"^tvm\.contrib\.random\.uniform: out has dtype float64"):
        _fn("tvm.contrib.random.uniform")(0.0, 1.0, runtime.empty((2,), "float64"))
