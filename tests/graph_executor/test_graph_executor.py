"""TVM's graph-executor tests (spec §8), re-expressed over numpy kernels, plus tvmrt's own."""

from __future__ import annotations

import gc
import threading
import time

import numpy as np
import pytest

from tvmrt import runtime
from tvmrt.contrib import graph_executor
from tvmrt.error import ArrayError, FunctionNotFoundError, InputNotFoundError, TVMError
from tvmrt.runtime import BenchmarkResult, save_param_dict
from tvmrt.testing import GraphBuilder, graphs, numpy_op_library

pytestmark = pytest.mark.arm  # numpy-only: also runs on emulated ARM (make test-arm)

CPU = runtime.cpu()


def add_graph(shape=(1, 10)) -> str:
    b = GraphBuilder()
    x = b.input("x", shape)
    y = b.input("y", shape)
    (z,) = b.op("add", "add", [x, y], [shape])
    b.output(z)
    return b.to_json()


def test_graph_simple_check_verify():
    mod = graph_executor.create(graphs.add_one(4), numpy_op_library(), CPU)
    a = np.random.uniform(size=4).astype("float32")
    mod.run(x=a)
    out = mod.get_output(0, runtime.empty((4,)))
    np.testing.assert_equal(out.numpy(), a + 1)


def test_check_sharing_weights_stored_once():
    params = {"x": np.ones((1, 10), dtype="float32")}
    blob = save_param_dict(params)
    shared = graph_executor.create(add_graph(), numpy_op_library(), CPU)
    shared.load_params(blob)
    mods = [graph_executor.create(add_graph(), numpy_op_library(), CPU) for _ in range(10)]
    for m in mods:
        m.share_params(shared, blob)
    x_ptr = shared.get_input("x").data_ptr
    a = np.random.uniform(size=(1, 10)).astype("float32")
    del shared
    gc.collect()
    for m in mods:
        assert m.get_input("x").data_ptr == x_ptr  # one copy of the weights
        m.run(y=a)
        np.testing.assert_allclose(m.get_output(0).numpy(), a + 1)


def test_load_unexpected_params_are_ignored():
    mod = graph_executor.create(add_graph(), numpy_op_library(), CPU)
    blob = save_param_dict({"x": np.ones((1, 10), "float32"), "y_unknown": np.ones(3, "float32")})
    mod.load_params(blob)
    np.testing.assert_equal(mod.get_input("x").numpy(), 1)


def test_load_params_hides_params_from_input_info():
    mod = graph_executor.create(add_graph(), numpy_op_library(), CPU)
    assert mod.get_input_info() == ({"x": (1, 10), "y": (1, 10)}, {"x": "float32", "y": "float32"})
    mod.load_params(save_param_dict({"x": np.ones((1, 10), "float32")}))
    assert mod.get_input_info() == ({"y": (1, 10)}, {"y": "float32"})


def test_graph_executor_api_indices():
    mod = graph_executor.create(add_graph(), numpy_op_library(), CPU)
    assert mod.get_input_index("y") == 1
    assert mod.get_input_index("x") == 0
    assert mod.get_input_index("Invalid") == -1
    assert mod.get_num_inputs() == 2
    assert mod.get_num_outputs() == 1
    assert mod.get_output_index("add") == 0
    assert mod.get_output_index("add:0") == 0
    assert mod.get_output_index("nope") == -1
    assert mod.get_output_info() == ({"add": (1, 10)}, {"add": "float32"})


def test_reshape_nop_outputs():
    mod = graph_executor.create(graphs.reshape_nop(), numpy_op_library(), CPU)
    x = np.random.uniform(size=(10, 10)).astype("float32")
    mod.run(x=x)
    z0 = x + x
    np.testing.assert_allclose(mod.get_output(0).numpy(), z0.reshape(100))
    np.testing.assert_allclose(mod.get_output(1).numpy(), np.maximum(z0 * z0, 0))
    np.testing.assert_allclose(mod.get_output(2).numpy(), (z0 * z0).reshape(2, 50))
    assert mod.storage_plan.entry_storage == (0, 1, 1, 2, 3, 2)


