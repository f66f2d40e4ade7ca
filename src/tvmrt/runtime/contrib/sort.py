"""``tvm.contrib.sort.*``: the sort functions TOPI's CPU kernels call (TVM v0.19 semantics).

Implemented in C (``src/tvmrt/_native/sort.c``), called by kernels without Python. The
arguments are TVM's:

- ``argsort(data, out, axis, is_ascend)``: indices of a stable sort along ``axis``;
  ``data`` float32/float64/int32/int64/float16, ``out`` int32/int64/float32/float64.
- ``sort(data, out, axis, is_ascend)``: the sorted values (``out`` has ``data``'s dtype).
- ``argsort_nms(data, valid_count, out, axis, is_ascend)``: float32 ``data``; sorts the
  first ``valid_count`` entries of each row, the rest of ``out`` is the identity (int32).
- ``topk(data, [values], [indices], k, axis, ret_type, is_ascend)``: ``ret_type`` is
  ``"both"``, ``"values"`` or ``"indices"``; ``k < 1`` means all; adds uint8 and int8
  ``data`` (indices may then also be uint8 / int8).

Equal keys keep their original order in both directions (top-k ties go to the smaller
index), as TVM's stable sort does. Wrong arguments raise
:class:`~tvmrt.error.InvalidArgumentError` naming the function.

>>> import numpy as np
>>> from tvmrt import runtime
>>> x = runtime.array(np.array([3, 1, 3, 2], dtype="float32"))
>>> out = runtime.empty((4,), "int32")
>>> argsort(x, out, -1, False)
>>> out.numpy().tolist()
[0, 2, 3, 1]
"""

from __future__ import annotations

from tvmrt.runtime.contrib._native import NativeFunc

__all__ = ["argsort", "argsort_nms", "sort", "topk"]

argsort = NativeFunc("tvm.contrib.sort.argsort")
argsort_nms = NativeFunc("tvm.contrib.sort.argsort_nms")
sort = NativeFunc("tvm.contrib.sort.sort")
topk = NativeFunc("tvm.contrib.sort.topk")
