"""``examples/digits/build.py`` rebuilds the committed example model (what ``make demo`` runs).

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
        "needs the demo extra: pip install '.[demo]' (today's TVM, onnx, scikit-learn)",
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
