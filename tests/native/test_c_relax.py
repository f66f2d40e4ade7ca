"""The Relax VM in C: every Relax fixture (build/fixtures/relax<era>/<model>, TVM 0.16 to
0.27) run by C programs against libtvmrt_runtime, plain and under ASan + UBSan (leaks are
errors), through TVM's C API the way TVM's C++ deployment runs a Relax model
(tests/native/c/run_relax.c), every output compared bit for bit with the goldens of TVM's
own VM; each run through every calling path (vm["main"] with NDArray handles and with
DLTensors, set_input + invoke_stateful + get_output, save_function, invoke_closure).
Then: models refused at vm_initialization (compiled mode; llm_like's KV-cache builtins),
two eras' executables side by side in one process, the VM from several threads and a
second thread refused while one invoke runs (tests/native/c/relax_checks.c)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.native.conftest import NativeBuild
from tests.native.test_c_vm import _tensor_line

import support.fixtures as fx

MODES = ("call", "dltensor", "stateful", "saved", "closure")
INVOKES = {"call": 1, "dltensor": 1, "stateful": 1, "saved": 2, "closure": 1}  # per run
MODELS = ("mlp_dyn", "cnn", "onnx_cnn", "tuple_out", "control", "run_builtins", "compiled")
CASES = [(era, model) for era in fx.RELAX_ERAS for model in MODELS]
_DTYPES = {(0, 8): "int8", (0, 16): "int16", (0, 32): "int32", (0, 64): "int64"}
_DTYPES.update({(1, 1): "bool", (1, 8): "uint8", (1, 32): "uint32", (1, 64): "uint64"})
_DTYPES.update({(2, 16): "float16", (2, 32): "float32", (2, 64): "float64", (6, 8): "bool"})


@dataclass
class RelaxRun:
    """One run of a fixture's case.json: inputs arg0..., goldens out0... (depth first)."""

    name: str
    inputs: list[np.ndarray]
    goldens: list[np.ndarray]
    structure: Any
    stdout: str  # what relax.run.print writes in one invoke


def relax_folder(era: str, model: str) -> Path:
    return fx.artifact_folder(f"relax{era}") / model


def relax_runs(folder: Path, prefix: str = "") -> list[RelaxRun]:
    case = json.loads((folder / "case.json").read_text())
    runs = []
    for i, run in enumerate(case["runs"]):
        with np.load(folder / run["inputs"]) as npz:
            inputs = [npz[f"arg{k}"] for k in range(len(case["params"]))]
        with np.load(folder / run["golden"]) as npz:
            goldens = [npz[f"out{k}"] for k in range(len(npz.files))]
        name, structure = f"{prefix}run{i}", run["output_structure"]
        runs.append(RelaxRun(name, inputs, goldens, structure, run.get("stdout", "")))
    return runs


def write_spec(models: list[tuple[Path, list[RelaxRun]]], work: Path) -> Path:
    """run_relax's spec: each model.so, then its runs (inputs written next to it)."""
    lines = []
    for folder, runs in models:
        lines.append(f"model {folder / 'model.so'}")
        for run in runs:
            lines.append(f"run {run.name}")
            lines += [
                _tensor_line(work / f"{run.name}_arg{k}.in", x) for k, x in enumerate(run.inputs)
            ]
    lines.append("end")
    spec = work / "spec.txt"
    spec.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return spec


def read_result(work: Path, name: str) -> tuple[list[tuple[str, np.ndarray]], Any]:
    """The leaves run_relax wrote for `name` (kind, array), and the structure it saw."""
    leaves = []
    while (work / f"{name}_{len(leaves)}.txt").exists():
        kind, code, bits, ndim, *dims = (work / f"{name}_{len(leaves)}.txt").read_text().split()
        assert len(dims) == int(ndim)
        dtype = _DTYPES[(int(code), int(bits))]
        data = np.fromfile(work / f"{name}_{len(leaves)}.bin", dtype=dtype)
        leaves.append((kind, data.reshape([int(d) for d in dims])))
    return leaves, json.loads((work / f"{name}.json").read_text())


def _leaf_kinds(structure: Any) -> list[str]:
    if isinstance(structure, str):
        return [structure]
    return [kind for item in structure for kind in _leaf_kinds(item)]


def same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    return (
        got.dtype == want.dtype
        and got.shape == want.shape
        and np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes()
    )


def check_outputs(work: Path, runs: list[RelaxRun], modes: tuple[str, ...] = MODES) -> None:
    for run in runs:
        for mode in modes:
            what = f"{run.name} through {mode}"
            leaves, structure = read_result(work, f"{run.name}-{mode}")
            assert structure == run.structure, what
            assert [kind for kind, _ in leaves] == _leaf_kinds(run.structure), what
            assert len(leaves) == len(run.goldens), what
            for k, ((_, got), want) in enumerate(zip(leaves, run.goldens, strict=True)):
                assert same_bits(got, want), f"{what}: output {k}"


def expected_stdout(runs: list[RelaxRun], modes: tuple[str, ...] = MODES) -> str:
    """run_relax's output: relax.run.print's text of every invoke (TVM's, from case.json),
    then "ok"."""
    return "".join(run.stdout * sum(INVOKES[m] for m in modes) for run in runs) + "ok\n"


Compile = Callable[[NativeBuild, str, bool], Path]


@pytest.mark.parametrize(("era", "model"), CASES, ids=[f"relax{e}-{m}" for e, m in CASES])
def test_every_fixture_matches_tvms_golden_from_c(
    native: NativeBuild, compile_c: Compile, tmp_path: Path, era: str, model: str
) -> None:
    folder = relax_folder(era, model)
    runs = relax_runs(folder)
    exe = compile_c(native, "run_relax", False)
    spec = write_spec([(folder, runs)], tmp_path)
    proc = native.run(exe, ",".join(MODES), spec, tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == expected_stdout(runs), proc.stdout
    check_outputs(tmp_path, runs)