def test_multi_output_split_gru_like():
    b = GraphBuilder()
    x = b.input("x", (4, 3))
    parts = b.op("split", "split", [x], [(1, 3)] * 4)
    p0 = b.input("p0", (1, 3))
    (y,) = b.op("add", "add", [parts[2], p0], [(1, 3)])
    b.output(parts[0], parts[1], y)
    mod = graph_executor.create(b.to_json(), numpy_op_library(), CPU)
    x_np = np.arange(12, dtype="float32").reshape(4, 3)
    mod.run(x=x_np, p0=np.full((1, 3), 10, "float32"))
    assert mod.get_num_outputs() == 3
    np.testing.assert_equal(mod.get_output(0).numpy(), x_np[0:1])
    np.testing.assert_equal(mod.get_output(1).numpy(), x_np[1:2])
    np.testing.assert_equal(mod.get_output(2).numpy(), x_np[2:3] + 10)
    assert mod.get_output_info()[0] == {"split:0": (1, 3), "split:1": (1, 3), "add": (1, 3)}


def test_nested_tuple_outputs_are_flat_heads():
    b = GraphBuilder()
    x = b.input("x", (2,))
    outs = [b.op(f"relu{i}", "relu", [x], [(2,)])[0] for i in range(4)]
    b.output(*outs)
    mod = graph_executor.create(b.to_json(), numpy_op_library(), CPU)
    assert mod.get_num_outputs() == 4


def test_return_empty_tuple_runs():
    b = GraphBuilder()
    b.input("x", (2,))
    mod = graph_executor.create(b.to_json(), numpy_op_library(), CPU)
    assert mod.get_num_outputs() == 0
    mod.run()


def test_runs_without_inputs_set():
    mod = graph_executor.create(graphs.add_one(4), numpy_op_library(), CPU)
    with np.errstate(all="ignore"):  # the garbage may hold NaNs, which numpy warns about
        mod.run()  # garbage in is fine, no crash
    assert mod.get_output(0).shape == (4,)


@pytest.mark.parametrize("dtype", ["float32", "int32", "float64", "int8"])
def test_scalar_inputs(dtype):
    b = GraphBuilder()
    x = b.input("x", (), dtype)
    y = b.input("y", (), dtype)
    (z,) = b.op("add", "add", [x, y], [()], dtype)
    b.output(z)
    mod = graph_executor.create(b.to_json(), numpy_op_library(), CPU)
    mod.run(x=np.array(2, dtype), y=np.array(3, dtype))
    assert mod.get_output(0).numpy() == 5
    assert mod.get_output(0).dtype == dtype


def test_with_params_then_input():
    mod = graph_executor.create(add_graph(), numpy_op_library(), CPU)
    mod.set_input(y=np.full((1, 10), 2, "float32"))
    mod.set_input(x=np.full((1, 10), 3, "float32"))
    mod.run()
    np.testing.assert_equal(mod.get_output(0).numpy(), 5)


def test_outputs_stable_across_runs():
    mod = graph_executor.create(graphs.reshape_nop(), numpy_op_library(), CPU)
    x = np.random.uniform(size=(10, 10)).astype("float32")
    mod.set_input("x", x)
    mod.run()
    first = [mod.get_output(i).numpy() for i in range(3)]
    for _ in range(5):
        mod.run()
        for i in range(3):
            np.testing.assert_array_equal(mod.get_output(i).numpy(), first[i])


def test_get_output_is_an_alias_and_out_copies():
    mod = graph_executor.create(graphs.add_one(4), numpy_op_library(), CPU)
    alias = mod.get_output(0)
    copy = runtime.empty((4,))
    mod.run(x=np.zeros(4, "float32"))
    mod.get_output(0, copy)
    mod.run(x=np.ones(4, "float32"))
    np.testing.assert_equal(alias.numpy(), 2)  # alias follows the latest run
    np.testing.assert_equal(copy.numpy(), 1)
    with pytest.raises(
        ArrayError, match=r"out has shape \(5,\) and dtype float32, expected shape \(4,\)"
    ):
        mod.get_output(0, runtime.empty((5,)))


def test_get_output_by_name_last_match_wins_and_invalid_name():
    b = GraphBuilder()
    x = b.input("x", (2,))
    (a,) = b.op("dup", "relu", [x], [(2,)])
    (c,) = b.op("dup", "myadd", [x], [(2,)])
    b.output(a, c)
    mod = graph_executor.create(b.to_json(), numpy_op_library(), CPU)
    mod.run(x=np.array([-1, 1], "float32"))
    np.testing.assert_equal(mod.get_output("dup").numpy(), [0, 2])
    with pytest.raises(InputNotFoundError, match=r"^graph has no output 'nope'; outputs are"):
        mod.get_output("nope")
    with pytest.raises(IndexError, match=r"output index 2 is out of range: the graph has 2"):
        mod.get_output(2)


