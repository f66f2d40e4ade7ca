"""Issue 23 item 10: a deeply nested MLF ``metadata.json`` is a tvmrt error naming the file.

The hostile tar is the real relay016 MLF tar with its ``metadata.json`` replaced by JSON
nested 100,000 levels deep (built here). See src/tvmrt/runtime/loaders/packages.py.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from tvmrt import runtime as rt
from tvmrt.artifact import find_artifact, inspect_artifact
from tvmrt.error import ModuleLoadError
from tvmrt.runtime.loaders import packages

DEPTH = 100_000


def _deep_mlf(artifacts: Path, tmp_path: Path) -> Path:
    deep = b"[" * DEPTH + b"]" * DEPTH
    out = tmp_path / "deep_mlf.tar"
    with (
        tarfile.open(artifacts / "relay016" / "mlf-graph" / "model_llvm.tar") as src,
        tarfile.open(out, "w") as dst,
    ):
        for member in src.getmembers():
            data = src.extractfile(member) if member.isreg() else None
            if member.name.lstrip("./") == "metadata.json":
                member.size = len(deep)
                data = io.BytesIO(deep)
            dst.addfile(member, data)
    return out


def test_deep_metadata_is_a_module_load_error(artifacts: Path, tmp_path: Path) -> None:
    path = _deep_mlf(artifacts, tmp_path)
    with pytest.raises(ModuleLoadError, match=r"metadata\.json nests arrays or objects too deeply"):
        rt.load_module(path)


def test_deep_metadata_is_an_inspect_problem(artifacts: Path, tmp_path: Path) -> None:
    report = inspect_artifact(find_artifact(_deep_mlf(artifacts, tmp_path))).to_dict()
    assert not report["runnable"]
    assert any("metadata.json nests" in p for p in report["problems"]), report["problems"]


def test_deep_object_nesting_too() -> None:
    deep = b'{"a":' * DEPTH + b"1" + b"}" * DEPTH
    with pytest.raises(ModuleLoadError, match=r"'x\.tar': its metadata\.json nests"):
        packages.mlf_summary(deep, "x.tar")
