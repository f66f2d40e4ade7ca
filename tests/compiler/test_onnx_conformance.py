"""The ONNX backend conformance cases shipped in the onnx wheel, compiled and run under tvmrt.

Tier: CPU, needs the ``compile`` extra and onnx, else skipped. Every case of
``onnx/backend/test/data/{simple,pytorch-converted,pytorch-operator}`` (a model plus input
and expected output protobufs) is compiled in a subprocess, with symbolic dimensions fixed
from the shapes of the test inputs, then run under tvmrt in this process, which never
imports TVM. Each case ends in one of three classes:

* ``pass``: every output matches at ONNX's backend-test tolerance (``rtol=1e-3``,
  ``atol=1e-7``, what ``onnx.backend.test`` accepts);
* ``refused``: compiling raised :class:`~tvmrt.error.CompileError` with a one-line message
  (the frontend rejects an operator, or the model needs something a static graph cannot
  express);
* ``wrong``: it compiled, but failed to run or gave different outputs. The target is
  zero, and the last test asserts it.

The counts are printed by the last test and recorded in bench/README.md.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

if importlib.util.find_spec("tvm") is None or importlib.util.find_spec("onnx") is None:
    pytest.skip("needs the compile extra: pip install 'tvmrt[compile]'", allow_module_level=True)

from tvmrt.compiler import testing
from tvmrt.contrib import graph_executor
from tvmrt.runtime import cpu, load_module

CASES = {case.id: case for case in testing.backend_cases()}
OUTCOMES: dict[str, str] = {}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """All cases compiled once, in a subprocess with two workers."""
    tmp = tmp_path_factory.mktemp("conformance")
    jobs = []
    for case_id, case in CASES.items():
        shapes = case.input_shapes(testing.graph_input_names(case.model))
        out = tmp / case_id.replace("/", "__")
        jobs.append({"name": case_id, "model": case.model, "output_dir": str(out),
                     "input_shapes": shapes})  # fmt: skip
    (tmp / "jobs.json").write_text(json.dumps(jobs))
    cmd = [sys.executable, "-m", "tvmrt.compiler._batch", str(tmp / "jobs.json"),
           str(tmp / "results.json"), "2"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {r["name"]: r for r in json.loads((tmp / "results.json").read_text())}


def run_case(case: testing.BackendCase, result: dict[str, Any]) -> list[np.ndarray]:
    module = graph_executor.create(
        Path(result["graph_json"]).read_text(), load_module(result["lib"]), cpu()
    )
    module.load_params(Path(result["params"]).read_bytes())
    names = testing.graph_input_names(case.model)
    for k, (name, arr) in enumerate(case.inputs()):
        module.set_input(name if name in names else names[k], arr)
    module.run()
    return [module.get_output(i).numpy() for i in range(module.get_num_outputs())]


@pytest.mark.slow
@pytest.mark.parametrize("case_id", sorted(CASES))
def test_conformance_case(compiled: dict[str, Any], case_id: str) -> None:
    case, result = CASES[case_id], compiled[case_id]
    if not result["ok"]:
        # refused: must be a deliberate, one-line CompileError, not a crash
        assert result["error"] == "CompileError", (result["error"], result["message"])
        message = result["message"]
        assert message
        assert "\n" not in message
        assert message[0].islower() or message[0] == "'", message
        OUTCOMES[case_id] = "refused"
        return
    OUTCOMES[case_id] = "wrong"  # until proven right
    expected = [arr for _, arr in case.outputs()]
    got = run_case(case, result)
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert g.shape == e.shape, f"output {i}: shape {g.shape} != {e.shape}"
        if e.dtype.kind in "biu":
            np.testing.assert_array_equal(g, e, err_msg=f"output {i}")
        else:
            np.testing.assert_allclose(g, e, rtol=1e-3, atol=1e-7, err_msg=f"output {i}")
    OUTCOMES[case_id] = "pass"


@pytest.mark.slow
def test_conformance_summary(compiled: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """Print the counts per suite and class; no case may give a wrong result."""
    if len(OUTCOMES) != len(CASES):
        pytest.skip("run the whole file to get the summary")
    counts: Counter[tuple[str, str]] = Counter()
    for case_id, outcome in OUTCOMES.items():
        counts[(case_id.split("/")[0], outcome)] += 1
    lines = ["onnx backend conformance (tvmrt.compile, run under tvmrt):"]
    for suite in testing.CONFORMANCE_SUITES:
        row = {k: counts[(suite, k)] for k in ("pass", "refused", "wrong")}
        lines.append(f"  {suite:18s} " + ", ".join(f"{v} {k}" for k, v in row.items()))
    totals = Counter(OUTCOMES.values())
    lines.append(f"  {'total':18s} {totals['pass']} pass, {totals['refused']} refused, "
                 f"{totals['wrong']} wrong of {len(CASES)}")  # fmt: skip
    for case_id in sorted(OUTCOMES):
        if OUTCOMES[case_id] == "refused":
            lines.append(f"  refused {case_id}: {compiled[case_id]['message'][:160]}")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert totals["wrong"] == 0, sorted(k for k, v in OUTCOMES.items() if v == "wrong")
