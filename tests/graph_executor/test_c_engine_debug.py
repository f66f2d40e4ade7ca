"""TVM's debug executor face over the C runtime's debug executor (issue 43, item 2).

``factory["debug_create"]`` and ``debug_executor.create`` give the C runtime's
``GraphExecutor`` with TVM's debug functions (``graph_debug.c``) for a library the C runtime
runs; ``GraphModuleDebug`` is the same face over it. The Python engine over the same file
(``TVMRT_GRAPH_ENGINE=python``) is the reference: node outputs bitwise, the same zeros and
rows in the timings and the profile, the same error classes and words.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tvmrt import runtime
from tvmrt.contrib.debugger import debug_executor
from tvmrt.error import TVMError
from tvmrt.runtime import native_module
from tvmrt.runtime.graph_executor.debug import GraphExecutorDebug
from tvmrt.runtime.module import Module

Engines = tuple[Module, Module]


@pytest.fixture
def folder(artifacts: Path) -> Path:
    return artifacts / "batched" / "cnn-b1"


def _x(folder: Path) -> np.ndarray[Any, Any]:
    with np.load(folder.parent / "golden.npz") as npz:
        return np.ascontiguousarray(npz["x"][:1])


def _factory_engines(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Engines:
    """(C, Python) debug executor modules from one factory file's ``debug_create``."""
    made = []
    for engine in ("", "python"):
        monkeypatch.setenv("TVMRT_GRAPH_ENGINE", engine)
        lib = runtime.load_module(str(folder / "deploy_lib.so"))
        made.append(lib["debug_create"]("default", runtime.cpu()))
    monkeypatch.delenv("TVMRT_GRAPH_ENGINE")
    assert isinstance(made[0], native_module.NativeModule)
    assert isinstance(made[1], GraphExecutorDebug)
    assert made[0].type_key == made[1].type_key == "GraphExecutor"  # as TVM's
    return made[0], made[1]


