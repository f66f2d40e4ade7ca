"""The tvm.contrib.sort family against numpy, on random inputs with many ties.

TVM v0.19 (src/runtime/contrib/sort/sort.cc there) sorts with a stable sort and strict
comparisons, so equal keys keep their original order in both directions; top-k breaks ties
by the smaller index. The reference ranks the values (``np.unique``, which treats -0.0 and
0.0 as equal, as C's ``<`` does) and argsorts the ranks with numpy's stable sort, negated
for descending. Values are compared bit for bit (-0.0 stays -0.0). NaN is left out: TVM's
order for it is not defined (docs/tvm-compat.md). ``TVMRT_SORT_EXAMPLES`` raises the
number of examples (default 60 per test).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tvmrt import runtime
from tvmrt.error import InvalidArgumentError

EXAMPLES = int(os.environ.get("TVMRT_SORT_EXAMPLES", "60"))
SORT_DTYPES = ["float32", "float64", "int32", "int64", "float16"]
TOPK_DTYPES = [*SORT_DTYPES, "uint8", "int8"]
INDEX_DTYPES = ["int32", "int64", "float32", "float64"]
# few distinct values: many ties (and -0.0 next to 0.0, infinities for floats)
FLOAT_POOL = [-np.inf, -2.5, -1.0, -0.0, 0.0, 1.0, 1.5, 3.0, np.inf]
INT_POOL = [-7, -1, 0, 1, 2, 5]


def _fn(name: str):
    return runtime.get_global_func(f"tvm.contrib.sort.{name}")


@st.composite
def cases(draw, dtypes):
    dtype = draw(st.sampled_from(dtypes))
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=3)))
    if np.dtype(dtype).kind == "f":
        pool = FLOAT_POOL
    elif dtype == "uint8":
        pool = [0, 1, 2, 200, 255]
    else:
        pool = INT_POOL
    picks = draw(
        st.lists(st.sampled_from(pool), min_size=int(np.prod(shape)), max_size=int(np.prod(shape)))
    )
    x = np.array(picks, dtype=dtype).reshape(shape)
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    return x, axis, draw(st.booleans())


def reference_order(x: np.ndarray, axis: int, ascend: bool) -> np.ndarray:
    """Indices of TVM's stable order along ``axis`` (ties: original order, both ways)."""
    _, ranks = np.unique(x.reshape(-1), return_inverse=True)
    key = ranks.reshape(x.shape).astype(np.int64)
    return np.argsort(key if ascend else -key, axis=axis, kind="stable")


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@settings(max_examples=EXAMPLES, deadline=None)
@given(cases(SORT_DTYPES), st.sampled_from(INDEX_DTYPES))
def test_argsort(case, index_dtype):
    x, axis, ascend = case
    out = runtime.empty(x.shape, index_dtype)
    _fn("argsort")(runtime.array(x), out, axis, ascend)
    want = reference_order(x, axis, ascend).astype(index_dtype)
    assert same_bits(out.numpy(), want)


@settings(max_examples=EXAMPLES, deadline=None)
@given(cases(SORT_DTYPES))
def test_sort(case):
    x, axis, ascend = case
    out = runtime.empty(x.shape, str(x.dtype))
    _fn("sort")(runtime.array(x), out, axis, ascend)
    want = np.take_along_axis(x, reference_order(x, axis, ascend), axis)
    assert same_bits(out.numpy(), want)


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    cases(TOPK_DTYPES),
    st.integers(0, 8),
    st.sampled_from(["both", "values", "indices"]),
    st.sampled_from(INDEX_DTYPES),
)
def test_topk(case, k, ret_type, index_dtype):
    x, axis, ascend = case
    n = x.shape[axis]
    k = min(k, n)
    kk = n if k < 1 else k
    shape = list(x.shape)
    shape[axis] = kk
    order = np.take(reference_order(x, axis, ascend), np.arange(kk), axis=axis)
    values = runtime.empty(tuple(shape), str(x.dtype))
    indices = runtime.empty(tuple(shape), index_dtype)
    outs = {"both": [values, indices], "values": [values], "indices": [indices]}[ret_type]
    _fn("topk")(runtime.array(x), *outs, k, axis, ret_type, ascend)
    if ret_type != "indices":
        assert same_bits(values.numpy(), np.take_along_axis(x, order, axis))
    if ret_type != "values":
        assert same_bits(indices.numpy(), order.astype(index_dtype))