def test_set_input_errors_name_the_input():
    mod = graph_executor.create(add_graph(), numpy_op_library(), CPU)
    with pytest.raises(
        InputNotFoundError, match=r"graph has no input 'z'; inputs are \['x', 'y'\]"
    ):
        mod.set_input("z", np.zeros((1, 10), "float32"))
    with pytest.raises(RuntimeError):  # TVM code catches RuntimeError here
        mod.set_input("z", np.zeros((1, 10), "float32"))
    with pytest.raises(
        ArrayError, match=r"input 'x': array shape do not match .* \(3,\) vs \(1, 10\)"
    ):
        mod.set_input("x", np.zeros(3, "float32"))
    with pytest.raises(
        ArrayError, match=r"input 'x' expects shape \(1, 10\) and dtype float32, got"
    ):
        mod.set_input("x", runtime.empty((1, 10), "int32"))
    with pytest.raises(IndexError, match="input index 5 is out of range"):
        mod.set_input(5, np.zeros((1, 10), "float32"))


def test_set_input_numpy_converts_dtype_like_tvm():
    mod = graph_executor.create(add_graph(), numpy_op_library(), CPU)
    mod.set_input("x", np.full((1, 10), 1.5))  # float64 → float32
    assert mod.get_input("x").dtype == "float32"
    np.testing.assert_equal(mod.get_input("x").numpy(), 1.5)


def test_set_input_accepts_dlpack_producers():
    mod = graph_executor.create(add_graph(), numpy_op_library(), CPU)
    src = runtime.array(np.full((1, 10), 4, "float32"))
    mod.set_input("x", src)
    np.testing.assert_equal(mod.get_input("x").numpy(), 4)


def test_get_input_out_copies_and_unknown_raises():
    mod = graph_executor.create(add_graph(), numpy_op_library(), CPU)
    mod.set_input("x", np.full((1, 10), 7, "float32"))
    out = runtime.empty((1, 10))
    assert mod.get_input("x", out) is out
    np.testing.assert_equal(out.numpy(), 7)
    with pytest.raises(
        InputNotFoundError, match=r"^graph has no input 'q'; inputs are \['x', 'y'\]$"
    ):
        mod.get_input("q")


def test_packed_function_table():
    mod = graph_executor.create(add_graph(), numpy_op_library(), CPU)
    assert mod.module.type_key == "GraphExecutor"
    mod["set_input"]("x", runtime.array(np.ones((1, 10), "float32")))
    with pytest.raises(InputNotFoundError, match=r"^graph has no input 'unknown'; inputs are"):
        mod["set_input"]("unknown", runtime.array(np.ones((1, 10), "float32")))
    mod["set_input"]("y", runtime.array(np.ones((1, 10), "float32")))
    mod["run"]()
    np.testing.assert_equal(mod["get_output"](0).numpy(), 2)
    assert mod["get_input"]("unknown") is None
    assert mod["get_num_inputs"]() == 2
    info = mod["get_input_info"]()
    assert info["shape"]["x"] == (1, 10)
    assert info["dtype"]["y"] == "float32"
    outs = mod["run_from_inputs"](1, 0, "x", np.zeros((1, 10), "float32"))
    np.testing.assert_equal(outs[0].numpy(), 1)
    with pytest.raises(AttributeError, match="Module has no function 'nope'"):
        mod["nope"]
    with pytest.raises(ValueError, match="even number of key-value pairs"):
        mod["run_from_inputs"](1, 0, "x")
    with pytest.raises(InputNotFoundError, match=r"^graph has no input 'q'; inputs are"):
        mod["run_from_inputs"](1, 0, "q", np.zeros((1, 10)))
    with pytest.raises(TypeError, match="input key must be a str, got int"):
        mod["get_input_index"](3)


def test_debug_get_output_points_to_debugger():
    mod = graph_executor.create(add_graph(), numpy_op_library(), CPU)
    with pytest.raises(NotImplementedError, match="debug_executor"):
        mod.debug_get_output(0)


def test_missing_kernel_fails_at_create():
    b = GraphBuilder()
    x = b.input("x", (2,))
    (y,) = b.op("conv", "fused_conv2d", [x], [(2,)])
    b.output(y)
    with pytest.raises(
        FunctionNotFoundError, match=r"node 1 \('conv'\) calls kernel 'fused_conv2d'"
    ):
        graph_executor.create(b.to_json(), numpy_op_library(), CPU)


