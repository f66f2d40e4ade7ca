"""``tvmrt inspect`` agrees with ``run`` about params that do not fit the graph, and names
one TVM era per library (issue 22, item 8)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from support.cli import tvmrt
from tvmrt.artifact.report import HostReport, InspectionReport, LibraryReport, ParamsReport
from tvmrt.cli.inspect_cmd import _ABI_TEXT, _text
from tvmrt.runtime import load_param_dict_from_file, save_param_dict_to_file
from tvmrt.runtime.loaders.dispatch import FileKind


@pytest.fixture
def misfit(artifacts: Path, tmp_path: Path) -> Path:
    """MobileNet v1 whose params hold p0 in another shape and p1 in another dtype."""
    src = artifacts / "mobilenet_v1"
    for name in ("deploy_graph.json", "deploy_lib.so"):
        (tmp_path / name).symlink_to(src / name)
    params = {
        k: v.numpy() for k, v in load_param_dict_from_file(src / "deploy_param.params").items()
    }
    params["p0"] = params["p0"].reshape(-1)
    params["p1"] = params["p1"].astype("float64")
    save_param_dict_to_file(params, tmp_path / "deploy_param.params")
    return tmp_path


def test_inspect_reports_params_of_another_shape_or_dtype(misfit: Path) -> None:
    out = tvmrt("inspect", misfit)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "cannot run here" in out.stdout
    assert (
        "param 'p0' has shape (864,) and dtype float32, but the graph's input has shape "
        "(4, 1, 3, 3, 3, 8) and dtype float32"
    ) in out.stdout
    assert "param 'p1' has shape (4, 1, 1, 8) and dtype float64" in out.stdout
    assert "runs here" not in out.stdout


def test_run_refuses_what_inspect_reports(misfit: Path) -> None:
    out = tvmrt("run", misfit, "--fill", "zeros")
    assert out.returncode != 0
    assert "param 'p0' has shape (864,)" in out.stderr


@pytest.mark.parametrize(
    ("abi", "form"),
    [("tvm-ffi", "tvm-ffi-so"), ("tvm-ffi-0.21", "tvm-ffi-so"), ("legacy", "legacy-so")],
)
def test_one_tvm_era_per_library(abi: str, form: str) -> None:
    report = InspectionReport(
        files={"lib": "lib.so"},
        form="factory",
        library=LibraryReport(
            form_text=FileKind(form).description, form=FileKind(form), kind="shared", abi=abi
        ),
        graph=None,
        params=ParamsReport(count=0, bytes=0),
        host=HostReport(machine="x86_64", os="linux"),
        problems=[],
        runnable=True,
    )
    text = _text(report)
    eras = re.findall(r"TVM (?:[<>]= ?)?\d+\.\d+(?: or later)?", text)
    assert len(set(eras)) == 1, text
    assert _ABI_TEXT[abi] in text
