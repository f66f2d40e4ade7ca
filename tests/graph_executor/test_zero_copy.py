"""Zero-copy inputs and outputs (TVM's test_set_input_zero_copy + field.md §2 items 6-9)."""

from __future__ import annotations

import numpy as np
import pytest

from tvmrt import runtime
from tvmrt.contrib import graph_executor
from tvmrt.error import ArrayError
from tvmrt.testing import GraphBuilder, numpy_op_library

pytestmark = pytest.mark.arm  # numpy-only: also runs on emulated ARM (make test-arm)

CPU = runtime.cpu()


def build(builder: GraphBuilder) -> graph_executor.GraphModule:
    return graph_executor.create(builder.to_json(), numpy_op_library(), CPU)


def x_plus_ones() -> GraphBuilder:
    b = GraphBuilder()
    x = b.input("x", (2, 2))
    one = b.input("one", (2, 2))
    (y,) = b.op("add", "add", [x, one], [(2, 2)])
    b.output(y)
    return b


def test_simple_graph_matches_copying_path():
    x = np.random.uniform(size=(2, 2)).astype("float32")
    ref = build(x_plus_ones())
    ref.run(x=x, one=np.ones((2, 2), "float32"))
    mod = build(x_plus_ones())
    mod.set_input("one", np.ones((2, 2), "float32"))
    xin = runtime.array(x)
    mod.module["set_input_zero_copy"](0, xin)
    mod.run()
    np.testing.assert_equal(mod.get_output(0).numpy(), ref.get_output(0).numpy())
    assert mod.get_input("x").data_ptr == xin.data_ptr


def test_input_that_is_also_an_output():
    b = GraphBuilder()
    x = b.input("x", (3,))
    (y,) = b.op("inc", "myadd", [x], [(3,)])
    b.output(x, y)
    mod = build(b)
    xin = runtime.array(np.arange(3, dtype="float32"))
    mod.set_input_zero_copy("x", xin)
    mod.run()
    np.testing.assert_equal(mod.get_output(0).numpy(), [0, 1, 2])
    np.testing.assert_equal(mod.get_output(1).numpy(), [1, 2, 3])
    assert mod.get_output(0).data_ptr == xin.data_ptr


def reshape_after_input() -> GraphBuilder:
    b = GraphBuilder()
    x = b.input("x", (3, 4), storage_id=0)
    (r,) = b.op("reshape", "__nop", [x], [(1, 12)], storage_ids=[0])
    (z,) = b.op("inc", "myadd", [r], [(1, 12)], storage_ids=[1])
    b.output(x, r, z)
    return b


def test_reshape_after_input_rebinds_the_alias():
    x = np.arange(12, dtype="float32").reshape(3, 4)
    ref = build(reshape_after_input())
    ref.run(x=x)
    mod = build(reshape_after_input())
    mod.set_input_zero_copy(x=runtime.array(x))
    mod.run()
    for i in range(3):
        np.testing.assert_equal(mod.get_output(i).numpy(), ref.get_output(i).numpy())
    # the reshape output follows the user's buffer: no wild pointer into the old pool
    assert mod.get_output(1).data_ptr == mod.get_input("x").data_ptr


def test_output_zero_copy_fills_user_buffer_and_get_output_sees_it():
    b = x_plus_ones()
    mod = build(b)
    z = runtime.empty((2, 2))
    mod.set_output_zero_copy(0, z)
    mod.set_input_zero_copy(x=runtime.array(np.full((2, 2), 2, "float32")))
    mod.set_input_zero_copy("one", runtime.array(np.ones((2, 2), "float32")))
    mod.run()
    np.testing.assert_equal(z.numpy(), 3)
    assert mod.get_output(0).data_ptr == z.data_ptr  # not stale (TVM #13634)


def test_output_zero_copy_by_node_key():
    mod = build(x_plus_ones())
    z = runtime.empty((2, 2))
    mod.set_output_zero_copy("add:0", z)
    mod.run(x=np.ones((2, 2), "float32"), one=np.ones((2, 2), "float32"))
    np.testing.assert_equal(z.numpy(), 2)


