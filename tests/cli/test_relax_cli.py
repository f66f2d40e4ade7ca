"""``tvmrt inspect``, ``run``, ``bench`` and ``profile`` on Relax VM executables.

Every runnable model of every era (``build/fixtures/relax<era>/``: TVM 0.16, 0.19, 0.21,
0.25 and 0.27) goes through ``tvmrt run -i inputs.npz -o outputs.npz --compare golden.npz``
and its outputs equal TVM's own VM's bitwise; inspection reports what each executable's
case.json says it is (era, parameters with their dynamic dims, builtins, kernels) and
refuses, with the reason, what tvmrt does not run (the LLM KV cache).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from support import relax_cases as rc
from support.cli import tvmrt
from support.relayvm_cases import same_bits
from tvmrt.cli import main
from tvmrt.runtime.profiling import Report

ERA_NAMES = {
    "016": ("relax.Executable", "TVM <= 0.20"),
    "019": ("relax.Executable", "TVM <= 0.20"),
    "021": ("relax.VMExecutable", "TVM 0.21"),
    "025": ("relax.VMExecutable", "TVM >= 0.22"),
    "027": ("relax.VMExecutable", "TVM >= 0.22"),
}


def _inspect_json(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    status = main(["inspect", str(path), "--json"])
    return status, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("model", rc.RUNNABLE)
@pytest.mark.parametrize("era", rc.ERAS)
def test_run_equals_tvm_bitwise(artifacts, tmp_path, capfd, era, model):
    folder = rc.folder(artifacts, era, model)
    for run in rc.runs(folder):
        given = rc.save_inputs(run, tmp_path / f"{run.name}.npz")
        golden = tmp_path / f"{run.name}_golden.npz"
        np.savez(golden, **run.outputs)
        out = tmp_path / f"{run.name}_out.npz"
        args = ["run", str(folder / "model.so"), "-i", str(given), "-o", str(out)]
        assert main([*args, "--compare", str(golden), "--rtol", "0", "--atol", "0"]) == 0
        printed = capfd.readouterr().out
        assert "outputs match the reference" in printed
        if run.stdout is not None:  # relax.run.print, TVM's Python-only builtin
            assert run.stdout in printed
        with np.load(out) as got:
            assert sorted(got.files) == sorted(run.outputs)
            for name, want in run.outputs.items():
                assert same_bits(got[name], want), f"{era} {model} {run.name} {name}"


def test_run_a_folder_holding_one_executable(artifacts, tmp_path):
    folder = rc.folder(artifacts, "027", "tuple_out")  # beside case.json, listing.txt, npz
    (run,) = rc.runs(folder)
    out = tmp_path / "out.npz"
    done = tvmrt("run", folder, "-i", rc.save_inputs(run, tmp_path / "in.npz"), "-o", out)
    assert done.returncode == 0, done.stderr
    with np.load(out) as got:
        assert [got[f"output_{i}"].shape for i in range(4)] == [(2, 3), (2, 3), (2, 3), (2,)]
        assert same_bits(got["output_3"], run.outputs["output_3"])  # the shape, as int64


def test_dynamic_batch_needs_its_size(artifacts, capsys):
    model = str(rc.folder(artifacts, "027", "mlp_dyn") / "model.so")
    assert main(["run", model]) == 2
    err = capsys.readouterr().err
    assert "input 'x' has dynamic dimensions (shape (?, 16))" in err
    assert "--input-shape x=4x16" in err
    assert main(["run", model, "--input-shape", "x=3x15"]) == 2
    assert "input 'x' has shape (?, 16)" in capsys.readouterr().err
    assert main(["run", model, "--input-shape", "x=3x16", "--fill", "ones"]) == 0
    assert "output_0: (3, 10) float32" in capsys.readouterr().out


def test_inspect_text_of_the_027_mlp(artifacts):
    model = rc.folder(artifacts, "027", "mlp_dyn") / "model.so"
    done = tvmrt("inspect", model)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    for line in [
        "  form:   Relax VM executable (relax.build / tvm.compile, export_library) [relax-vm]",
        "relax VM: relax.VMExecutable of TVM >= 0.22 (magic 0xd225de2f4214151e), bytecode mode",
        "  built for: CPU",
        "  main: 5 parameter(s), 60 instructions, 31 registers",
        "    x: (n, 16) float32",
        "    fc1_weight: (32, 16) float32",
        "    fc2_bias: (10,) float32",
        "    returns: (?, 10)",
    ]:
        assert line in lines, done.stdout
    assert any(
        ln.startswith("  calls:  7 builtin(s) vm.builtin.alloc_shape_heap")
        and ln.endswith("(provided by tvmrt's Relax VM)")
        for ln in lines
    ), done.stdout
    assert lines[-1] == "runs here (x86-64, linux): yes"


@pytest.mark.parametrize("model", rc.RUNNABLE)
@pytest.mark.parametrize("era", rc.ERAS)
def test_inspect_json_describes_what_case_json_says(artifacts, capsys, era, model):
    folder = rc.folder(artifacts, era, model)
    described = rc.case(folder)
    status, report = _inspect_json(folder / "model.so", capsys)
    assert status == 0, report["problems"]
    assert report["form"] == "relax"
    assert report["runnable"] is True
    assert "graph" not in report
    relax = report["library"]["relax"]
    assert (relax["module_kind"], relax["era"]) == ERA_NAMES[era]
    assert relax["exec_mode"] == described["exec_mode"]
    assert relax["devices"] == ["CPU"]
    (main_fn,) = [f for f in relax["functions"] if f["name"] == described["function"]]
    if described["exec_mode"] == "compiled":  # generated code: no checks to read them from
        assert [p["name"] for p in main_fn["params"]] == [p["name"] for p in described["params"]]
        assert {p["kind"] for p in main_fn["params"]} == {"any"}
        return
    params = [(p["name"], p["shape"], p["dtype"]) for p in main_fn["params"]]
    assert params == [(p["name"], p["shape"], p["dtype"]) for p in described["params"]]
    for p, want in zip(main_fn["params"], described["params"], strict=True):
        assert p.get("symbols") == want.get("symbolic")  # {"0": "n"} for the dynamic batch
    builtins = {c["name"]: c["provided_by"] for c in relax["builtins"]}
    assert set(described["builtins"]) <= set(builtins)
    assert set(builtins.values()) == {"builtin"}
    assert {k["name"] for k in relax["kernels"]} == set(described["kernels"])


def test_inspect_and_run_refuse_the_llm_kv_cache(artifacts, capsys):
    model = rc.folder(artifacts, "027", "llm_like") / "model.so"
    status, report = _inspect_json(model, capsys)
    assert status == 1
    refused = {
        c["name"]: c["family"] for c in report["library"]["relax"]["builtins"] if c.get("family")
    }
    assert refused["vm.builtin.attention_kv_cache_create"].startswith("the LLM KV cache")
    assert refused["vm.builtin.paged_attention_kv_cache_create"] == "the LLM paged KV cache"
    (problem,) = report["problems"]
    assert problem.startswith("tvmrt's Relax VM refuses it")
    assert "vm.builtin.attention_kv_cache_append (the LLM KV cache" in problem
    assert main(["inspect", str(model)]) == 1
    text = capsys.readouterr().out
    assert "(refused: the LLM paged KV cache)" in text
    assert "cannot run here" in text
    assert main(["run", str(model)]) == 1
    assert "vm.builtin.attention_kv_cache_create (the LLM KV cache" in capsys.readouterr().err


@pytest.mark.parametrize("era", rc.ERAS)
def test_inspect_says_compiled_mode_and_that_it_runs(artifacts, capsys, era):
    model = rc.folder(artifacts, era, "compiled") / "model.so"
    status, report = _inspect_json(model, capsys)
    assert status == 0, report["problems"]
    assert report["library"]["relax"]["exec_mode"] == "compiled"
    assert [f["kind"] for f in report["library"]["relax"]["functions"]] == ["vm_tir"]
    assert report["problems"] == []
    assert main(["run", str(model), "--input-shape", "x=1x16"]) == 2  # nothing to fill from
    assert "input 'x' has no static shape or dtype: give its array with -i" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize("model", ["cuda_mlp", "cuda_mlp_ptx"])
def test_inspect_names_the_cuda_build(artifacts, capsys, model):
    path = rc.folder(artifacts, "027", model)
    if not path.is_dir():
        pytest.skip(f"relax027/{model} was not built (its builder needs nvcc)")
    status, report = _inspect_json(path / "model.so", capsys)
    library = report["library"]
    assert "CUDA kernels ('cuda' module" in library["device_code"]
    if model == "cuda_mlp_ptx":  # loadable: described, built for the CPU host and CUDA
        assert library["relax"]["devices"] == ["CPU", "CUDA"]
    else:  # CUDA C source: no runtime loads it (it needs the CUDA toolkit), nor does TVM's
        assert status == 1
        assert any("CUDA C source" in p for p in report["problems"])


def test_bench_json(artifacts):
    model = rc.folder(artifacts, "027", "mlp_dyn") / "model.so"
    done = tvmrt(
        "bench", model, "--input-shape", "x=4x16", "--warmup", "1", "--repeat", "3", "--json"
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["measurements"] == 3
    assert 0 < result["latency_ms"]["min"] <= result["latency_ms"]["max"]


def test_profile_times_every_call(artifacts, tmp_path, capsys):
    model = str(rc.folder(artifacts, "027", "tuple_out") / "model.so")
    trace = tmp_path / "trace.json"
    assert main(["profile", model, "--number", "2", "--trace", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "Execution time summary:" in out
    assert "Calls of one run:" in out
    table = out.split("Calls of one run:")[1]
    for name in ("add", "multiply", "relu", "vm.builtin.make_tuple", "vm.builtin.alloc_storage"):
        assert f"\n{name} " in table, table
    events = json.loads(trace.read_text())["traceEvents"]
    assert {e["name"] for e in events} >= {"add", "multiply", "relu"}
    assert main(["profile", model, "--json"]) == 0
    report = Report.from_json(capsys.readouterr().out)
    names = [str(call["Name"]) for call in report.calls]
    assert names.count("add") == 1
    assert names.count("vm.builtin.make_tuple") == 2
    assert str(report.configuration["Executor"]) == "VM"
    assert main(["profile", model, "--html", str(tmp_path / "p.html")]) == 2
    assert "has none (a VM executable)" in capsys.readouterr().err