@settings(max_examples=EXAMPLES, deadline=None)
@given(cases(["float32"]), st.data())
def test_argsort_nms(case, data):
    x, axis, ascend = case
    n = x.shape[axis]
    rest = np.delete(np.array(x.shape), axis % x.ndim)
    counts = np.array(
        data.draw(
            st.lists(st.integers(-1, n), min_size=int(np.prod(rest)), max_size=int(np.prod(rest)))
        ),
        dtype="int32",
    )
    out = runtime.empty(x.shape, "int32")
    _fn("argsort_nms")(runtime.array(x), runtime.array(counts.reshape(rest)), out, axis, ascend)
    moved = np.moveaxis(x, axis, -1).reshape(-1, n)
    want = np.empty_like(moved, dtype="int32")
    for row, m in enumerate(counts):
        m = max(int(m), 0)
        want[row] = np.arange(n)
        want[row, :m] = reference_order(moved[row, :m], -1, ascend) if m else []
    shape = np.moveaxis(x, axis, -1).shape
    assert same_bits(out.numpy(), np.moveaxis(want.reshape(shape), -1, axis))


def test_top_k_of_1000_classes_picks_the_first_of_equal_scores():
    scores = np.zeros((1, 1000), dtype="float32")
    scores[0, [10, 500, 999]] = 1.0  # a three-way tie for first place
    values = runtime.empty((1, 2), "float32")
    indices = runtime.empty((1, 2), "int32")
    _fn("topk")(runtime.array(scores), values, indices, 2, -1, "both", False)
    assert indices.numpy().tolist() == [[10, 500]]
    assert values.numpy().tolist() == [[1.0, 1.0]]


def test_k_larger_than_the_axis_leaves_the_tail_alone():
    """TOPI sizes the outputs k; TVM writes the axis length's worth and no more."""
    x = runtime.array(np.array([[2, 9, 4]], dtype="int32"))
    indices = runtime.array(np.full((1, 5), -1, dtype="int64"))
    _fn("topk")(x, indices, 5, 1, "indices", False)
    assert indices.numpy().tolist() == [[1, 2, 0, -1, -1]]


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        (
            "argsort",
            lambda: (runtime.array(np.zeros(4, "uint8")), runtime.empty((4,), "int32"), 0, 1),
            r"^tvm\.contrib\.sort\.argsort: unsupported input dtype uint8; expected float32, float64",
        ),
        (
            "argsort",
            lambda: (runtime.array(np.zeros(4, "float32")), runtime.empty((4,), "int16"), 0, 1),
            r"^tvm\.contrib\.sort\.argsort: unsupported output dtype int16",
        ),
        (
            "sort",
            lambda: (runtime.array(np.zeros(4, "float32")), runtime.empty((5,), "float32"), 0, 1),
            r"^tvm\.contrib\.sort\.sort: the output has 5 along dimension 0; expected 4$",
        ),
        (
            "sort",
            lambda: (runtime.array(np.zeros(4, "float32")), runtime.empty((4,), "float32"), 3, 1),
            r"^tvm\.contrib\.sort\.sort: axis 3 is out of range for a 1-dimensional input$",
        ),
        (
            "topk",
            lambda: (
                runtime.array(np.zeros(4, "float32")),
                runtime.empty((2,), "float32"),
                2,
                0,
                "all",
                0,
            ),
            r"^tvm\.contrib\.sort\.topk: unsupported ret_type 'all'; expected both, values or indices$",
        ),
        (
            "topk",
            lambda: (
                runtime.array(np.zeros(4, "float32")),
                runtime.empty((3,), "float32"),
                2,
                0,
                "values",
                0,
            ),
            r"^tvm\.contrib\.sort\.topk: the values output has 3 along dimension 0; expected 2$",
        ),
        (
            "topk",
            lambda: (runtime.array(np.zeros(4, "float32")), 7, 2, 0, "values", 0),
            r"^tvm\.contrib\.sort\.topk: argument 1 \(values\) must be a tensor",
        ),
        (
            "argsort_nms",
            lambda: (
                runtime.array(np.zeros((1, 4), "float32")),
                runtime.array(np.array([9], "int32")),
                runtime.empty((1, 4), "int32"),
                1,
                0,
            ),
            r"^tvm\.contrib\.sort\.argsort_nms: valid_count 9 of row 0 exceeds the axis length 4$",
        ),
    ],
)
def test_bad_calls_raise_naming_the_function(name, args, message):
    with pytest.raises(InvalidArgumentError, match=message):
        _fn(name)(*args())
