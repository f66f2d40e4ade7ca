"""``examples/digits/build*.py`` rebuild the committed example models (what ``make demo`` runs).

The rebuilt model must have the committed one's graph and held-out digits, run on the
baseline x86-64 target (no AVX: ``tvmrt inspect`` finds nothing that stops it here), and
classify the held-out digits as the committed one does.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest

from support.paths import REPO

if importlib.util.find_spec("tvm") is None or importlib.util.find_spec("sklearn") is None:
    pytest.skip(
        "needs the demo extra: pip install -e '.[demo]' (today's TVM, onnx, scikit-learn)",
        allow_module_level=True,
    )

from tvmrt import runtime
from tvmrt.contrib import graph_executor

COMMITTED = REPO / "examples" / "digits" / "model"


def _predict(folder):
    lib = runtime.load_module(str(folder / "deploy.so"))
    module = graph_executor.create((folder / "deploy.json").read_text(), lib, runtime.cpu())
    module.load_params((folder / "deploy.params").read_bytes())
    module.run(image=np.load(COMMITTED / "heldout.npz")["image"])
    return module.get_output(0).numpy()


@pytest.mark.slow
def test_build_script_reproduces_the_committed_model(tmp_path):
    out = tmp_path / "model"
    subprocess.run(
        [sys.executable, str(REPO / "examples" / "digits" / "build.py"), str(out)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    for name in ("deploy.json", "deploy.so", "deploy.params", "standalone.so", "heldout.npz"):
        assert (out / name).is_file(), name
    ops = [[n["op"], n["name"]] for n in json.loads((out / "deploy.json").read_text())["nodes"]]
    committed = json.loads((COMMITTED / "deploy.json").read_text())["nodes"]
    assert ops == [[n["op"], n["name"]] for n in committed]
    with np.load(out / "heldout.npz") as new, np.load(COMMITTED / "heldout.npz") as old:
        np.testing.assert_array_equal(new["image"], old["image"])
        np.testing.assert_array_equal(new["label"], old["label"])
    inspected = subprocess.run(
        [sys.executable, "-m", "tvmrt", "inspect", str(out)], capture_output=True, text=True
    )
    assert inspected.returncode == 0, inspected.stdout
    agree = (_predict(out).argmax(axis=1) == _predict(COMMITTED).argmax(axis=1)).mean()
    assert agree > 0.99


@pytest.mark.slow
def test_tvm016_build_script_reproduces_the_committed_legacy_model(tmp_path):
    """build_tvm016.py with the TVM 0.16 peer gives the committed graph and the same outputs."""
    from support.peers import tvm016_python

    out = tmp_path / "tvm016"
    script = REPO / "examples" / "digits" / "build_tvm016.py"
    done = subprocess.run(
        [str(tvm016_python()), str(script), str(out)], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    committed = REPO / "examples" / "digits" / "tvm016"
    graph = json.loads((out / "deploy_graph.json").read_text())
    assert graph == json.loads((committed / "deploy_graph.json").read_text())
    images = np.load(COMMITTED / "heldout.npz")["image"]
    outputs = []
    for folder in (out, committed):
        lib = runtime.load_module(str(folder / "deploy_lib.so"))
        module = graph_executor.create(
            (folder / "deploy_graph.json").read_text(), lib, runtime.cpu()
        )
        module.load_params((folder / "deploy_param.params").read_bytes())
        module.run(image=images)
        outputs.append(module.get_output(0).numpy())
    np.testing.assert_array_equal(outputs[0], outputs[1])
