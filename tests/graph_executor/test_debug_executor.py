"""The debug executor (spec §5.1-5.4, §8): TVM's test_runtime_graph_debug.py and
test_runtime_profiling.py::test_graph_executor with Python kernels, plus the dump formats.

CPU tier. Tests marked ``slow`` keep TVM's wall-clock assertions (sleeping kernels,
``min_repeat_ms`` and cooldowns); they take a few seconds each.
"""

from __future__ import annotations

import json
import os
import re
import stat
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tvmrt import runtime
from tvmrt.contrib.debugger import debug_executor
from tvmrt.contrib.debugger.debug_result import DebugResult
from tvmrt.error import ArrayError, InternalError, TVMError
from tvmrt.runtime.graph_executor import GraphExecutorFactory
from tvmrt.runtime.graph_executor.debug import GraphExecutorDebug
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.params import load_param_dict
from tvmrt.runtime.profiling import Count, Report
from tvmrt.testing import (
    FrontendTestModule,
    GraphBuilder,
    emulated_device,
    graphs,
    numpy_op_library,
)

N = 4
HEADER = [
    "Node Name",
    "Ops",
    "Time(us)",
    "Time(%)",
    "Shape",
    "Inputs",
    "Outputs",
    "Measurements(us)",
]


def _sleepy_myadd(seconds: float) -> FrontendTestModule:
    """TVM's fixture: ``myadd`` (B = A + 1) wrapped in a function that sleeps."""

    def myadd(a: NDArray, b: NDArray) -> None:
        np.add(a.numpy_view(), 1, out=b.numpy_view())
        time.sleep(seconds)

    mlib_proxy = FrontendTestModule()
    mlib_proxy["myadd"] = myadd
    return mlib_proxy


def _split_debug_line(line: str) -> list[str]:
    parts = re.split(r"  [ ]*", line)
    assert parts[-1] == ""  # every line ends with >= 2 spaces
    return parts[:-1]


@pytest.fixture
def input_a() -> np.ndarray[Any, Any]:
    return np.random.default_rng(0).uniform(size=(N,)).astype("float32")


@pytest.fixture
def mod(tmp_path: Path) -> debug_executor.GraphModuleDebug:
    """The §1.6 graph over numpy kernels (no sleep), dumping under ``tmp_path``."""
    return debug_executor.create(graphs.add_one(N), numpy_op_library(), runtime.cpu(0), tmp_path)


# -- test_runtime_graph_debug.py -------------------------------------------------------------
@pytest.mark.slow
def test_end_to_end_graph_simple(input_a: np.ndarray[Any, Any]) -> None:
    mod = debug_executor.create(graphs.add_one(N), _sleepy_myadd(0.25), runtime.cpu(0))
    a = input_a
    mod.set_input(x=a)

    directory = mod._dump_path
    assert directory is not None
    assert os.path.exists(directory)
    assert len(os.listdir(directory)) == 1
    graph_dump_path = os.path.join(directory, "_tvmdbg_graph_dump.json")
    assert os.path.exists(graph_dump_path)
    with open(graph_dump_path) as graph_f:
        dumped_graph = json.load(graph_f)
    assert isinstance(dumped_graph, dict)
    for k in ("nodes", "arg_nodes", "node_row_ptr", "heads", "attrs"):
        assert k in dumped_graph

    mod.run()
    assert len(os.listdir(directory)) > 1

    debug_lines = mod.debug_datum.get_debug_result().split("\n")
    assert _split_debug_line(debug_lines[0]) == HEADER
    myadd_lines = _split_debug_line(debug_lines[2])
    assert myadd_lines[0] == "add"
    assert myadd_lines[1] == "myadd"
    runtime_sec = float(myadd_lines[2]) / 1e6
    assert 0.25 < runtime_sec < 0.25 * 1000
    total_lines = _split_debug_line(debug_lines[3])
    assert total_lines[0] == "Total_time"
    assert total_lines[2] == myadd_lines[2]

    trace_path = os.path.join(directory, "_tvmdbg_execution_trace.json")
    assert os.path.exists(trace_path)
    with open(trace_path) as f:
        trace = json.load(f)
    assert trace["displayTimeUnit"] == "ns"
    events = trace["traceEvents"]
    assert len(events) == 4
    assert all(event["ph"] in ("B", "E") for event in events)
    assert all(event["pid"] == 1 for event in events)
    assert all(event["tid"] == 1 for event in events)
    assert all(event["name"] == "x" for event in events[:2])
    assert all(event["name"] == "add" for event in events[2:])
    assert events[0]["ts"] == 0
    assert events[0]["ph"] == "B"

    out = mod.get_output(0, runtime.empty((N,)))
    np.testing.assert_equal(out.numpy(), a + 1)

    mod.exit()
    assert not os.path.exists(directory)