def _faces(
    folder: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> tuple[debug_executor.GraphModuleDebug, debug_executor.GraphModuleDebug]:
    """(C, Python) ``GraphModuleDebug`` from ``debug_executor.create`` over one file."""
    faces = []
    for engine in ("", "python"):
        monkeypatch.setenv("TVMRT_GRAPH_ENGINE", engine)
        lib = runtime.load_module(str(folder / "deploy_lib.so"))
        faces.append(
            debug_executor.create(lib["get_graph_json"](), lib, runtime.cpu(), tmp_path / engine)
        )
    monkeypatch.delenv("TVMRT_GRAPH_ENGINE")
    assert isinstance(faces[0].module, native_module.NativeModule)
    assert isinstance(faces[1].module, GraphExecutorDebug)
    return faces[0], faces[1]


def _is_op(folder: Path) -> list[bool]:
    import json

    nodes = json.loads((folder / "deploy_graph.json").read_text())["nodes"]
    return [node["op"] == "tvm_op" for node in nodes]


def test_every_node_output_is_the_python_engines(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    x = _x(folder)
    engines = _factory_engines(folder, monkeypatch)
    for mod in engines:
        mod["set_input"]("x", runtime.ndarray.array(x))
    count = len(_is_op(folder))
    for nid in range(count):
        got = []
        for mod in engines:
            mod["execute_node"](nid)
            got.append(mod["get_node_output"](nid, 0).numpy())
        np.testing.assert_array_equal(got[0], got[1], err_msg=f"node {nid}")
    # backwards: execute_node(k) after a later node reruns 0 .. k, as the Python engine
    for nid in (count - 3, 1):
        outs = []
        for mod in engines:
            mod["execute_node"](nid)
            outs.append(mod["get_node_output"](nid, 0).numpy())
        np.testing.assert_array_equal(outs[0], outs[1])
    # debug_get_output by index and by name, into a new array and into out
    name = "tvmgen_default_fused_nn_max_pool2d"
    for key in (count - 1, name):
        new = [mod["debug_get_output"](key).numpy() for mod in engines]
        np.testing.assert_array_equal(new[0], new[1])
        outs_given = [runtime.empty(new[0].shape, "float32") for _ in engines]
        for mod, out in zip(engines, outs_given, strict=True):
            assert mod["debug_get_output"](key, out) is None
        np.testing.assert_array_equal(outs_given[0].numpy(), new[1])


def test_run_individual_times_the_ops_and_gives_inputs_zeros(
    folder: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    is_op = _is_op(folder)
    c_face, py_face = _faces(folder, monkeypatch, tmp_path)
    x = _x(folder)
    for face in (c_face, py_face):
        face.set_input("x", x)
        times = face.run_individual(5, 3, 0.2)
        assert len(times) == len(is_op)
        assert all(len(t) == 3 for t in times)
        for nid, node_times in enumerate(times):
            if is_op[nid]:
                assert all(t > 0 and np.isfinite(t) for t in node_times), nid
            else:
                assert node_times == [0.0, 0.0, 0.0], nid
        op = is_op.index(True)
        assert all(t > 0 for t in face.run_individual_node(op, 3, 2).results)
        assert list(face.run_individual_node(0, 3, 2).results) == [0.0, 0.0]
    # the blob is TVM's: an int64 node count, then `repeat` doubles per node
    blob = c_face.module["run_individual"](2, 2, 0, 100, 0, 1)
    assert isinstance(blob, bytes)
    assert len(blob) == 8 + 16 * len(is_op)
    assert struct.unpack_from("@q", blob)[0] == len(is_op)


def test_min_repeat_ms_grows_the_number_of_calls(
    folder: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A measurement shorter than min_repeat_ms is taken again with more calls: each of
    `repeat` measurements then lasts at least min_repeat_ms, so the run takes longer."""
    import time

    c_face, _ = _faces(folder, monkeypatch, tmp_path)
    op = _is_op(folder).index(True)
    start = time.perf_counter()
    result = c_face.run_individual_node(op, 1, 3, 20)
    assert time.perf_counter() - start >= 3 * 0.020
    assert len(result.results) == 3
    assert all(t > 0 for t in result.results)


def test_run_writes_the_dump_of_the_python_engine(
    folder: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    c_face, py_face = _faces(folder, monkeypatch, tmp_path)
    x = _x(folder)
    for face in (c_face, py_face):
        face.run(number=2, x=x)
    assert c_face.debug_datum.get_output_tensors().keys() == (
        py_face.debug_datum.get_output_tensors().keys()
    )
    for key, value in py_face.debug_datum.get_output_tensors().items():
        np.testing.assert_array_equal(
            c_face.debug_datum.get_output_tensors()[key].numpy(), value.numpy()
        )
    names = sorted(p.name for p in Path(c_face.dump_path).iterdir())
    assert names == sorted(p.name for p in Path(py_face.dump_path).iterdir())
    np.testing.assert_array_equal(c_face.get_output(0).numpy(), py_face.get_output(0).numpy())
    c_face.exit()
    py_face.exit()


def test_profile_rows_are_the_python_engines(
    folder: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    c_face, py_face = _faces(folder, monkeypatch, tmp_path)
    x = _x(folder)
    reports = [face.profile(x=x) for face in (c_face, py_face)]

    def rows(calls: list[dict[str, Any]]) -> list[dict[str, str]]:
        return [
            {k: str(v) for k, v in c.items() if k not in ("Duration (us)", "Percent")}
            for c in calls
        ]

    assert rows(reports[0].calls) == rows(reports[1].calls)
    assert len(reports[0].calls) == sum(_is_op(folder))
    assert reports[0].configuration == reports[1].configuration
    assert all(call["Duration (us)"].microseconds > 0 for call in reports[0].calls)
    assert list(reports[0].device_metrics) == ["cpu0"]
    total = reports[0].device_metrics["cpu0"]["Duration (us)"].microseconds
    assert sum(call["Duration (us)"].microseconds for call in reports[0].calls) <= total
    with pytest.raises(NotImplementedError, match="collectors"):
        c_face.profile(collectors=[object()])
    # profile leaves node execution after the last node, as the Python engine
    c_face.module["get_node_output"](len(_is_op(folder)) - 1, 0)


def _misuse(count: int) -> list[tuple[str, Callable[[Module], object]]]:
    return [
        ("execute past the end", lambda m: m["execute_node"](count)),
        ("execute a negative node", lambda m: m["execute_node"](-1)),
        ("execute a float", lambda m: m["execute_node"](1.5)),
        ("output of a node not executed", lambda m: m["get_node_output"](2, 0)),
        ("output index past the end", lambda m: (m["execute_node"](4), m["get_node_output"](4, 1))),
        ("output of a node past the end", lambda m: m["get_node_output"](count, 0)),
        ("time a node past the end", lambda m: m["run_individual_node"](count, 1)),
        ("debug output past the end", lambda m: m["debug_get_output"](count)),
        ("debug output of no such name", lambda m: m["debug_get_output"]("no_such_node")),
        (
            "debug output into another shape",
            lambda m: m["debug_get_output"](4, runtime.empty((3,), "float32")),
        ),
        ("number 0", lambda m: m["run_individual"](0)),
        ("repeat 0", lambda m: m["run_individual"](1, 0)),
        ("negative min_repeat_ms", lambda m: m["run_individual"](1, 1, -1.5)),
        ("negative int min_repeat_ms", lambda m: m["run_individual"](1, 1, -2)),
        ("nan min_repeat_ms", lambda m: m["run_individual"](1, 1, float("nan"))),
        ("negative limit", lambda m: m["run_individual"](1, 1, 0, -1)),
        ("negative cooldown", lambda m: m["run_individual"](1, 1, 0, 1, -0.5)),
        ("repeats_to_cooldown 0", lambda m: m["run_individual"](1, 1, 0, 1, 0, 0)),
        ("a float number", lambda m: m["run_individual"](1.5)),
        ("a string repeat", lambda m: m["run_individual_node"](4, 1, "2")),
        ("a string duration", lambda m: m["run_individual"](1, 1, "1")),
    ]


def test_misuse_is_refused_in_the_python_engines_words(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engines = _factory_engines(folder, monkeypatch)
    count = len(_is_op(folder))
    for what, call in _misuse(count):
        words = []
        for mod in engines:
            with pytest.raises(TVMError) as err:
                call(mod)
            words.append((type(err.value).__name__, str(err.value)))
        assert words[0] == words[1], what


def test_debug_create_names_the_model(folder: Path) -> None:
    lib = runtime.load_module(str(folder / "deploy_lib.so"))
    c_lib = native_module.load_file(str(folder / "deploy_lib.so"))
    words = []
    for factory in (lib, c_lib):
        with pytest.raises(TVMError) as err:
            factory["debug_create"]("other", runtime.cpu())
        words.append(str(err.value))
    assert words[0] == words[1]
    assert "holds model 'default', not 'other'" in words[0]
    # the C factory's own debug_create gives the C debug executor with the params copied in
    x = runtime.ndarray.array(_x(folder))
    mods = [
        lib["debug_create"]("default", runtime.cpu()),
        c_lib["debug_create"]("default", runtime.cpu()),
    ]
    for mod in mods:
        mod["set_input"]("x", x)
        mod["run"]()
    np.testing.assert_array_equal(
        mods[0]["get_output"](0).numpy(), mods[1]["get_output"](0).numpy()
    )
