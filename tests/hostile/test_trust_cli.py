"""Issue 11 item 1 and issue 12 item 6 through the command line, as users run it."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from support.cli import tvmrt


@pytest.fixture
def no_params_dir(artifacts: Path, tmp_path: Path) -> Path:
    """MobileNet's graph and library without its params file."""
    folder = tmp_path / "mobilenet_no_params"
    folder.mkdir()
    for name in ("deploy_graph.json", "deploy_lib.so"):
        (folder / name).symlink_to(artifacts / "mobilenet_v1" / name)
    return folder


def test_run_without_params_is_refused_unless_allowed(no_params_dir):
    refused = tvmrt("run", no_params_dir, "--fill", "random")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "104 weight input(s) have no value in the params: p0, p1, p2" in refused.stderr
    assert "--allow-missing-params" in refused.stderr
    assert "top-" not in refused.stdout
    allowed = tvmrt("run", no_params_dir, "--allow-missing-params")
    assert allowed.returncode == 0, allowed.stderr
    assert "warning: 104 weight input(s) have no value" in allowed.stderr


def test_inspect_without_params_says_it_cannot_run(no_params_dir):
    report = tvmrt("inspect", no_params_dir)
    assert report.returncode == 1, report.stdout
    assert "cannot run here" in report.stdout
    assert "104 weight input(s) have no value" in report.stdout
    assert "runs here" not in report.stdout


def test_params_of_another_model_are_refused(artifacts):
    folder = artifacts / "mobilenet_v1"
    lenet = artifacts / "lenet-params" / "deploy_param.params"
    args = ["--graph", folder / "deploy_graph.json", "--lib", folder / "deploy_lib.so"]
    refused = tvmrt("run", *args, "--params", lenet)
    assert refused.returncode == 2, refused.stdout
    assert "the params hold 8 tensor(s) the graph has no input for: _param_1" in refused.stderr
    report = tvmrt("inspect", *args, "--params", lenet)
    assert report.returncode == 1
    assert "the params of another model?" in report.stdout


def test_output_names_match_npz_and_conversions_are_reported(artifacts, tmp_path):
    data = np.load(artifacts / "mobilenet_v1" / "golden.npz")["data"].astype("float64")
    np.save(tmp_path / "data.npy", data)
    out = tmp_path / "out.npz"
    done = tvmrt("run", artifacts / "mobilenet_v1", "-i", tmp_path / "data.npy", "-o", out)
    assert done.returncode == 0, done.stderr
    assert "input data: float64 converted to float32" in done.stdout
    shown = re.findall(r"^  (\S+): \(", done.stdout.split("outputs:")[1], re.MULTILINE)
    with np.load(out) as saved:
        assert shown == list(saved.files) == ["fused_nn_softmax_0"]
        golden = np.load(artifacts / "mobilenet_v1" / "golden.npz")["output_0"]
        np.testing.assert_allclose(saved[shown[0]], golden, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("shape", "problem"),
    [
        (
            (2**20, 2**24),
            r"storage plan needs \d+\.\d GiB of host memory, more than this machine's",
        ),
        (
            (2**31, 2**31),
            r"attrs\['shape'\]\[0\]: shape \(2147483648, 2147483648\) of float32 takes",
        ),
    ],
)
def test_inspect_does_not_call_an_absurd_plan_runnable(artifacts, tmp_path, shape, problem):
    from tvmrt.artifact import find_artifact, inspect_artifact
    from tvmrt.testing import GraphBuilder

    b = GraphBuilder()
    x = b.input("data", shape)
    b.output(x)
    (tmp_path / "deploy_graph.json").write_text(b.to_json())
    (tmp_path / "deploy_lib.so").symlink_to(artifacts / "mobilenet_v1" / "deploy_lib.so")
    report = inspect_artifact(find_artifact(tmp_path)).to_dict()
    assert not report["runnable"]
    assert any(re.search(problem, p) for p in report["problems"]), report["problems"]