@pytest.mark.slow
def test_run_single_node(input_a: np.ndarray[Any, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    cooldowns: list[float] = []
    real_sleep = time.sleep

    def recording_sleep(seconds: float) -> None:
        if seconds >= 0.5:  # the evaluator's cooldowns, not the kernel's own 0.01 s naps
            cooldowns.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", recording_sleep)
    # TVM's kernel sleeps 0.25 s; 0.01 s keeps every assertion meaningful and saves ~40 s.
    mod = debug_executor.create(graphs.add_one(N), _sleepy_myadd(0.01), runtime.cpu(0))
    try:
        mod.set_input(x=input_a)
        nodes = mod.debug_datum.get_graph_nodes()
        assert len(nodes) == 2
        assert nodes[0]["op"] == "param"
        assert nodes[1]["op"] == "myadd"

        assert mod.run_individual_node(0, number=1).mean == 0

        repeat_1_result = mod.run_individual_node(1, repeat=1)
        assert repeat_1_result.mean > 0
        repeat_3_results = mod.run_individual_node(1, repeat=3)
        assert sum(repeat_3_results.results) > sum(repeat_1_result.results)
        assert len(mod.run_individual_node(1, repeat=10).results) == 10

        start = time.time()
        mod.run_individual_node(1, min_repeat_ms=500)
        assert time.time() - start >= 0.5

        start = time.time()
        cooldowns.clear()
        mod.run_individual_node(1, repeat=2, min_repeat_ms=500, cooldown_interval_ms=1000)
        elapsed_with_def_rep = time.time() - start
        assert elapsed_with_def_rep >= 3
        assert cooldowns == [1.0, 1.0]  # after every repeat

        start = time.time()
        cooldowns.clear()
        mod.run_individual_node(
            1, repeat=2, min_repeat_ms=500, cooldown_interval_ms=1000, repeats_to_cooldown=2
        )
        elapsed_with_rep_2 = time.time() - start
        assert elapsed_with_rep_2 >= 2
        # TVM asserts elapsed_with_rep_2 < elapsed_with_def_rep; on a loaded machine the
        # sleeping kernel's timing noise exceeds the 1 s difference, so count the sleeps
        assert cooldowns == [1.0]  # after repeat 0 only

        with pytest.raises(TVMError):
            mod.run_individual_node(2)
    finally:
        mod.exit()


def _split4_kernel(x: NDArray, *outs: NDArray) -> None:
    for part, out in zip(np.split(x.numpy_view(), [12, 16, 32], axis=2), outs, strict=True):
        out.numpy_view()[...] = part


def _conv1x1_add_kernel(x2: NDArray, p0: NDArray, x3: NDArray, out: NDArray) -> None:
    w = p0.numpy_view()[:, :, 0, 0]
    np.add(np.einsum("oi,nihw->nohw", w, x2.numpy_view()), x3.numpy_view(), out=out.numpy_view())


def _multiple_output_graph() -> str:
    """TVM's test_multiple_output as relay builds it: split into 4, then conv2d(x2, p0) + x3."""
    b = GraphBuilder()
    x = b.input("x", (1, 3, 48, 16))
    x0, x1, x2, x3 = b.op(
        "tvmgen_default_fused_split",
        "tvmgen_default_fused_split",
        [x],
        [(1, 3, 12, 16), (1, 3, 4, 16), (1, 3, 16, 16), (1, 3, 16, 16)],
    )
    p0 = b.input("p0", (3, 3, 1, 1))
    (y,) = b.op(
        "tvmgen_default_fused_nn_conv2d_add",
        "tvmgen_default_fused_nn_conv2d_add",
        [x2, p0, x3],
        [(1, 3, 16, 16)],
        data_layout="NCHW",
        kernel_layout="OIHW",
        hash="c0ffee",
    )
    b.output(x0, x1, y)
    return b.to_json()


@pytest.fixture
def multi_output_factory() -> GraphExecutorFactory:
    lib = FrontendTestModule()
    lib["tvmgen_default_fused_split"] = _split4_kernel
    lib["tvmgen_default_fused_nn_conv2d_add"] = _conv1x1_add_kernel
    p0 = np.random.default_rng(1).uniform(-1, 1, (3, 3, 1, 1)).astype("float32")
    params = {"p0": runtime.array(p0)}
    return GraphExecutorFactory(_multiple_output_graph(), params, "default", lib)


def test_multiple_output(multi_output_factory: GraphExecutorFactory, tmp_path: Path) -> None:
    device = runtime.cpu()
    lib = multi_output_factory
    m = debug_executor.GraphModuleDebug(
        lib["debug_create"]("default", device), [device], lib.graph_json, tmp_path
    )
    nodes = m.debug_datum.get_graph_nodes()
    assert nodes[2]["shape"] == [3, 3, 1, 1]
    assert nodes[2]["attrs"] == {"T": "type: float32"}
    assert nodes[3]["shape"] == [1, 3, 16, 16]
    assert nodes[3]["inputs"] == ["tvmgen_default_fused_split", "p0", "tvmgen_default_fused_split"]

    x = np.random.default_rng(2).uniform(size=(1, 3, 48, 16)).astype("float32")
    m.run(number=1, x=x)
    p0 = multi_output_factory.params["p0"].numpy()[:, :, 0, 0]
    expected = np.einsum("oi,nihw->nohw", p0, x[:, :, 16:32]) + x[:, :, 32:]
    np.testing.assert_allclose(m.get_output(2).numpy(), expected, rtol=1e-5)

    # One row per op output: 4 for the split, 1 for the conv; params are skipped.
    lines = m.get_debug_result(sort_by_time=False).split("\n")
    rows = [_split_debug_line(line) for line in lines[2:]]
    assert [r[0] for r in rows] == ["tvmgen_default_fused_split"] * 4 + [
        "tvmgen_default_fused_nn_conv2d_add"
    ]
    assert [r[4] for r in rows] == [
        "(1, 3, 12, 16)",
        "(1, 3, 4, 16)",
        "(1, 3, 16, 16)",
        "(1, 3, 16, 16)",
        "(1, 3, 16, 16)",
    ]
    assert [r[6] for r in rows] == ["4", "4", "4", "4", "1"]

    # debug_get_output(node) is the node's first output, not entry number `node`.
    np.testing.assert_array_equal(
        m.debug_get_output(2).numpy(), multi_output_factory.params["p0"].numpy()
    )
    np.testing.assert_array_equal(m.debug_get_output(1).numpy(), x[:, :, :12])


def test_create_sets_factory_params(
    multi_output_factory: GraphExecutorFactory, tmp_path: Path
) -> None:
    m = debug_executor.create(
        multi_output_factory.graph_json, multi_output_factory, runtime.cpu(), tmp_path
    )
    np.testing.assert_array_equal(
        m.get_input("p0").numpy(), multi_output_factory.params["p0"].numpy()
    )


# -- test_runtime_profiling.py::test_graph_executor --------------------------------------------
def _mlp() -> tuple[str, FrontendTestModule]:
    b = GraphBuilder()
    data = b.input("data", (1, 784))
    w1, b1 = b.input("p0", (128, 784)), b.input("p1", (128,))
    (h,) = b.op(
        "fused_nn_dense_add_nn_relu",
        "fused_nn_dense_add_nn_relu",
        [data, w1, b1],
        [(1, 128)],
        hash="4a9c1b2d",
    )
    w2, b2 = b.input("p2", (10, 128)), b.input("p3", (10,))
    (o,) = b.op(
        "fused_nn_dense_add",
        "fused_nn_dense_add",
        [h, w2, b2],
        [(1, 10)],
        hash="77e0f3aa",
        weight_layout="NC",
    )
    (s,) = b.op(
        "fused_nn_softmax", "fused_nn_softmax", [o], [(1, 10)], hash="0b1d2c3e", flatten_data=True
    )
    b.output(s)

    def dense_add_relu(x: NDArray, w: NDArray, bias: NDArray, out: NDArray) -> None:
        y = x.numpy_view() @ w.numpy_view().T + bias.numpy_view()
        np.maximum(y, 0, out=out.numpy_view())

    def dense_add(x: NDArray, w: NDArray, bias: NDArray, out: NDArray) -> None:
        out.numpy_view()[...] = x.numpy_view() @ w.numpy_view().T + bias.numpy_view()

    def softmax(x: NDArray, out: NDArray) -> None:
        e = np.exp(x.numpy_view() - x.numpy_view().max())
        out.numpy_view()[...] = e / e.sum()

    lib = FrontendTestModule()
    lib["fused_nn_dense_add_nn_relu"] = dense_add_relu
    lib["fused_nn_dense_add"] = dense_add
    lib["fused_nn_softmax"] = softmax
    return b.to_json(), lib


def test_profile_graph_executor(tmp_path: Path) -> None:
    graph_json, lib = _mlp()
    gr = debug_executor.create(graph_json, lib, runtime.cpu(), dump_root=tmp_path)
    rng = np.random.default_rng(3)
    for name, shape in (("p0", (128, 784)), ("p1", (128,)), ("p2", (10, 128)), ("p3", (10,))):
        gr.set_input(name, rng.uniform(-0.1, 0.1, shape).astype("float32"))
    data = rng.uniform(size=(1, 784)).astype("float32")

    report = gr.profile(data=data)
    assert isinstance(report, Report)
    assert "fused_nn_softmax" in str(report)
    assert "Total" in str(report)
    assert "Hash" in str(report)
    assert "Graph" in str(report)

    calls = {c["Name"]: c for c in report.calls}
    assert list(calls) == ["fused_nn_dense_add_nn_relu", "fused_nn_dense_add", "fused_nn_softmax"]
    dense = calls["fused_nn_dense_add_nn_relu"]
    assert dense["Argument Shapes"] == (
        "float32[1, 784], float32[128, 784], float32[128], float32[1, 128]"
    )
    assert dense["Hash"] == "4a9c1b2d"
    assert dense["Device"] == "cpu0"
    assert dense["Count"] == Count(1)
    assert calls["fused_nn_dense_add"]["weight_layout"] == "NC"
    assert "weight_layout" not in dense
    # flatten_data does not flatten the reported shapes
    assert calls["fused_nn_softmax"]["Argument Shapes"] == "float32[1, 10], float32[1, 10]"
    assert list(report.device_metrics) == ["cpu0"]
    assert report.configuration["Executor"] == "Graph"
    assert report.configuration["Number of threads"] == Count(runtime.num_threads())

    # profile_rpc is the report as JSON
    again = Report.from_json(gr["profile_rpc"]())
    assert [c["Name"] for c in again.calls] == list(calls)


def test_profile_rejects_collectors(mod: debug_executor.GraphModuleDebug) -> None:
    with pytest.raises(NotImplementedError, match="collectors are not supported"):
        mod.profile(collectors=[object()])


# -- dump formats ---------------------------------------------------------------------------
def test_dump_folder_and_files(
    mod: debug_executor.GraphModuleDebug, tmp_path: Path, input_a: np.ndarray[Any, Any]
) -> None:
    dump_path = tmp_path / "_tvmdbg_device_CPU_0"
    assert mod._dump_path == str(dump_path)
    assert stat.S_IMODE(dump_path.stat().st_mode) & 0o077 == 0
    assert os.listdir(dump_path) == ["_tvmdbg_graph_dump.json"]

    mod.run(number=2, repeat=3, x=input_a)
    assert sorted(os.listdir(dump_path)) == [
        "_tvmdbg_execution_trace.json",
        "_tvmdbg_graph_dump.json",
        "output_tensors.params",
    ]
    tensors = load_param_dict((dump_path / "output_tensors.params").read_bytes())
    assert list(tensors) == [
        "x____topo-index:0____output-num:0",
        "add____topo-index:1____output-num:0",
    ]
    np.testing.assert_array_equal(tensors["x____topo-index:0____output-num:0"].numpy(), input_a)
    np.testing.assert_array_equal(
        tensors["add____topo-index:1____output-num:0"].numpy(), input_a + 1
    )

    times = mod.debug_datum.time_list
    assert len(times) == 2
    assert times[0] == [0.0, 0.0, 0.0]
    assert len(times[1]) == 3
    trace = json.loads((dump_path / "_tvmdbg_execution_trace.json").read_text())
    events = trace["traceEvents"]
    assert [e["ph"] for e in events] == ["B", "E", "B", "E"]
    mean_us = float(np.mean(times[1])) * 1e6
    assert events[2]["ts"] == 0
    assert events[3]["ts"] == pytest.approx(mean_us)

    mod.exit()
    assert not tmp_path.exists()


def test_output_tensor_keys_with_duplicate_node_names(tmp_path: Path) -> None:
    b = GraphBuilder()
    x = b.input("x", (2,))
    (r0,) = b.op("relu", "relu", [x], [(2,)])
    (r1,) = b.op("relu", "relu", [r0], [(2,)])
    b.output(r1)
    m = debug_executor.create(b.to_json(), numpy_op_library(), runtime.cpu(), tmp_path)
    m.run(number=1, x=np.array([-1.0, 2.0], dtype="float32"))
    blob = (tmp_path / "_tvmdbg_device_CPU_0" / "output_tensors.params").read_bytes()
    assert list(load_param_dict(blob)) == [
        "x____topo-index:0____output-num:0",
        "relu____topo-index:1____output-num:0",
        "relu____topo-index:2____output-num:0",
    ]
    # debug_get_output by name picks the first node with that name
    np.testing.assert_array_equal(m.debug_get_output("relu").numpy(), [0.0, 2.0])


def test_debug_result_table_layout(tmp_path: Path) -> None:
    result = DebugResult(graphs.add_one(N), tmp_path)
    result.time_list = [[0.0, 0.0], [2e-6, 4e-6]]
    result.update_output_tensors([runtime.empty((N,)), runtime.empty((N,))])

    lines = result.get_debug_result().split("\n")
    assert [_split_debug_line(line) for line in lines] == [
        HEADER,
        [
            "---------",
            "---",
            "--------",
            "-------",
            "-----",
            "------",
            "-------",
            "----------------",
        ],
        ["add", "myadd", "3.0", "100.0", "(4,)", "1", "1", "[2.0, 4.0]"],
        ["Total_time", "-", "3.0", "-", "-", "-", "-", "-"],
    ]
    widths = [len(h) + 2 for h in HEADER]
    widths[0] = len("Total_time") + 2
    widths[1] = len("myadd") + 2
    assert lines[0] == "".join(h.ljust(w) for h, w in zip(HEADER, widths, strict=True))

    unsorted = result.get_debug_result(sort_by_time=False).split("\n")
    assert len(unsorted) == 3
    assert _split_debug_line(unsorted[2])[0] == "add"


def test_debug_result_rows_sorted_by_time(tmp_path: Path) -> None:
    b = GraphBuilder()
    x = b.input("x", (2,))
    (r0,) = b.op("fast", "relu", [x], [(2,)])
    (r1,) = b.op("slow", "relu", [r0], [(2,)])
    b.output(r1)
    result = DebugResult(b.to_json(), tmp_path)
    result.time_list = [[0.0], [1e-6], [3e-6]]
    rows = [_split_debug_line(line) for line in result.get_debug_result().split("\n")[2:]]
    assert [(r[0], r[2], r[3]) for r in rows] == [
        ("slow", "3.0", "75.0"),
        ("fast", "1.0", "25.0"),
        ("Total_time", "4.0", "-"),
    ]


# -- node-level functions -------------------------------------------------------------------
def test_debug_get_output_variants(
    mod: debug_executor.GraphModuleDebug, input_a: np.ndarray[Any, Any]
) -> None:
    mod.set_input(x=input_a)
    np.testing.assert_array_equal(mod.debug_get_output("add").numpy(), input_a + 1)
    np.testing.assert_array_equal(mod.debug_get_output(1).numpy(), input_a + 1)
    np.testing.assert_array_equal(mod.debug_get_output(np.int64(0)).numpy(), input_a)
    out = runtime.empty((N,))
    assert mod.debug_get_output("add", out) is out
    np.testing.assert_array_equal(out.numpy(), input_a + 1)

    with pytest.raises(AttributeError, match=r"^Could not find a node named y in this graph\.$"):
        mod.debug_get_output("y")
    with pytest.raises(RuntimeError, match=r"^Require node index or name only\.$"):
        mod.debug_get_output(1.0)  # type: ignore[arg-type]
    with pytest.raises(TVMError, match="cannot find a node named 'y'"):
        mod["debug_get_output"]("y")
    with pytest.raises(InternalError, match="node index 2 is out of range"):
        mod.debug_get_output(2)
    with pytest.raises(ArrayError, match=r"out has shape \(2,\)"):
        mod.debug_get_output(1, runtime.empty((2,)))


def test_execute_node_and_get_node_output(mod: debug_executor.GraphModuleDebug) -> None:
    calls: list[int] = []
    executor = mod.module
    assert isinstance(executor, GraphExecutorDebug)
    assert executor.type_key == "GraphExecutor"
    executor.node_calls[1] = lambda: calls.append(1)

    mod.set_input(x=np.zeros(N, dtype="float32"))
    mod["execute_node"](0)
    assert calls == []
    with pytest.raises(InternalError, match=r"node 1 is not the last executed node \(0\)"):
        mod["get_node_output"](1, 0)
    mod["execute_node"](1)
    assert calls == [1]
    mod["execute_node"](1)  # the same node again: nothing runs
    assert calls == [1]
    mod["execute_node"](0)  # going back restarts from node 0
    mod["execute_node"](1)
    assert calls == [1, 1]
    out = mod["get_node_output"](1, 0)
    assert out.device == runtime.cpu(0)
    assert out.numpy_view() is not executor.entries[1].numpy_view()
    with pytest.raises(InternalError, match="output index 1 is out of range"):
        mod["get_node_output"](1, 1)
    with pytest.raises(InternalError, match="node index -1 is out of range"):
        mod["execute_node"](-1)


def test_run_individual_blob(mod: debug_executor.GraphModuleDebug) -> None:
    mod.set_input(x=np.zeros(N, dtype="float32"))
    blob = mod["run_individual"](2, 3, 0, 100, 0, 1)
    assert isinstance(blob, bytes)
    assert len(blob) == struct.calcsize("@q") + 2 * 3 * struct.calcsize("@d")
    (count,) = struct.unpack_from("@q", blob)
    assert count == 2
    per_node = struct.unpack_from("@6d", blob, struct.calcsize("@q"))
    assert per_node[:3] == (0.0, 0.0, 0.0)
    assert all(t > 0 for t in per_node[3:])

    times = mod.run_individual(2, repeat=3)
    assert len(times) == 2
    assert times[0] == [0.0, 0.0, 0.0]
    assert len(times[1]) == 3

    node_blob = mod["run_individual_node"](1, 1, 4, 0, 100, 0, 1)
    assert len(struct.unpack("@4d", node_blob)) == 4


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"number": 0}, r"^number must be > 0, got 0$", id="number"),
        pytest.param({"repeat": -1}, r"^repeat must be > 0, got -1$", id="repeat"),
        pytest.param({"min_repeat_ms": -1}, r"^min_repeat_ms must be >= 0, got -1$", id="ms"),
        pytest.param(
            {"limit_zero_time_iterations": -1},
            r"^limit_zero_time_iterations must be >= 0, got -1$",
            id="limit",
        ),
        pytest.param(
            {"cooldown_interval_ms": -5}, r"^cooldown_interval_ms must be >= 0, got -5$", id="cool"
        ),
        pytest.param(
            {"repeats_to_cooldown": 0}, r"^repeats_to_cooldown must be > 0, got 0$", id="rtc"
        ),
    ],
)
def test_timing_argument_checks(
    mod: debug_executor.GraphModuleDebug, kwargs: dict[str, float], message: str
) -> None:
    args: dict[str, Any] = {"number": 1, **kwargs}
    with pytest.raises(ValueError, match=message):
        mod.run_individual(**args)
    with pytest.raises(ValueError, match=message):
        mod.run_individual_node(1, **args)


