"""The Relax VM fixtures (tests/fixtures/build_relax.py, run by each era's TVM peer into
``build/fixtures/relax<era>/``) are built as promised: every era has its models, each
case.json parses and names files that exist, the npz keys follow case.json, the executables
name the builtins each model is there for, and the golden-timing script runs. Nothing here
needs tvmrt's Relax VM."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import support.fixtures as fx
from support.peers import peer_env, peer_python

COMMON = {"mlp_dyn", "cnn", "onnx_cnn", "tuple_out", "run_builtins", "compiled", "control"}
ONLY_027 = {"llm_like", "cuda_mlp", "cuda_mlp_ptx"}
VERSIONS = {"016": "0.16.", "019": "0.19.", "021": "0.21.", "025": "0.25.", "027": "0.27."}
RELAX_RUN = {"shape_to_tensor", "unique", "nonzero", "assert_op", "print"}


def _expected(era: str) -> set[str]:
    if era != "027":
        return COMMON
    return COMMON | (ONLY_027 - (set() if shutil.which("nvcc") else {"cuda_mlp_ptx"}))


def _leaves(structure: Any) -> list[str]:
    if isinstance(structure, str):
        return [structure]
    return [leaf for field in structure for leaf in _leaves(field)]


def _cases(era: str) -> dict[str, dict[str, Any]]:
    folder = fx.artifact_folder(f"relax{era}")
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(folder.glob("*/case.json"))}


@pytest.fixture(scope="module", params=fx.RELAX_ERAS)
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_each_era_has_its_models_and_says_why_not_the_others(era: str) -> None:
    folder = fx.artifact_folder(f"relax{era}")
    assert folder == fx.FIXTURES_DIR / f"relax{era}"
    script, peer = fx.PEER_BUILT[f"relax{era}"]
    assert (folder / ".built").read_text().split()[0] == fx.cache_key(script, peer)
    built = {p.name for p in folder.iterdir() if p.is_dir()}
    assert built == _expected(era)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["tvm"].startswith(VERSIONS[era])
    assert set(manifest["models"]) == built
    skipped = json.loads((folder / "skipped.json").read_text())
    assert set(skipped) == (COMMON | ONLY_027) - built
    assert all(skipped.values())


def test_case_files_exist_and_match_their_npz(era: str) -> None:
    folder = fx.artifact_folder(f"relax{era}")
    for name, case in _cases(era).items():
        where = folder / name
        assert case["model"] == name
        assert case["tvm"].startswith(VERSIONS[era])
        assert case["function"] == "main"
        assert case["exec_mode"] == ("compiled" if name == "compiled" else "bytecode")
        assert (where / "model.so").read_bytes()[:4] == b"\x7fELF"
        assert case["builtins"] == sorted(set(case["builtins"]))
        assert all(n.startswith(("vm.builtin.", "relax.run.")) for n in case["builtins"])
        assert case["kernels"], name
        for run in case["runs"]:
            with np.load(where / run["inputs"]) as inputs:
                assert sorted(inputs.files) == sorted(f"arg{i}" for i in range(len(case["params"])))  # fmt: skip
                for i, param in enumerate(case["params"]):
                    arg = inputs[f"arg{i}"]
                    assert str(arg.dtype) == param["dtype"], (name, param)
                    assert len(arg.shape) == len(param["shape"]), (name, param)
                    for dim, want in zip(arg.shape, param["shape"], strict=True):
                        assert want in (-1, dim), (name, param, arg.shape)
                    for index in param.get("symbolic", {}):
                        assert param["shape"][int(index)] == -1
            leaves = _leaves(run["output_structure"])
            with np.load(where / run["golden"]) as golden:
                assert sorted(golden.files) == sorted(f"out{i}" for i in range(len(leaves)))
                for i, leaf in enumerate(leaves):
                    assert leaf in ("tensor", "shape"), (name, leaf)
                    if leaf == "shape":
                        assert golden[f"out{i}"].dtype == np.int64
                        assert golden[f"out{i}"].ndim == 1


def test_executables_name_what_each_model_is_for(era: str) -> None:
    cases = _cases(era)
    folder = fx.artifact_folder(f"relax{era}")
    assert {len(c["runs"]) for n, c in cases.items() if n in ("mlp_dyn", "compiled")} == {2}
    assert cases["mlp_dyn"]["params"][0] == {
        "name": "x",
        "dtype": "float32",
        "shape": [-1, 16],
        "symbolic": {"0": "n"},
    }
    assert {"vm.builtin.alloc_shape_heap", "vm.builtin.match_shape"} <= set(
        cases["mlp_dyn"]["builtins"]
    )
    assert cases["compiled"]["vm_tir_functions"] == ["main"]
    assert "__vmtir__main" in cases["compiled"]["library_exports"]
    assert cases["cnn"]["weights"] == cases["onnx_cnn"]["weights"] == "constants"
    assert cases["tuple_out"]["runs"][0]["output_structure"] == [
        "tensor",
        ["tensor", "tensor"],
        "shape",
    ]
    control = set(cases["control"]["builtins"])
    assert {"vm.builtin.read_if_cond", "vm.builtin.make_closure", "vm.builtin.invoke_closure"} <= control  # fmt: skip
    assert {"main", "helper", "main_inner"} <= set(cases["control"]["vm_functions"])
    run_calls = {n.removeprefix("relax.run.") for n in cases["run_builtins"]["builtins"] if n.startswith("relax.run.")}  # fmt: skip
    assert run_calls == (RELAX_RUN - {"nonzero"} if era == "016" else RELAX_RUN)
    assert [r["stdout"].startswith("unique: ") for r in cases["run_builtins"]["runs"]] == [True] * 2
    assert (folder / "onnx_cnn" / "model.onnx").is_file() == (era == "027")
    if era == "027":
        kv = {"attention_kv_cache_create", "attention_kv_cache_append", "attention_kv_cache_view", "paged_attention_kv_cache_create"}  # fmt: skip
        assert {f"vm.builtin.{n}" for n in kv} <= set(cases["llm_like"]["builtins"])
        assert json.loads(cases["cuda_mlp"]["target"])["kind"] == "cuda"
        assert "cuda" in (folder / "cuda_mlp" / "kernels.cu").read_text()
        if "cuda_mlp_ptx" in cases:
            assert (folder / "cuda_mlp_ptx" / "kernels.ptx").read_text().count(".entry") >= 1


def test_golden_time_script_reports_tvm_own_vm() -> None:
    folder = fx.artifact_folder("relax027") / "mlp_dyn"
    python = peer_python("tvm027")
    script = fx.BUILDERS / "relax_golden_time.py"
    out = subprocess.run(
        [str(python), str(script), str(folder), "--warmup", "2", "--number", "20"],
        capture_output=True,
        text=True,
        env=peer_env(python),
        check=True,
    )
    report = json.loads(out.stdout)
    assert report["model"] == "mlp_dyn"
    assert report["tvm"].startswith("0.27.")
    assert report["threads"] == 1
    assert report["invokes"] == 20
    assert 0 < report["min_us"] <= report["median_us"] <= report["p90_us"]


def test_golden_matches_numpy_for_the_mlp(era: str) -> None:
    """The goldens are the model they claim: mlp_dyn's, recomputed in numpy from its inputs."""
    folder = Path(fx.artifact_folder(f"relax{era}")) / "mlp_dyn"
    for i in range(2):
        with np.load(folder / f"run{i}_inputs.npz") as a, np.load(folder / f"run{i}_golden.npz") as g:  # fmt: skip
            x, w1, b1, w2, b2 = (a[f"arg{j}"].astype(np.float64) for j in range(5))
            logits = np.maximum(x @ w1.T + b1, 0) @ w2.T + b2
            e = np.exp(logits - logits.max(axis=1, keepdims=True))
            np.testing.assert_allclose(g["out0"], e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)  # fmt: skip