def test_kernel_exception_names_the_node():
    def broken(a, out):
        raise ZeroDivisionError("boom")

    b = GraphBuilder()
    x = b.input("x", (2,))
    (y,) = b.op("first", "relu", [x], [(2,)])
    (z,) = b.op("second", "broken", [y], [(2,)])
    b.output(z)
    mod = graph_executor.create(b.to_json(), numpy_op_library(broken=broken), CPU)
    with pytest.raises(ZeroDivisionError, match="boom") as info:
        mod.run()
    assert info.value.__notes__ == ["while running node 2 'second' (kernel 'broken')"]


def test_flatten_data_passes_flat_views_and_keeps_entry_shape():
    seen = []

    def record(a, out):
        seen.append((a.shape, out.shape))
        out.copyfrom(a.numpy())

    b = GraphBuilder()
    x = b.input("x", (2, 3))
    (y,) = b.op("rec", "record", [x], [(2, 3)], flatten_data=True)
    b.output(y)
    mod = graph_executor.create(b.to_json(), numpy_op_library(record=record), CPU)
    mod.run(x=np.arange(6, dtype="float32").reshape(2, 3))
    assert seen == [((6,), (6,))]
    assert mod.get_output(0).shape == (2, 3)  # v0.8 semantics: entries keep their shape


def test_create_argument_checks():
    lib = numpy_op_library()
    with pytest.raises(TypeError, match="graph_json_str must be a str"):
        graph_executor.create(b"{}", lib, CPU)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="dev has to be the type of Device or a list of Device"):
        graph_executor.create(graphs.add_one(), lib, "cpu")  # type: ignore[arg-type]
    # a remote device needs the module of its session (tests/rpc run the real thing)
    with pytest.raises(ValueError, match="RPC devices need the module loaded in their session"):
        graph_executor.create(graphs.add_one(), lib, runtime.Device(129, 0))
    devs, num_rpc, flat = graph_executor.get_device(lib, [CPU])
    assert (devs, num_rpc, flat) == ([CPU], 0, [1, 0])


def test_concurrent_run_of_one_executor_raises():
    started, release = threading.Event(), threading.Event()

    def slow(a, out):
        started.set()
        release.wait(5)

    b = GraphBuilder()
    x = b.input("x", (1,))
    (y,) = b.op("slow", "slow", [x], [(1,)])
    b.output(y)
    mod = graph_executor.create(b.to_json(), numpy_op_library(slow=slow), CPU)
    worker = threading.Thread(target=mod.run)
    worker.start()
    assert started.wait(5)
    try:
        with pytest.raises(TVMError, match="already running in another thread"):
            mod.run()
    finally:
        release.set()
        worker.join()
    mod.run()  # usable again afterwards


def test_benchmark_runs_and_reports():
    mod = graph_executor.create(graphs.add_one(4), numpy_op_library(), CPU)
    res = mod.benchmark(CPU, x=np.ones(4, "float32"), func_name="run", repeat=2, number=1)
    assert len(res.results) == 2
    assert res.mean > 0
    res = mod.benchmark(CPU, end_to_end=True, x=np.ones(4, "float32"), repeat=2, number=1)
    assert len(res.results) == 2
    assert res.mean > 0


def test_benchmark_statistics_with_mocked_evaluator(monkeypatch):
    mod = graph_executor.create(graphs.add_one(4), numpy_op_library(), CPU)
    calls = []

    def fake_time_evaluator(*args, **kwargs):
        calls.append(args)
        return lambda *a: BenchmarkResult([1, 2, 2, 5])

    monkeypatch.setattr(mod.module, "time_evaluator", fake_time_evaluator)
    res = mod.benchmark(CPU, repeat=4, min_repeat_ms=None)
    assert (res.mean, res.median, res.max, res.min, res.std) == (2.5, 2.0, 5, 1, 1.5)
    assert calls[0] == ("run", CPU, 5, 4, 0, 100, 0, 1)


def test_benchmark_min_repeat_ms_grows_number():
    mod = graph_executor.create(graphs.add_one(4), numpy_op_library(), CPU)
    start = time.perf_counter()
    res = mod.benchmark(CPU, repeat=1, number=1, min_repeat_ms=20)
    assert time.perf_counter() - start >= 0.02
    assert len(res.results) == 1


def test_graph_runtime_alias_warns():
    from tvmrt.contrib import graph_runtime

    with pytest.warns(DeprecationWarning, match="graph_runtime.create is deprecated"):
        mod = graph_runtime.create(graphs.add_one(4), numpy_op_library(), CPU)
    assert isinstance(mod, graph_executor.GraphModule)
