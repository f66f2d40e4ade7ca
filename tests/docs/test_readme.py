"""The README's walkthrough runs as written (every ``$`` command, in order)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from support.paths import REPO


def walkthrough_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text.split("## Walkthrough", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```console\n(.*?)```", section, re.S)
    assert block, "the README walkthrough has no console block"
    return [line[2:] for line in block.group(1).splitlines() if line.startswith("$ ")]


def test_walkthrough_is_documented():
    commands = walkthrough_commands()
    verbs = {shlex.split(c)[1] for c in commands if c.startswith("tvmrt ")}
    assert {"compile", "inspect", "run", "bench", "profile"} <= verbs


@pytest.mark.slow
def test_walkthrough_runs(tmp_path):
    (tmp_path / "examples").symlink_to(REPO / "examples")
    for command in walkthrough_commands():
        argv = shlex.split(command)
        if argv[0] == "python":
            argv[0] = sys.executable
        elif argv[0] == "tvmrt":
            argv[:1] = [sys.executable, "-m", "tvmrt"]
        done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"{command!r} failed:\n{done.stdout}\n{done.stderr}"


def python_snippets() -> list[str]:
    """The README's ```python blocks before the walkthrough, in order."""
    text = (REPO / "README.md").read_text().split("## Walkthrough", 1)[0]
    return re.findall(r"```python\n(.*?)```", text, re.S)


def run_snippet(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``code`` exactly as written, as ``python snippet.py`` from ``cwd``."""
    script = cwd / "readme_snippet.py"
    script.write_text(code)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, script.name], cwd=cwd, capture_output=True, text=True, timeout=600, env=env
    )


def copy_artifact(src: Path, dst: Path, names: list[str]) -> Path:
    dst.mkdir()
    for name in names:
        shutil.copyfile(src / name, dst / name)
    return dst


def test_readme_python_snippets_name_real_artifact_files(artifacts):
    first, factory = python_snippets()[:2]
    for name in ("deploy_lib.so", "deploy_graph.json", "deploy_param.params"):
        assert f'"{name}"' in first
        assert (artifacts / "mobilenet_v1" / name).is_file()
    assert '"deploy_lib.tar"' in factory
    assert (artifacts / "iris-factory" / "deploy_lib.tar").is_file()


def test_readme_first_snippet_runs_as_written_from_the_artifact_folder(artifacts, tmp_path):
    names = ["deploy_lib.so", "deploy_graph.json", "deploy_param.params"]
    folder = copy_artifact(artifacts / "mobilenet_v1", tmp_path / "mobilenet_v1", names)
    done = run_snippet(python_snippets()[0], folder)
    assert done.returncode == 0, done.stderr
    # the last line prints TVM's BenchmarkResult
    assert "Execution time summary" in done.stdout
    assert "mean (ms)" in done.stdout


def test_readme_factory_snippet_runs_as_written_from_the_artifact_folder(artifacts, tmp_path):
    folder = copy_artifact(artifacts / "iris-factory", tmp_path / "iris", ["deploy_lib.tar"])
    code = python_snippets()[1]
    # the snippet continues the first one (its imports); nothing of it is changed
    preamble = "from tvmrt import runtime\nfrom tvmrt.contrib import graph_executor\n"
    golden = np.load(artifacts / "iris-factory" / "golden.npz")
    np.save(folder / "x.npy", golden["float_input"][:1])
    check = (
        "\nimport numpy as np\nmodule.run(float_input=np.load('x.npy'))\n"
        "np.save('y.npy', module.get_output(0).numpy())\n"
    )
    done = run_snippet(preamble + code + check, folder)
    assert done.returncode == 0, done.stderr
    np.testing.assert_allclose(np.load(folder / "y.npy"), golden["output_0"][:1], rtol=1e-6)