def test_run_individual_node_null_node_and_range(mod: debug_executor.GraphModuleDebug) -> None:
    res = mod.run_individual_node(0, repeat=3)
    assert list(res.results) == [0.0, 0.0, 0.0]
    with pytest.raises(TVMError, match=r"node index 2 is out of range; the graph has 2 nodes"):
        mod.run_individual_node(2)
    with pytest.raises(TVMError, match="node index -1 is out of range"):
        mod.run_individual_node(-1)


# -- creation -------------------------------------------------------------------------------
def test_global_create_function() -> None:
    create: Callable[..., Any] = runtime.get_global_func("tvm.graph_executor_debug.create")
    lib = numpy_op_library()
    by_pair = create(graphs.add_one(N), lib, 1, 0)
    by_device = create(graphs.add_one(N), lib, runtime.cpu(0))
    with_lookup = create(graphs.add_one(N), lib, lambda *a: None, 1, 0)
    for ex in (by_pair, by_device, with_lookup):
        assert isinstance(ex, GraphExecutorDebug)
        assert ex.type_key == "GraphExecutor"
        assert ex.devices == (runtime.cpu(0),)
    with pytest.raises(TypeError, match="needs at least one device"):
        create(graphs.add_one(N), lib)
    with pytest.raises(TypeError, match=r"expected Devices or device type and id pairs, got \[1\]"):
        create(graphs.add_one(N), lib, 1)
    plain = runtime.get_global_func("tvm.graph_executor.create")(graphs.add_one(N), lib, 1, 0)
    assert type(plain).__name__ == "GraphExecutor"


