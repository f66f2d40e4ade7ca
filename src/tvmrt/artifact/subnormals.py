"""Subnormal (denormal) floats among an artifact's weights, and what they cost.

A weight below the smallest normal float (``|w| < finfo.tiny``, not zero) is a subnormal.
x86 CPUs compute with subnormals through a slow microcode path unless the program sets
flush-to-zero, which TVM's kernels do not: a matmul whose weights hold a few hundred of
them ran 1.5x slower (``bench/subnormal_params.py``, below). Pruned or
quantized-then-dequantized models are where TVM users meet them; zeroing them changes no
output by more than the subnormals' own size (below 1.2e-38 for float32).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = ["COST", "count_subnormals", "model_subnormal_note", "subnormal_note"]

# measured with bench/subnormal_params.py on examples/digits/model before its weights were
# flushed (228 subnormals in p0, --fill random, 1 thread, medians of 4 paired runs of 100)
COST = "the digits example ran 1.5x slower with 228 of them, 1.3 ms against 0.87 ms in tvmrt bench"


def count_subnormals(data: Any, dtype: np.dtype[Any]) -> int:
    """How many elements of ``data`` (an array or a buffer of ``dtype``) are subnormal."""
    if dtype.kind != "f" or dtype.itemsize not in (2, 4, 8):
        return 0  # integers, bfloat16 and float8 kinds are not checked
    arr = np.frombuffer(data, dtype=dtype) if not isinstance(data, np.ndarray) else data
    tiny = np.finfo(dtype).tiny
    magnitude = np.abs(arr)
    return int(np.count_nonzero((magnitude < tiny) & (magnitude > 0)))


def subnormal_note(found: Iterable[tuple[str, int]]) -> str | None:
    """One warning line for ``(param name, subnormal count)`` pairs, None when none has any."""
    hits = [(name, n) for name, n in found if n]
    if not hits:
        return None
    total = sum(n for _, n in hits)
    names = ", ".join(f"{name}: {n}" for name, n in hits[:5])
    more = f", and {len(hits) - 5} more params" if len(hits) > 5 else ""
    return (
        f"the params hold {total} subnormal float(s) ({names}{more}); CPUs compute with "
        f"them slowly: {COST}. Zero them (|w| < numpy.finfo(dtype).tiny) for full speed"
    )


def model_subnormal_note(weights: Iterable[tuple[str, np.ndarray[Any, Any]]]) -> str | None:
    """:func:`subnormal_note` for a loaded model's weight arrays."""
    return subnormal_note((name, count_subnormals(arr, arr.dtype)) for name, arr in weights)
