"""Runtime functions that compiled kernels call by name, as TVM v0.19's CPU runtime had them.

Relay-era TOPI lowered some operators on the CPU to ``call_packed`` externs: the kernel
looks a function up with ``TVMBackendGetFuncFromEnv`` and calls it. These modules provide
them; each name is listed in :mod:`tvmrt.runtime.builtins`, so nothing here is imported
until a kernel (or ``get_global_func``) asks for it.

- :mod:`.sort`: ``tvm.contrib.sort.{argsort,argsort_nms,sort,topk}``, in C
  (``src/tvmrt/_native/sort.c``).
- :mod:`.blas`: ``tvm.contrib.{cblas,mkl,dnnl}.matmul`` and the batch variants, on
  numpy's BLAS.
- :mod:`.random`: ``tvm.contrib.random.*``.
- :mod:`.catalog`: what TVM's CPU runtime registered that tvmrt does not provide, for the
  load-time check of :mod:`tvmrt.runtime.loaders.needs`.
"""

from __future__ import annotations
