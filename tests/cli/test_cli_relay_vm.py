"""``tvmrt run`` and ``tvmrt inspect`` on Relay VM folders and ``vm.so`` files.

Every case and run of relayvm/ goes through ``tvmrt run -i inputs.npz -o outputs.npz``
(in this process, through ``tvmrt.cli.main``; one case also as a child process) and is
compared bitwise with golden.npz.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from support.cli import tvmrt
from support.relayvm_cases import CASES, golden_runs, same_bits
from tvmrt.cli import main


def _params(folder: Path) -> list[str]:
    from tvmrt.runtime.vm.format import read_executable

    data = read_executable((folder / "code.ro").read_bytes(), "code.ro")
    return data.functions[data.globals.index("main")].params


def _inputs_npz(run, path: Path) -> Path:
    arrays = {}
    for name, value in run.inputs.items():
        if isinstance(value, tuple):
            arrays.update({f"{name}.{i}": v for i, v in enumerate(value)})
        else:
            arrays[name] = value
    np.savez(path, **arrays)
    return path


@pytest.mark.parametrize("form", ["folder", "vm.so"])
@pytest.mark.parametrize("case", CASES)
def test_tvmrt_run_matches_golden(artifacts, tmp_path, capsys, case, form):
    folder = artifacts / "relayvm" / case
    target = folder if form == "folder" else folder / "vm.so"
    for run in golden_runs(folder, _params(folder)):
        inputs = _inputs_npz(run, tmp_path / f"in_{run.name}.npz")
        out = tmp_path / f"out_{run.name}.npz"
        assert main(["run", str(target), "-i", str(inputs), "-o", str(out)]) == 0
        with np.load(out) as got:
            assert sorted(got.files) == [f"output_{i}" for i in range(len(run.outputs))]
            for i, want in enumerate(run.outputs):
                assert same_bits(got[f"output_{i}"], want), f"{case} {run.name} output_{i}"
    capsys.readouterr()


def test_tvmrt_run_with_late_bound_constants(artifacts, tmp_path):
    folder = artifacts / "relayvm" / "cnn-static"
    vm_dir = tmp_path / "late"
    vm_dir.mkdir()
    (vm_dir / "code.ro").write_bytes((folder / "code_late_bound.ro").read_bytes())
    (vm_dir / "lib.so").write_bytes((folder / "lib.so").read_bytes())
    (run,) = golden_runs(folder, _params(folder))
    inputs = _inputs_npz(run, tmp_path / "in.npz")
    result = tvmrt("run", vm_dir, "-i", inputs)
    assert result.returncode != 0
    assert "late-bound" in result.stderr
    (vm_dir / "late_bound_consts.params").write_bytes(
        (folder / "late_bound_consts.params").read_bytes()
    )
    result = tvmrt("run", vm_dir, "-i", inputs, "-o", tmp_path / "out.npz")
    assert result.returncode == 0, result.stderr
    with np.load(tmp_path / "out.npz") as got:
        assert same_bits(got["output_0"], run.outputs[0])


def test_inspect_lists_functions_opcodes_and_constants(artifacts):
    result = tvmrt("inspect", artifacts / "relayvm" / "adt-closure" / "vm.so", "--json")
    assert result.returncode == 0, result.stderr
    vm = json.loads(result.stdout)["library"]["relay_vm"]
    funcs = {f["name"]: f["arity"] for f in vm["functions"]}
    assert funcs["main"] == 3
    assert funcs["sum_list"] == 1
    # the opcode counts TVM's build reported for this executable (relayvm/manifest.json)
    manifest = json.loads((artifacts / "relayvm" / "manifest.json").read_text())
    assert vm["opcodes"] == dict(sorted(manifest["cases"]["adt-closure"]["opcodes"].items()))
    assert vm["constants"]["count"] == 8
    text = tvmrt("inspect", artifacts / "relayvm" / "control-flow")
    assert "relay VM: executable of TVM 0.16.dev0, 2 function(s)" in text.stdout
    assert "main(x, n): arity 2" in text.stdout


def test_inputs_without_data_are_refused_by_name(artifacts):
    result = tvmrt("run", artifacts / "relayvm" / "dyn-batch-mlp" / "vm.so")
    assert result.returncode == 2
    assert "input 'x' has no static shape or dtype: give it with -i" in result.stderr


def test_bench_and_profile_take_a_vm_so(artifacts, tmp_path):
    folder = artifacts / "relayvm" / "cnn-static"
    (run,) = golden_runs(folder, _params(folder))
    inputs = _inputs_npz(run, tmp_path / "in.npz")
    bench = tvmrt("bench", folder / "vm.so", "-i", inputs, "--repeat", "3")
    assert bench.returncode == 0, bench.stderr
    assert "median" in bench.stdout
    profile = tvmrt("profile", folder, "-i", inputs, "--repeat", "1", "--number", "1")
    assert profile.returncode == 0, profile.stderr
    assert "Kernels of one run:" in profile.stdout
    assert "vm_mod_fused_nn_softmax" in profile.stdout