def test_goldens_match_numpy_for_control_and_onnx_runtime_for_the_onnx_cnn(era: str) -> None:
    folder = fx.artifact_folder(f"relax{era}")
    for i, flag in enumerate((True, False)):
        with (
            np.load(folder / "control" / f"run{i}_inputs.npz") as a,
            np.load(folder / "control" / f"run{i}_golden.npz") as g,
        ):
            x = a["arg0"]
            assert bool(a["arg1"]) is flag
            y = x + x if flag else x * x
            np.testing.assert_allclose(g["out0"], 3 * y + x, rtol=1e-6)
    if era != "027":
        return
    for i in range(2):  # the CUDA builds' goldens are the CPU build's: mlp_dyn's
        for cuda in ("cuda_mlp", "cuda_mlp_ptx"):
            if not (folder / cuda).is_dir():
                continue
            with np.load(folder / cuda / f"run{i}_golden.npz") as c, np.load(folder / "mlp_dyn" / f"run{i}_golden.npz") as m:  # fmt: skip
                assert np.array_equal(c["out0"], m["out0"])
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(folder / "onnx_cnn" / "model.onnx"))
    with (
        np.load(folder / "onnx_cnn" / "run0_inputs.npz") as a,
        np.load(folder / "onnx_cnn" / "run0_golden.npz") as g,
    ):
        (want,) = session.run(None, {"x": a["arg0"]})
        np.testing.assert_allclose(g["out0"], want, rtol=1e-4, atol=1e-5)
