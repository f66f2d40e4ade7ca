"""Runtime functions kernels call by name: top-k of 1000 classes and a 256^3 cblas.matmul.

Method
------
A tiny legacy kernel library is compiled here with the system C compiler (the shape TVM's
LLVM codegen gives a ``call_packed`` extern): its kernel looks the function up once with
``TVMBackendGetFuncFromEnv`` and calls it ``--inner`` times through ``TVMFuncCall``, so
one timed kernel call measures the path real kernels take (native handle for
``tvm.contrib.sort.topk``; the Python callback for ``tvm.contrib.cblas.matmul``).

Pairs, alternated ``--rounds`` times (tvmrt first in even rounds, numpy first in odd):

* **topk**: ``tvm.contrib.sort.topk`` of a (1, 1000) float32 score row, k=5, both outputs,
  against numpy doing the same (``argpartition`` for the top 5, then a stable ``argsort`` of
  those 5 and ``take`` of the values);
* **matmul**: ``tvm.contrib.cblas.matmul`` of 256x256 by 256x256 float32, against
  ``np.matmul(a, b, out=c)``;
* **gemm candidate**: a plain C triple loop (i-k-j order, ``-O2``, the flags of tvmrt's
  own native code), the "small native GEMM" alternative to numpy's BLAS, against numpy.

Each figure is the median over rounds of (time of one kernel call / ``--inner``); ``ratio``
is the median of the per-round ratios tvmrt / numpy.

Usage::

    .venv/bin/python bench/contrib.py [--rounds 15] [--inner 2000]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tvmrt import runtime
from tvmrt.runtime.loaders import link
from tvmrt.testing.kernels_c import KERNEL_PRELUDE

KERNELS_C = (
    KERNEL_PRELUDE
    + r"""
static void* topk_h __asm__(".tvm_func.tvm.contrib.sort.topk");
static void* matmul_h __asm__(".tvm_func.tvm.contrib.cblas.matmul");

/* topk_loop(x, values, indices, reps) */
int topk_loop(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc, void* res) {
  TVMValue a[7], r; int c[7] = {7, 7, 7, 0, 0, 11, 0}, rcode, i;
  if (!topk_h && __TVMBackendGetFuncFromEnv(__tvm_module_ctx, "tvm.contrib.sort.topk", &topk_h))
    return -1;
  a[0] = args[0]; a[1] = args[1]; a[2] = args[2];
  a[3].v_int64 = 5; a[4].v_int64 = -1; a[5].v_str = "both"; a[6].v_int64 = 0;
  for (i = 0; i < args[3].v_int64; ++i)
    if (__TVMFuncCall(topk_h, a, c, 7, &r, &rcode)) return -1;
  return 0;
}

/* matmul_loop(a, b, c, reps) */
int matmul_loop(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc, void* res) {
  TVMValue a[5], r; int c[5] = {7, 7, 7, 0, 0}, rcode, i;
  if (!matmul_h &&
      __TVMBackendGetFuncFromEnv(__tvm_module_ctx, "tvm.contrib.cblas.matmul", &matmul_h))
    return -1;
  a[0] = args[0]; a[1] = args[1]; a[2] = args[2]; a[3].v_int64 = 0; a[4].v_int64 = 0;
  for (i = 0; i < args[3].v_int64; ++i)
    if (__TVMFuncCall(matmul_h, a, c, 5, &r, &rcode)) return -1;
  return 0;
}

/* naive_gemm(a, b, c, reps): c = a @ b, float32 row-major, i-k-j loops */
int naive_gemm(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc, void* res) {
  DLTensor *A = args[0].v_handle, *B = args[1].v_handle, *C = args[2].v_handle;
  int64_t M = A->shape[0], K = A->shape[1], N = B->shape[1], i, j, k, rep;
  const float *a = A->data, *b = B->data; float* cc = C->data;
  for (rep = 0; rep < args[3].v_int64; ++rep)
    for (i = 0; i < M; ++i) {
      for (j = 0; j < N; ++j) cc[i * N + j] = 0.0f;
      for (k = 0; k < K; ++k) {
        float aik = a[i * K + k];
        for (j = 0; j < N; ++j) cc[i * N + j] += aik * b[k * N + j];
      }
    }
  return 0;
}
"""
)


def _build(folder: Path) -> runtime.Module:
    cc = link.find_compiler()
    if cc is None:
        raise SystemExit("bench/contrib.py needs a C compiler to build its kernel library")
    src, lib = folder / "kernels.c", folder / "kernels.so"
    src.write_text(KERNELS_C)
    subprocess.run([*cc, "-shared", "-fPIC", "-O2", "-o", str(lib), str(src)], check=True)
    return runtime.load_module(str(lib))


def _time(fn: Callable[[], object], inner: int) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) / inner


def _paired(
    name: str, ours: Callable[[], object], ref: Callable[[], object], inner: int, rounds: int
) -> None:
    ours(), ref()  # warm up
    t_ours, t_ref, ratios = [], [], []
    for r in range(rounds):
        if r % 2 == 0:
            a, b = _time(ours, inner), _time(ref, inner)
        else:
            b, a = _time(ref, inner), _time(ours, inner)
        t_ours.append(a)
        t_ref.append(b)
        ratios.append(a / b)
    print(
        f"{name:<16} tvmrt {statistics.median(t_ours) * 1e6:10.2f} us   "
        f"numpy {statistics.median(t_ref) * 1e6:10.2f} us   "
        f"ratio {statistics.median(ratios):.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--inner", type=int, default=2000, help="top-k calls per timing")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        lib = _build(Path(tmp))
        scores = rng.standard_normal((1, 1000)).astype("float32")
        x = runtime.array(scores)
        values, indices = runtime.empty((1, 5), "float32"), runtime.empty((1, 5), "int32")
        topk, inner = lib["topk_loop"], args.inner

        def numpy_topk() -> None:
            for _ in range(inner):
                part = np.argpartition(-scores, 5, axis=-1)[:, :5]
                order = np.take_along_axis(
                    part,
                    np.argsort(-np.take_along_axis(scores, part, -1), axis=-1, kind="stable"),
                    -1,
                )
                np.take_along_axis(scores, order, -1)

        _paired(
            "topk 1000, k=5",
            lambda: topk(x, values, indices, inner),
            numpy_topk,
            inner,
            args.rounds,
        )
        want = np.argsort(-scores[0], kind="stable")[:5]
        assert indices.numpy()[0].tolist() == want.tolist()

        n, reps = 256, 20
        a_np, b_np = (rng.standard_normal((n, n)).astype("float32") for _ in range(2))
        c_np = np.empty((n, n), "float32")
        a, b, c = runtime.array(a_np), runtime.array(b_np), runtime.empty((n, n), "float32")

        def numpy_matmul() -> None:
            for _ in range(reps):
                np.matmul(a_np, b_np, out=c_np)

        matmul = lib["matmul_loop"]
        _paired("cblas.matmul 256", lambda: matmul(a, b, c, reps), numpy_matmul, reps, args.rounds)
        np.testing.assert_allclose(c.numpy(), a_np @ b_np, rtol=1e-4, atol=1e-3)
        naive = lib["naive_gemm"]
        _paired(
            "naive C GEMM 256",
            lambda: naive(a, b, c, 2),
            lambda: [np.matmul(a_np, b_np, out=c_np) for _ in range(2)],
            2,
            max(3, args.rounds // 3),
        )


if __name__ == "__main__":
    main()
