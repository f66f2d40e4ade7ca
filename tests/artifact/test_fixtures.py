"""The project's own TVM fixtures (tests/fixtures/, support/fixtures.py): where they come from,
how a missing third-party folder is reported, and that they reproduce the shared reference."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

import support.fixtures as fx
from support.paths import ARTIFACTS


def test_project_folders_come_from_the_builders(artifacts: Path) -> None:
    for name, script in fx.BUILT.items():
        folder = artifacts / name
        assert folder == fx.FIXTURES_DIR / Path(script).stem.removeprefix("build_") / name
        assert folder.is_dir()
        stamp = (folder.parent / ".built").read_text().split()[0]
        assert stamp == hashlib.sha256((fx.BUILDERS / script).read_bytes()).hexdigest()


def test_missing_third_party_folder_skips_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fx, "ARTIFACTS", tmp_path / "none")
    monkeypatch.delenv("TVMRT_REQUIRE_ARTIFACTS", raising=False)
    root = fx.ArtifactRoot(tmp_path / "none")
    with pytest.raises(pytest.skip.Exception, match=r"'mobilenet_v1' .*set TVMRT_ARTIFACTS"):
        _ = root / "mobilenet_v1" / "deploy_lib.so"
    with pytest.raises(pytest.skip.Exception, match=r"'cross' .*ARM cross compilers"):
        root.joinpath("cross/aarch64")
    monkeypatch.setenv("TVMRT_REQUIRE_ARTIFACTS", "1")
    with pytest.raises(pytest.fail.Exception, match=r"'wrn-arm32' .*TVMRT_ARTIFACTS"):
        _ = root / "wrn-arm32"
    (tmp_path / "none" / "aarch64").mkdir(parents=True)
    assert root / "aarch64/deploy_lib.so" == tmp_path / "none" / "aarch64" / "deploy_lib.so"


# files the shared reference says a rebuild reproduces byte for byte (relay016/README.md)
REPRODUCIBLE = ["systemlib-so/deploy.so", "aot-so/deploy.so", "linkparams-so/deploy.so"]
GOLDENS = [
    "systemlib-so", "systemlib-tar", "systemlib-seed-flow", "aot-so", "mlf-graph",
    "tvmc-package", "opencl-factory", "hetero-opencl-cpu", "linkparams-so",
]  # fmt: skip


def test_relay016_build_reproduces_the_shared_reference(artifacts: Path) -> None:
    """Same TVM, seeds and calls as the build that made ../shared/artifacts/relay016."""
    shared = ARTIFACTS / "relay016"
    if not shared.is_dir():
        pytest.skip(f"no reference {shared} to compare with (set TVMRT_ARTIFACTS)")
    ours = artifacts / "relay016"
    for name in REPRODUCIBLE:
        assert (ours / name).read_bytes() == (shared / name).read_bytes(), name
    for folder in GOLDENS:
        for golden in sorted(p.name for p in (shared / folder).glob("*golden.npz")):
            with np.load(ours / folder / golden) as got, np.load(shared / folder / golden) as want:
                assert sorted(got.files) == sorted(want.files)
                for key in want.files:
                    assert np.array_equal(got[key], want[key]), (folder, golden, key)


def test_data_beside_the_artifacts_skips_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TVMRT_REQUIRE_ARTIFACTS", raising=False)
    root = fx.ArtifactRoot(tmp_path / "artifacts")
    with pytest.raises(pytest.skip.Exception, match=r"'rpc' .*TVMRT_ARTIFACTS"):
        _ = root.parent / "rpc" / "session.jsonl"
    (tmp_path / "seeds").mkdir()
    assert root.parent / "seeds" / "a.txt" == tmp_path / "seeds" / "a.txt"