def test_create_checks_arguments(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="graph_json_str must be a str"):
        debug_executor.create(b"{}", numpy_op_library(), runtime.cpu())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="dev has to be the type of Device or a list of Device"):
        debug_executor.create(graphs.add_one(N), numpy_op_library(), "cpu")  # type: ignore[arg-type]


def test_graph_module_debug_needs_debug_executor(tmp_path: Path) -> None:
    from tvmrt.contrib import graph_executor

    plain = graph_executor.create(graphs.add_one(N), numpy_op_library(), runtime.cpu())
    with pytest.raises(AttributeError, match="run_individual"):
        debug_executor.GraphModuleDebug(plain.module, [runtime.cpu()], graphs.add_one(N), tmp_path)


def test_default_dump_root_is_a_temp_folder() -> None:
    m = debug_executor.create(graphs.add_one(N), numpy_op_library(), runtime.cpu())
    try:
        assert m._dump_root is not None
        assert os.path.basename(m._dump_root).startswith("tvmdbg_")
        assert m._dump_path == os.path.join(m._dump_root, "_tvmdbg_device_CPU_0")
    finally:
        m.exit()
    assert not os.path.exists(m._dump_root)


def test_heterogeneous_graph_on_emulated_device(tmp_path: Path) -> None:
    cuda = runtime.cuda(0)
    with emulated_device(cuda.device_type) as api:
        graph_json = graphs.heterogeneous_simplex(cuda.device_type)
        m = debug_executor.create(graph_json, numpy_op_library(), [runtime.cpu(), cuda], tmp_path)
        assert m._dump_path == str(tmp_path / "_tvmdbg_device_CPU_0")
        a, b, c = (np.full(N, v, dtype="float32") for v in (1.0, 2.0, 0.5))
        m.run(number=1, A=a, B=b, C=c)
        np.testing.assert_array_equal(m.get_output(0).numpy(), a + b - c)
        copied = m.debug_get_output("__copy_add_to_sub")
        assert copied.device == runtime.cpu(0)
        np.testing.assert_array_equal(copied.numpy(), a + b)

        # a node on another device than the host is synchronised after every call
        syncs = api.syncs
        m.run_individual_node(2, number=3)
        assert api.syncs > syncs + 3

        report = m.profile()
        assert [(c["Name"], c["Device"]) for c in report.calls] == [
            ("add", "cuda0"),
            ("__copy", "cpu0"),
            ("subtract", "cpu0"),
        ]
        assert list(report.device_metrics) == ["cpu0", "cuda0"]
