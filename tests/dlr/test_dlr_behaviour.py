"""DLR 1.10's behaviour, case by case, on Neo folders (tests/dlr/build_neo_fixtures.py).

Each expectation is DLR's own (neo-ai-dlr ``python/dlr/dlr_model.py``, ``src/dlr_common.cc``,
``src/dlr_tvm.cc``, ``src/dlr_relayvm.cc``): suffix discovery, the
``compiled.meta`` device check (its message verbatim), names from the meta, float casting,
the element-count check, list results, and the opt-in ``import dlr`` that never shadows
a real one.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from support.paths import REPO
from tvmrt import dlr
from tvmrt.dlr.dlr_model import DLRError


def _inputs(neo_root: Path) -> dict[str, np.ndarray]:
    data = np.load(neo_root / "neo-cpu.npz")
    return {"data": data["data"], "mask": data["mask"]}


def test_the_device_check_error_is_verbatim(neo_copy) -> None:
    folder = neo_copy("neo-cpu")
    meta = json.loads((folder / "compiled.meta").read_text())
    meta["Requirements"]["TargetDeviceType"] = "gpu"
    (folder / "compiled.meta").write_text(json.dumps(meta))
    with pytest.raises(DLRError) as caught:
        dlr.DLRModel(str(folder), "cpu", 0)
    assert str(caught.value) == 'Compiled model requires device type "gpu" but user gave "cpu".'


def test_metadata_names_dtypes_and_list_results(neo_root: Path) -> None:
    model = dlr.DLRModel(str(neo_root / "neo-cpu"))  # dev_type None: cpu, 0
    assert model.has_metadata()
    assert model.get_version() == "1.10.0"
    assert model.get_input_names() == ["data", "mask"]  # the weights are not inputs
    assert model._impl.num_weights == 2  # conv_w, dense_w bound as params
    assert model.get_input_dtypes() == ["float32", "int32"]
    assert model.get_output_names() == ["probabilities", "class_id"]
    assert model.get_output_dtypes() == ["float32", "int32"]
    assert model.get_output_name(1) == "class_id"
    assert model.get_input_dtype(1) == "int32"
    assert model._impl.backend == "tvm"
    assert [list(s) for s in model._impl.output_shapes] == [[1, 10], [1]]
    outputs = model.run(_inputs(neo_root))
    assert isinstance(outputs, list)
    assert [o.dtype.name for o in outputs] == ["float32", "int32"]


def test_float_inputs_are_cast_and_others_must_match(neo_root: Path) -> None:
    model = dlr.DLRModel(str(neo_root / "neo-cpu"))
    given = _inputs(neo_root)
    want = model.run(given)
    as_double = {"data": given["data"].astype("float64"), "mask": given["mask"]}
    assert [o.tobytes() for o in model.run(as_double)] == [o.tobytes() for o in want]
    with pytest.raises(
        ValueError, match="input data with name mask should have dtype int32 but int64 is provided"
    ):
        model.run({"data": given["data"], "mask": given["mask"].astype("int64")})


def test_only_the_element_count_of_an_input_is_checked(neo_root: Path) -> None:
    model = dlr.DLRModel(str(neo_root / "neo-cpu"))
    given = _inputs(neo_root)
    want = model.run(given)
    flat = {"data": given["data"].reshape(1, 192), "mask": given["mask"]}
    assert [o.tobytes() for o in model.run(flat)] == [o.tobytes() for o in want]
    assert model.get_input("data").shape == (1, 192)  # as last set
    assert model.get_input("data", shape=(1, 3, 8, 8)).tobytes() == given["data"].tobytes()
    with pytest.raises(
        DLRError, match=r"Mismatch found in input data size\. Value read: 191, Expected: 192"
    ):
        model.run({"data": given["data"].reshape(-1)[:191], "mask": given["mask"]})
    with pytest.raises(ValueError, match="bogus is not a valid input name"):
        model.run({"bogus": given["mask"]})


def test_one_array_is_the_first_input(neo_root: Path) -> None:
    vm = np.load(neo_root / "neo-relayvm.npz")
    model = dlr.DLRModel(str(neo_root / "neo-relayvm"))
    assert model._impl.backend == "relayvm"
    assert model.get_input_names() == ["x"]
    features, total = model.run(vm["x_5"])
    assert features.tobytes() == vm["features_5"].tobytes()
    assert total.shape == (5,)
    assert [list(s) for s in model._impl.output_shapes] == [[5, 3], [5]]


def test_without_a_meta_there_are_no_output_names(neo_copy, neo_root: Path) -> None:
    folder = neo_copy("neo-cpu")
    (folder / "compiled.meta").unlink()
    model = dlr.DLRModel(str(folder))
    assert not model.has_metadata()
    assert model.get_output_names() == []
    assert len(model.run(_inputs(neo_root))) == 2


def test_files_are_found_by_suffix(neo_copy, tmp_path: Path) -> None:
    folder = neo_copy("neo-cpu")
    renamed = tmp_path / "renamed"
    renamed.mkdir()
    for path, name in (
        ("compiled.so", "model_x.so"),
        ("compiled_model.json", "graph_whatever.json"),
        ("compiled.params", "weights.params"),
        ("compiled.meta", "neo.meta"),
        ("model-shapes.json", "model-shapes.json"),  # SageMaker's: not the graph
    ):
        (folder / path).rename(renamed / name)
    (renamed / "hyperparams.json").write_text("{}")
    assert dlr.DLRModel(str(renamed)).get_output_names() == ["probabilities", "class_id"]
    (renamed / "second.json").write_text("{}")
    with pytest.raises(
        DLRError, match=r"Found multiple \*\.json files: .*graph_whatever\.json .*second\.json"
    ):
        dlr.DLRModel(str(renamed))


def test_a_relay_vm_folder_needs_its_meta(neo_copy) -> None:
    folder = neo_copy("neo-relayvm")
    (folder / "compiled.meta").unlink()
    with pytest.raises(
        DLRError, match=r"Invalid RelayVM model artifact\. Must have \.so, \.ro, and \.meta files\."
    ):
        dlr.DLRModel(str(folder))


def test_a_missing_path_and_an_unknown_backend(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="doesn't exist"):
        dlr.DLRModel(str(tmp_path / "nothing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(DLRError, match="Unable to determine backend from path"):
        dlr.DLRModel(str(tmp_path / "empty"))


def test_nothing_is_sent_anywhere(neo_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("tvmrt.dlr opened a socket")

    monkeypatch.setattr(socket, "socket", refuse)
    model = dlr.DLRModel(str(neo_root / "neo-cpu"))
    model.run(_inputs(neo_root))


def _python(code: str, extra_path: Path | None = None) -> str:
    paths = [str(REPO / "src")] + ([str(extra_path)] if extra_path else [])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_install_makes_import_dlr_resolve_here() -> None:
    code = "import tvmrt.dlr as t; print(t.install()); import dlr, dlr.dlr_model; print(dlr.DLRModel is t.DLRModel, dlr.__version__)"
    assert _python(code) == "True\nTrue 1.10.0"


def test_install_never_shadows_a_real_dlr(tmp_path: Path) -> None:
    real = tmp_path / "site" / "dlr"
    real.mkdir(parents=True)
    (real / "__init__.py").write_text('WHO = "the user\'s own dlr"\n')
    code = "import tvmrt.dlr as t; print(t.install()); import dlr; print(dlr.WHO)"
    assert _python(code, tmp_path / "site") == "False\nthe user's own dlr"
