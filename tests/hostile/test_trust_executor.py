"""Issue 11 (executor side): what the executor used to accept silently is refused clearly.

Every hostile graph or array is built here, small. Each test names its item of the issue.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tvmrt import runtime
from tvmrt.contrib import graph_executor
from tvmrt.error import (
    ArgumentTypeError,
    ArrayError,
    DeviceOutOfMemoryError,
    GraphFormatError,
    InputIndexError,
    InputNotFoundError,
    TVMError,
)
from tvmrt.runtime.graph_executor import executor as executor_module
from tvmrt.runtime.graph_executor import parse_graph, plan_storage
from tvmrt.runtime.graph_executor.graph import MAX_ENTRY_BYTES
from tvmrt.runtime.graph_executor.roles import classify_inputs, output_labels
from tvmrt.runtime.params import save_param_dict
from tvmrt.testing import GraphBuilder, graphs, numpy_op_library

CPU = runtime.cpu()


def two_input_add() -> str:
    b = GraphBuilder()
    x = b.input("x", (4,))
    y = b.input("y", (4,))
    (z,) = b.op("add", "add", [x, y], [(4,)])
    b.output(z)
    return b.to_json()


def weighted_factory(params: dict[str, runtime.NDArray]) -> graph_executor.GraphExecutorFactory:
    b = GraphBuilder()
    x = b.input("data", (1, 4))
    w = b.input("p0", (4, 3))
    (y,) = b.op("dense", "matmul", [x, w], [(1, 3)])
    b.output(y)
    return graph_executor.GraphExecutorFactory(b.to_json(), params, "default", numpy_op_library())


# -- item 2: factory params that do not fit ------------------------------------------------
@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (np.ones((4, 3), "float64"), r"dtype float64"),  # same shape, other dtype
        (np.ones((4, 4), "float32"), r"shape \(4, 4\)"),  # other size
        (np.ones((6, 2), "int32"), r"dtype int32"),  # same byte size, other dtype
    ],
)
def test_factory_param_that_does_not_fit_is_an_error(value, problem):
    lib = weighted_factory({"p0": runtime.array(value)})
    with pytest.raises(ArrayError, match=rf"param 'p0' embedded in the factory .*{problem}"):
        lib["default"](CPU)


def test_factory_param_of_same_bytes_other_shape_is_copied_and_used():
    w = np.arange(12, dtype="float32")
    lib = weighted_factory({"p0": runtime.array(w)})  # (12,) for a (4, 3) input
    mod = graph_executor.GraphModule(lib["default"](CPU))
    x = np.ones((1, 4), "float32")
    mod.run(data=x)
    np.testing.assert_allclose(mod.get_output(0).numpy(), x @ w.reshape(4, 3))


# -- item 3: misspelled names are errors, one message ------------------------------------------
def test_run_with_a_misspelled_name_raises_and_sets_nothing():
    mod = graph_executor.create(two_input_add(), numpy_op_library(), CPU)
    mod.set_input("x", np.zeros(4, "float32"))
    mod.set_input("y", np.zeros(4, "float32"))
    message = r"^graph has no input 'xx'; inputs are \['x', 'y'\]$"
    with pytest.raises(InputNotFoundError, match=message):
        mod.run(xx=np.ones(4, "float32"), y=np.ones(4, "float32"))
    np.testing.assert_equal(mod.get_input("y").numpy(), 0)  # nothing was set
    for call in (
        lambda: mod.set_input(xx=np.ones(4, "float32")),
        lambda: mod.set_input("xx", np.ones(4, "float32")),
        lambda: mod.get_input("xx"),
        lambda: mod["set_input"]("xx", runtime.array(np.ones(4, "float32"))),
        lambda: mod.set_input_zero_copy(xx=runtime.empty((4,))),
        lambda: mod["run_from_inputs"](1, 0, "xx", np.ones(4, "float32")),
    ):
        with pytest.raises(InputNotFoundError, match=message):
            call()


# -- item 5: out= arrays are checked, never reinterpreted --------------------------------------
def test_get_output_and_get_input_out_of_other_dtype_or_shape_is_refused():
    mod = graph_executor.create(graphs.add_one(4), numpy_op_library(), CPU)
    mod.run(x=np.arange(4, dtype="float32"))
    same_bytes = runtime.empty((4,), "int32")
    with pytest.raises(ArrayError, match=r"get_output\(0\): out has shape \(4,\) and dtype int32"):
        mod.get_output(0, same_bytes)
    with pytest.raises(ArrayError, match=r"get_input\('x'\): out has shape \(2, 2\)"):
        mod.get_input("x", runtime.empty((2, 2)))
    good = runtime.empty((4,))
    mod.get_output(0, good)
    np.testing.assert_equal(good.numpy(), [1, 2, 3, 4])


# -- item 6: an input's pool shared with a kernel's output -------------------------------------
def test_param_sharing_a_pool_with_an_operator_output_is_refused():
    b = GraphBuilder()
    x = b.input("x", (1,), storage_id=0)
    w = b.input("w", (1,), storage_id=1)
    (y,) = b.op("add", "add", [x, w], [(1,)], storage_ids=[2])
    (z,) = b.op("relu", "relu", [y], [(1,)], storage_ids=[1])  # overwrites w every run
    b.output(z)
    with pytest.raises(
        GraphFormatError,
        match=r"node 3 \('relu'\) writes output 0 into storage pool 1, which holds input 'w'",
    ):
        graph_executor.create(b.to_json(), numpy_op_library(), CPU)


def test_reshape_of_an_input_may_share_its_pool():
    b = GraphBuilder()
    x = b.input("x", (2, 2), storage_id=0)
    (r,) = b.op("reshape", "__nop", [x], [(4,)], storage_ids=[0])
    (y,) = b.op("relu", "relu", [r], [(4,)], storage_ids=[1])
    b.output(y)
    mod = graph_executor.create(b.to_json(), numpy_op_library(), CPU)
    mod.run(x=np.array([[-1, 2], [-3, 4]], "float32"))
    np.testing.assert_equal(mod.get_output(0).numpy(), [0, 2, 0, 4])


def test_two_inputs_in_one_pool_are_refused():
    b = GraphBuilder()
    x = b.input("x", (2,), storage_id=0)
    y = b.input("y", (2,), storage_id=0)
    (z,) = b.op("add", "add", [x, y], [(2,)], storage_ids=[1])
    b.output(z)
    with pytest.raises(
        GraphFormatError, match=r"inputs 'x' \(node 0\) and 'y' \(node 1\) share storage pool 0"
    ):
        plan_storage(parse_graph(b.to_json()), 1)


# -- item 7: two inputs of one name -------------------------------------------------------------
def test_two_inputs_with_the_same_name_are_refused():
    b = GraphBuilder()
    x = b.input("x", (2,))
    x2 = b.input("x", (2,))
    (z,) = b.op("add", "add", [x, x2], [(2,)])
    b.output(z)
    with pytest.raises(GraphFormatError, match=r"inputs 0 and 1 are both named 'x'"):
        graph_executor.create(b.to_json(), numpy_op_library(), CPU)


# -- item 8: read-only memory is never handed to kernels that write ----------------------------
def _aligned_readonly_from_bytes(n: int) -> np.ndarray:
    raw = bytes(4 * n + 64)
    address = np.frombuffer(raw, np.uint8).ctypes.data
    offset = (-address) % 64
    return np.frombuffer(raw, np.float32, count=n, offset=offset)


def test_set_output_zero_copy_refuses_read_only_memory(tmp_path):
    mod = graph_executor.create(graphs.add_one(16), numpy_op_library(), CPU)
    path = tmp_path / "out.npy"
    np.save(path, np.zeros(16, "float32"))
    mapped = np.load(path, mmap_mode="r")  # data at page + 128: 64-byte aligned
    over_bytes = _aligned_readonly_from_bytes(16)
    owner = runtime.empty((16,))
    flagged = owner.numpy_view().view()
    flagged.flags.writeable = False
    for arr in (mapped, over_bytes, flagged):
        assert arr.ctypes.data % 64 == 0
        with pytest.raises(ArrayError, match=r"zero-copy output 0: the array is read-only"):
            mod.set_output_zero_copy(0, runtime.from_dlpack(arr))
    mod.run(x=np.ones(16, "float32"))  # still runs on its own memory
    np.testing.assert_equal(mod.get_output(0).numpy(), 2)
    assert not over_bytes.any()


def test_read_only_input_is_accepted_but_never_written():
    mod = graph_executor.create(graphs.add_one(16), numpy_op_library(), CPU)
    data = _aligned_readonly_from_bytes(16)
    mod.set_input_zero_copy("x", runtime.from_dlpack(data))
    mod.run()
    np.testing.assert_equal(mod.get_output(0).numpy(), 1)
    with pytest.raises(ArrayError, match=r"input 'x' is bound to read-only memory"):
        mod.set_input("x", np.ones(16, "float32"))


# -- item 13: share_params compiles the run program once ---------------------------------------
def test_share_params_rebinds_without_recompiling_per_param(monkeypatch):
    n = 50
    b = GraphBuilder()
    ref = b.input("data", (2,))
    for i in range(n):
        w = b.input(f"p{i}", (2,))
        (ref,) = b.op(f"add{i}", "add", [ref, w], [(2,)])
    b.output(ref)
    params = {f"p{i}": np.full(2, i, "float32") for i in range(n)}
    blob = save_param_dict(params)
    first = graph_executor.create(b.to_json(), numpy_op_library(), CPU)
    first.load_params(blob)
    second = graph_executor.create(b.to_json(), numpy_op_library(), CPU)
    compiled = []
    original = executor_module.compile_steps
    monkeypatch.setattr(
        executor_module, "compile_steps", lambda steps: compiled.append(1) or original(steps)
    )
    second.share_params(first, blob)
    assert compiled == []  # the kernels' steps are patched in place, not recompiled
    second.run(data=np.zeros(2, "float32"))
    np.testing.assert_equal(second.get_output(0).numpy(), sum(range(n)))
    assert second.get_input("p7").data_ptr == first.get_input("p7").data_ptr


# -- item 16: huge numbers -----------------------------------------------------------------------
def test_integer_of_5000_digits_is_a_graph_format_error():
    doc = json.loads(graphs.add_one(4))
    text = json.dumps(doc).replace('"arg_nodes": [0]', '"arg_nodes": [' + "9" * 5000 + "]")
    with pytest.raises(GraphFormatError, match="graph JSON is not valid JSON"):
        parse_graph(text)
    doc["nodes"][1]["attrs"]["num_outputs"] = "1" * 5000
    with pytest.raises(
        GraphFormatError, match=r"num_outputs'\] must be a decimal .*5000 characters"
    ):
        parse_graph(json.dumps(doc))


def test_shape_of_2_62_bytes_is_refused_at_parse():
    b = GraphBuilder()
    x = b.input("x", (2**31, 2**31))  # 2**62 elements of 4 bytes
    b.output(x)
    with pytest.raises(
        GraphFormatError, match=r"attrs\['shape'\]\[0\]: shape .* takes 18446744073709551616 bytes"
    ):
        parse_graph(b.to_json())
    assert MAX_ENTRY_BYTES == 2**48


def test_plan_larger_than_this_machine_is_refused_at_create():
    b = GraphBuilder()
    x = b.input("x", (2**20, 2**24))  # 64 TiB of float32: addressable, but no host has it
    (y,) = b.op("relu", "relu", [x], [(2**20, 2**24)])
    b.output(y)
    with pytest.raises(
        DeviceOutOfMemoryError,
        match=r"needs 131072\.0 GiB of host memory, more than this machine's",
    ):
        graph_executor.create(b.to_json(), numpy_op_library(), CPU)


# -- issue 12 item 2: index and type errors are TVMErrors and builtins ----------------------
def test_index_and_type_errors_are_tvm_errors_and_builtins():
    mod = graph_executor.create(two_input_add(), numpy_op_library(), CPU)
    for call, text in (
        (lambda: mod.get_input(99), "input index 99 is out of range: the graph has 2 inputs"),
        (lambda: mod.get_output(5), "output index 5 is out of range: the graph has 1 output"),
    ):
        with pytest.raises(InputIndexError, match=text) as info:
            call()
        assert isinstance(info.value, IndexError)
        assert isinstance(info.value, TVMError)
    with pytest.raises(ArgumentTypeError) as type_info:
        mod.get_input_index(0)  # type: ignore[arg-type]
    assert isinstance(type_info.value, TypeError)
    assert isinstance(type_info.value, TVMError)
    with pytest.raises(TypeError, match="input key must be a name or an index, got float"):
        mod.get_input(1.5)  # type: ignore[arg-type]


# -- issue 12 item 6 and item 1 (units): labels and roles --------------------------------------
def test_output_labels_are_unique():
    graph = parse_graph(graphs.reshape_nop())  # two nodes named reshape_nop are outputs
    # TVM's keys reshape_nop:0, relu:1, reshape_nop:2 (the output's position), ':' as '_'
    assert output_labels(graph) == ["reshape_nop_0", "relu_1", "reshape_nop_2"]


def test_classify_inputs_tells_weights_from_data():
    b = GraphBuilder()
    names = ["data", "p0", "p1", "_param_3", "conv0_weight", "bn_moving_var", "mask"]
    refs = [b.input(n, (1,)) for n in names]
    (y,) = b.op("sum", "add", refs[:2], [(1,)])
    b.output(y)
    graph = parse_graph(b.to_json())
    roles = classify_inputs(graph, ["p0", "extra"])
    assert roles.data == ("data", "mask")
    assert roles.weights == ("p0",)
    assert roles.missing == ("p1", "_param_3", "conv0_weight", "bn_moving_var")
    assert roles.unused == ("extra",)
    problems = roles.problems()
    assert "4 weight input(s) have no value in the params: p1, _param_3" in problems[0]
    assert "1 tensor(s) the graph has no input for: extra" in problems[1]
    assert classify_inputs(graph, names[1:6]).problems() == []


def test_rebinding_outputs_twice_patches_the_run_program():
    mod = graph_executor.create(graphs.add_one(16), numpy_op_library(), CPU)
    first, second = runtime.empty((16,)), runtime.empty((16,))
    mod.set_output_zero_copy(0, first)
    mod.run(x=np.zeros(16, "float32"))
    mod.set_output_zero_copy(0, second)
    mod.run(x=np.ones(16, "float32"))
    np.testing.assert_equal(first.numpy(), 1)  # written by the first run only
    np.testing.assert_equal(second.numpy(), 2)


def test_load_params_into_read_only_memory_is_refused():
    b = GraphBuilder()
    x = b.input("x", (16,))
    w = b.input("p0", (16,))
    (y,) = b.op("add", "add", [x, w], [(16,)])
    b.output(y)
    mod = graph_executor.create(b.to_json(), numpy_op_library(), CPU)
    mod.set_input_zero_copy("p0", runtime.from_dlpack(_aligned_readonly_from_bytes(16)))
    with pytest.raises(ArrayError, match=r"input 'p0' is bound to read-only memory"):
        mod.load_params(save_param_dict({"p0": np.ones(16, "float32")}))


def test_replace_step_patches_in_place_or_asks_for_a_recompile():
    from tvmrt.runtime.graph_executor.program import compile_steps, replace_step

    calls: list[tuple[str, tuple[int, ...]]] = []

    def f(*args: int) -> None:
        calls.append(("f", args))

    def g(*args: int) -> None:
        calls.append(("g", args))

    run = compile_steps([(f, (1, 2)), (f, (3,))])
    assert replace_step(run, 0, (g, (5, 6)))
    assert not replace_step(run, 1, (g, (7, 8)))  # other arity: the caller recompiles
    assert not replace_step(run, 2, (g, ()))  # no such step
    assert not replace_step(lambda: None, 0, (g, ()))  # not a compiled program
    run()
    assert calls == [("g", (5, 6)), ("f", (3,))]
