"""Every command of the README works, as written, in a fresh clone with no third-party data
folder beside it (``support.paths.WORKSPACE_PATH``).

The README's fenced ``sh``/``bash``/``python`` blocks are extracted by
``tests/support/readme.py``; a block marked ``<!-- readme-test: skip (REASON) -->`` is not
run. The slow test clones this checkout's HEAD (``git clone``: committed files only) into
a temporary folder and runs every other block in order, from the clone's root, in one
shell environment whose ``PATH`` starts with the clone's ``.venv/bin`` (the venv the first
block, ``make demo``, creates), as a user who activated it would. The fast tests check
the blocks' form and that the example model the README uses is what it says it is.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from support.paths import REPO, WORKSPACE, WORKSPACE_PATH
from support.readme import RUNNABLE, blocks, fences

README = (REPO / "README.md").read_text()
MODEL = REPO / "examples" / "digits" / "model"


def test_every_command_block_is_runnable_or_skipped_with_a_reason():
    langs = {b.lang for b in fences(README)}
    # a console or bare block would hold commands this test never runs
    assert langs <= {*RUNNABLE, "text", "json", "yaml"}, langs
    runnable = blocks(README)
    assert runnable[0].code.startswith("make demo"), "the README starts with make demo"
    assert runnable[0].skip is None
    for block in runnable:
        assert block.skip is None or len(block.skip) > 10, block
    markers = sum(1 for line in README.splitlines() if line.startswith("<!-- readme-test: skip"))
    assert markers == sum(1 for b in runnable if b.skip), "a skip comment is not above a fence"


def test_readme_names_no_workspace_paths():
    for block in blocks(README):
        assert WORKSPACE_PATH not in block.code, block
        assert "TVMRT_ARTIFACTS" not in block.code, block


def _mlp(x: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    hidden = np.maximum(x @ p["p0"] + p["p1"], 0)
    logits = hidden @ p["p2"] + p["p3"]
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_example_model_matches_numpy_and_classifies_the_held_out_digits():
    from tvmrt import runtime
    from tvmrt.contrib import graph_executor

    params = {
        k: v.numpy()
        for k, v in runtime.load_param_dict((MODEL / "deploy.params").read_bytes()).items()
    }
    held_out = np.load(MODEL / "heldout.npz")
    expected = _mlp(held_out["image"], params)
    for lib_file in ("deploy.so", "standalone.so"):
        lib = runtime.load_module(str(MODEL / lib_file))
        if lib_file == "deploy.so":
            module = graph_executor.create((MODEL / "deploy.json").read_text(), lib, runtime.cpu())
            module.load_params((MODEL / "deploy.params").read_bytes())
        else:
            module = graph_executor.GraphModule(lib["default"](runtime.cpu()))
        module.run(image=held_out["image"])
        got = module.get_output(0).numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)
        assert (got.argmax(axis=1) == held_out["label"]).mean() > 0.95


def test_tvm016_build_of_the_example_model_matches_numpy():
    """The legacy-ABI build the README's first block loads: same weights, same answers."""
    from tvmrt import runtime
    from tvmrt.contrib import graph_executor

    folder = REPO / "examples" / "digits" / "tvm016"
    blob = (MODEL / "deploy.params").read_bytes()
    params = {k: v.numpy() for k, v in runtime.load_param_dict(blob).items()}
    held_out = np.load(MODEL / "heldout.npz")
    lib = runtime.load_module(str(folder / "deploy_lib.so"))
    module = graph_executor.create((folder / "deploy_graph.json").read_text(), lib, runtime.cpu())
    module.load_params((folder / "deploy_param.params").read_bytes())
    module.run(image=held_out["image"])
    got = module.get_output(0).numpy()
    np.testing.assert_allclose(got, _mlp(held_out["image"], params), rtol=1e-4, atol=1e-6)


def test_python_blocks_run_from_the_repository_root(tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    python = [b for b in blocks(README) if b.lang == "python" and b.skip is None]
    assert len(python) >= 2
    for i, block in enumerate(python):
        script = tmp_path / f"block{i}.py"
        script.write_text(block.code)
        done = subprocess.run(
            [sys.executable, str(script)], cwd=REPO, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, f"README line {block.line}:\n{done.stderr}"
    # the first block ends by printing TVM's BenchmarkResult
    first = subprocess.run(
        [sys.executable, str(tmp_path / "block0.py")], cwd=REPO, env=env, capture_output=True
    )
    assert b"Execution time summary" in first.stdout


def _clone_env(clone: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TVMRT_", "PYTHON"))}
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = f"{clone / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(clone / ".venv")
    return env


@pytest.mark.slow
def test_every_readme_command_runs_in_a_fresh_clone(tmp_path):
    """Minutes: make demo builds a venv (numpy from the index) and pip install . rebuilds."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs git and a git checkout to clone")
    clone = tmp_path / "tvmrt"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, timeout=120)
    assert not (tmp_path / WORKSPACE).exists()
    env = _clone_env(clone)
    for i, block in enumerate(blocks((clone / "README.md").read_text())):
        if block.skip:
            continue
        if block.lang == "python":
            script = tmp_path / f"block{i}.py"
            script.write_text(block.code)
            argv = [str(clone / ".venv" / "bin" / "python"), str(script)]
        else:
            argv = ["bash", "-euo", "pipefail", "-c", block.code]
        done = subprocess.run(argv, cwd=clone, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, (
            f"README line {block.line} failed in a fresh clone:\n{block.code}\n"
            f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    assert (clone / "build" / "digits" / "profile.html").is_file()  # make demo's report
    assert (clone / "build" / "profile.html").is_file()  # the walkthrough's
    assert (clone / "build" / "cpp" / "digits").is_file()  # the C++ section's
    # what the blocks write goes under build/ (ignored): nothing left untracked or changed
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True
    )
    assert status.stdout == "", status.stdout
