"""The Relax VM fixtures as the tools' tests read them (``build/fixtures/relax<era>/<model>``).

Each model folder holds ``model.so``, ``case.json`` (main's parameters, the runs) and per run
``runN_inputs.npz`` (``arg0``, ``arg1``, ... in main's order) and ``runN_golden.npz``
(``out0``, ``out1``, ...: the result's tensors flattened depth first, a shape as int64), TVM's
own VM's answers. :func:`runs` gives them under the names tvmrt's tools use: main's
parameter names for the inputs, ``output_<i>`` for the outputs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from support.fixtures import RELAX_ERAS

__all__ = ["ERAS", "RUNNABLE", "RelaxRun", "case", "folder", "runs", "save_inputs"]

ERAS = RELAX_ERAS
# the models every era has and tvmrt runs (compiled: exec_mode="compiled"; llm_like, which
# calls the KV-cache builtins, is refused)
RUNNABLE = ("mlp_dyn", "cnn", "onnx_cnn", "tuple_out", "control", "run_builtins", "compiled")


@dataclass
class RelaxRun:
    """One golden run: inputs by parameter name, outputs as ``output_<i>``."""

    name: str
    inputs: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray]
    stdout: str | None


def folder(artifacts: Any, era: str, model: str) -> Path:
    """The fixture folder of ``model`` built by TVM ``era`` (``"027"``)."""
    return Path(artifacts / f"relax{era}" / model)


def case(path: Path) -> dict[str, Any]:
    """The folder's ``case.json``."""
    loaded: dict[str, Any] = json.loads((path / "case.json").read_text())
    return loaded


def runs(path: Path) -> list[RelaxRun]:
    """Every run of ``case.json``, renamed for tvmrt's tools."""
    described = case(path)
    names = [p["name"] for p in described["params"]]
    out = []
    for run in described["runs"]:
        with np.load(path / run["inputs"]) as npz:
            inputs = {name: npz[f"arg{i}"] for i, name in enumerate(names)}
        with np.load(path / run["golden"]) as npz:
            outputs = {f"output_{i}": npz[f"out{i}"] for i in range(len(npz.files))}
        out.append(RelaxRun(Path(run["inputs"]).stem, inputs, outputs, run.get("stdout")))
    return out


def save_inputs(run: RelaxRun, path: Path) -> Path:
    """The run's inputs as a ``.npz`` keyed by parameter name (what ``tvmrt run -i`` reads)."""
    np.savez(path, **run.inputs)
    return path
