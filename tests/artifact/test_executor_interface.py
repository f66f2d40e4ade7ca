"""tvmrt.artifact.Executor: every artifact form loads to one interface that runs, replicates
and profiles the model, and the form loading picks is the form inspection reports.

Artifacts: relay016, built by tests/fixtures/build_relay016.py (one small CNN in every packaging form, with TVM's
outputs in golden.npz; CPU forms match bitwise, relay016/README.md).
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import numpy as np
import pytest

from tvmrt.artifact import (
    Executor,
    LoadedModel,
    ProfilingExecutor,
    TensorInfo,
    executor_from_graph,
    find_artifact,
    inspect_artifact,
    load_artifact,
)
from tvmrt.error import InputNotFoundError, UnsupportedError
from tvmrt.testing import graphs, numpy_op_library

# (artifact path under relay016, the form tvmrt.artifact.forms gives it)
FORMS = [
    ("systemlib-so/deploy.so", "factory"),
    ("systemlib-tar/deploy.tar", "factory"),
    ("linkparams-so/deploy.so", "factory"),
    ("aot-so/deploy.so", "aot"),
    ("mlf-graph/model_llvm.tar", "mlf"),
    ("tvmc-package/module.tar", "tvmc"),
]
DATA = TensorInfo("data", (1, 3, 16, 16), "float32")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TVMRT_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "artifact-cache"))


@pytest.fixture(scope="module")
def relay016(artifacts: Path) -> Path:
    return artifacts / "relay016"


def _golden(path: Path) -> dict[str, np.ndarray]:
    with np.load(path.parent / "golden.npz") as data:
        return {k: data[k] for k in data.files}


def _folder_from_tvmc(relay016: Path, dest: Path) -> Path:
    """mod.so + mod.json + mod.params of the tvmc package, as a plain folder."""
    with tarfile.open(relay016 / "tvmc-package" / "module.tar") as archive:
        archive.extractall(dest, filter="data")
    return dest


def _run(executor: Executor, data: np.ndarray) -> np.ndarray:
    executor.set_input("data", data)
    executor.run()
    return executor.get_output(0).numpy()


@pytest.mark.parametrize(("path", "form"), FORMS)
def test_every_form_runs_through_one_executor_interface(relay016, path, form):
    files = find_artifact(relay016 / path)
    golden = _golden(relay016 / path)
    model = load_artifact(files)
    assert isinstance(model, LoadedModel)
    assert model.form == form
    assert inspect_artifact(files).form == form  # one table for loading and inspection
    executor = model.executor
    assert isinstance(executor, Executor)
    assert list(executor.inputs) == [DATA]  # the weights are not inputs to set
    (out_info,) = executor.outputs
    assert (out_info.shape, out_info.dtype) == ((1, 10), "float32")
    assert len(model.output_names()) == 1
    assert model.user_inputs() == {"data": ((1, 3, 16, 16), "float32")}
    assert executor.weight_problems(set()) == []
    np.testing.assert_array_equal(_run(executor, golden["data"]), golden["output_0"])
    assert executor.get_num_inputs() >= 1
    assert executor.get_input(executor.get_input_index("data")).shape == (1, 3, 16, 16)


@pytest.mark.parametrize(("path", "form"), FORMS)
def test_replicas_answer_alone_and_share_the_weights(relay016, path, form):
    golden = _golden(relay016 / path)
    model = load_artifact(find_artifact(relay016 / path))
    first = model.executor
    replicas = model.replicate(2)
    assert len(replicas) == 2
    zeros = np.zeros_like(golden["data"])
    for replica in replicas:
        assert replica.inputs == first.inputs
        assert replica.outputs == first.outputs
        assert replica.get_input("data").data_ptr != first.get_input("data").data_ptr
        _run(replica, zeros)  # a replica's input is its own: the first keeps its answer
        np.testing.assert_array_equal(_run(first, golden["data"]), golden["output_0"])
        np.testing.assert_array_equal(_run(replica, golden["data"]), golden["output_0"])
    if form == "aot":
        return  # weights linked into the library: nothing to compare
    weights = [i for i in range(first.get_num_inputs()) if i != first.get_input_index("data")]
    assert weights or path.startswith("linkparams")  # link-params: constants in the kernels
    for i in weights:  # held once whatever the number of executors
        assert first.get_input(i).data_ptr == replicas[1].get_input(i).data_ptr, i


def test_a_folder_with_a_params_file_shares_them_by_share_params(relay016, tmp_path):
    folder = _folder_from_tvmc(relay016, tmp_path / "pkg")
    files = find_artifact(folder)
    assert files.graph is not None
    assert files.params is not None
    golden = _golden(relay016 / "tvmc-package" / "module.tar")
    model = load_artifact(files)
    assert model.form == "folder" == inspect_artifact(files).form
    assert {f"p{i}" for i in range(6)} <= model.param_names
    (replica,) = model.replicate(1)
    for name in sorted(model.param_names):
        if model.executor.get_input_index(name) >= 0:
            assert replica.get_input(name).data_ptr == model.executor.get_input(name).data_ptr
    np.testing.assert_array_equal(_run(replica, golden["data"]), golden["output_0"])


def test_a_graph_without_its_params_names_the_missing_weights(relay016, tmp_path):
    folder = _folder_from_tvmc(relay016, tmp_path / "pkg")
    (folder / "mod.params").unlink()
    files = find_artifact(folder)
    # the library is a factory with the weights inside, but the graph JSON given wins
    model = load_artifact(files)
    assert next(t.name for t in model.executor.inputs) == "data"
    problems = model.executor.weight_problems(set())
    assert problems
    assert "weight input(s) have no value" in problems[0]


@pytest.mark.parametrize(
    ("path", "per_node"), [("systemlib-so/deploy.so", True), ("aot-so/deploy.so", False)]
)
def test_debug_load_gives_a_profiling_executor(relay016, tmp_path, path, per_node):
    golden = _golden(relay016 / path)
    model = load_artifact(find_artifact(relay016 / path), debug=True, dump_root=str(tmp_path))
    profiler = model.profiler
    assert isinstance(profiler, ProfilingExecutor)
    assert model.executor is profiler
    np.testing.assert_array_equal(_run(profiler, golden["data"]), golden["output_0"])
    table = profiler.run_timed(2, 1)
    assert "Time(us)" in table
    assert profiler.dump_path.startswith(str(tmp_path))
    timing = profiler.node_timing()
    if per_node:
        assert timing is not None
        assert len(timing.times) == len(timing.graph.nodes)
    else:
        assert timing is None  # AOT: one call for the whole model
    assert profiler.profile().calls
    with pytest.raises(UnsupportedError, match="not replicated"):
        profiler.replicate(1)


def test_executor_from_graph_over_a_python_module():
    executor = executor_from_graph(graphs.add_one(4), numpy_op_library())
    assert list(executor.inputs) == [TensorInfo("x", (4,), "float32")]
    assert [(t.shape, t.dtype) for t in executor.outputs] == [((4,), "float32")]
    assert executor.output_labels() == [f"{executor.outputs[0].name}_0"]
    (replica,) = executor.replicate(1)
    replica.set_input("x", np.arange(4, dtype="float32"))
    replica.run()
    np.testing.assert_array_equal(replica.get_output(0).numpy(), np.arange(1, 5, dtype="float32"))
    with pytest.raises(InputNotFoundError):
        replica.set_input("nope", np.zeros(4, "float32"))