def reshape_zero_copy_graph() -> GraphBuilder:
    """TVM's test_reshape_zero_copy: reshape → matmul → reshape(-1), both reshapes __nop."""
    b = GraphBuilder()
    in0 = b.input("in0", (56, 224), storage_id=0)
    in1 = b.input("in1", (112, 112), storage_id=1)
    (r0,) = b.op("reshape0", "__nop", [in0], [(112, 112)], storage_ids=[0])
    (mm,) = b.op("matmul", "matmul", [r0, in1], [(112, 112)], storage_ids=[2])
    (r1,) = b.op("reshape1", "__nop", [mm], [(112 * 112,)], storage_ids=[2])
    b.output(r1)
    return b


def test_reshape_zero_copy_nop_head():
    rng = np.random.default_rng(0)
    a = rng.uniform(size=(56, 224)).astype("float32")
    w = rng.uniform(size=(112, 112)).astype("float32")
    ref = build(reshape_zero_copy_graph())
    ref.run(in0=a, in1=w)
    mod = build(reshape_zero_copy_graph())
    out = runtime.empty((112 * 112,))
    mod.set_input_zero_copy("in0", runtime.array(a))
    mod.set_input_zero_copy("in1", runtime.array(w))
    mod.set_output_zero_copy(0, out)
    mod.run()
    np.testing.assert_allclose(out.numpy(), ref.get_output(0).numpy(), rtol=1e-6)
    np.testing.assert_allclose(out.numpy(), (a.reshape(112, 112) @ w).reshape(-1), rtol=1e-5)
    assert mod.get_output(0).data_ptr == out.data_ptr


def test_zero_copy_output_of_an_input_alias_is_refused():
    b = GraphBuilder()
    x = b.input("x", (4,), storage_id=0)
    (r,) = b.op("reshape", "__nop", [x], [(2, 2)], storage_ids=[0])
    b.output(r)
    mod = build(b)
    with pytest.raises(ArrayError, match=r"is a graph input .* no kernel writes it"):
        mod.set_output_zero_copy(0, runtime.empty((2, 2)))


def test_zero_copy_checks():
    mod = build(x_plus_ones())
    raw = np.empty(64 + 32, np.uint8)
    start = -raw.ctypes.data % 64 + 4  # deliberately 4 bytes past a 64-byte boundary
    bad = raw[start : start + 16].view("float32").reshape(2, 2)
    assert bad.ctypes.data % 64 == 4
    with pytest.raises(
        ArrayError, match=r"zero-copy input 'x': data at 0x[0-9a-f]+ is not 64-byte aligned"
    ):
        mod.set_input_zero_copy("x", runtime.from_dlpack(bad))
    with pytest.raises(
        ArrayError, match=r"expected shape \(2, 2\) and dtype float32, got shape \(4,\)"
    ):
        mod.set_input_zero_copy("x", runtime.empty((4,)))
    with pytest.raises(ArrayError, match="dtype float32, got shape \\(2, 2\\) and dtype int32"):
        mod.set_input_zero_copy("x", runtime.empty((2, 2), "int32"))
    with pytest.raises(ArrayError, match="not contiguous"):
        mod.set_input_zero_copy("x", runtime.from_dlpack(np.zeros((2, 4), "float32")[:, ::2]))
    with pytest.raises(TypeError, match="needs an NDArray or a DLPack tensor, got list"):
        mod.set_input_zero_copy("x", [[1, 2], [3, 4]])
    with pytest.raises(ArrayError, match="zero-copy output 0"):
        mod.set_output_zero_copy(0, runtime.empty((3,)))


def test_zero_copy_binding_persists_and_set_input_writes_into_it():
    mod = build(x_plus_ones())
    xin = runtime.array(np.zeros((2, 2), "float32"))
    mod.set_input_zero_copy("x", xin)
    mod.set_input("x", np.full((2, 2), 5, "float32"))
    np.testing.assert_equal(xin.numpy(), 5)  # copies now land in the user's buffer
