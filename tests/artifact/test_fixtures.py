"""The project's own TVM fixtures (tests/fixtures/, support/fixtures.py): where they come from,
how a missing third-party folder is reported, and that they reproduce the shared reference."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

import support.fixtures as fx
from support.paths import ARTIFACTS


def test_project_folders_come_from_the_builders(artifacts: Path) -> None:
    for name, script in fx.BUILT.items():
        if fx.missing_tools(name):
            continue  # its own tests skip, naming the packages
        folder = artifacts / name
        assert folder == fx.FIXTURES_DIR / Path(script).stem.removeprefix("build_") / name
        assert folder.is_dir()
        stamp = (folder.parent / ".built").read_text().split()[0]
        assert stamp == fx.cache_key(script)
    sources = (fx.BUILDERS / "build_cross.py").read_bytes() + (
        fx.REPO / "tests/arm/build_fixtures.py"
    ).read_bytes()
    assert fx.cache_key("build_cross.py") == hashlib.sha256(sources).hexdigest()


def test_missing_third_party_folder_skips_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fx, "ARTIFACTS", tmp_path / "none")
    monkeypatch.delenv("TVMRT_REQUIRE_ARTIFACTS", raising=False)
    root = fx.ArtifactRoot(tmp_path / "none")
    with pytest.raises(pytest.skip.Exception, match=r"'mobilenet_v1' .*set TVMRT_ARTIFACTS"):
        _ = root / "mobilenet_v1" / "deploy_lib.so"
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
    """Same TVM, seeds and calls as the build that made the reference copy of relay016 ($TVMRT_ARTIFACTS)."""
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


def test_missing_cross_compilers_skip_naming_the_debian_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "PATH", str(tmp_path)
    )  # no aarch64-linux-gnu-gcc, no arm-linux-gnueabihf-gcc
    monkeypatch.setenv("TVMRT_REQUIRE_ARTIFACTS", "1")  # a machine's tools, not missing data
    root = fx.ArtifactRoot(tmp_path / "none")
    packages = r"gcc-aarch64-linux-gnu gcc-arm-linux-gnueabihf"
    with pytest.raises(
        pytest.skip.Exception, match=rf"'cross' needs aarch64-linux-gnu-gcc, .*{packages}"
    ):
        _ = root / "cross" / "aarch64" / "deploy.so"
    (tmp_path / "aarch64-linux-gnu-gcc").touch(mode=0o755)
    with pytest.raises(pytest.skip.Exception, match=r"needs arm-linux-gnueabihf-gcc, not found"):
        _ = root / "cross" / "armv7hf"


def _cnn_reference(params: dict[str, np.ndarray], data: np.ndarray) -> np.ndarray:
    """The cross CNN in float64 numpy from its built params (TVM's packed layouts undone)."""
    conv_w = params["p0"][..., 0].astype(np.float64)  # OIHW + a packing axis of 1
    conv_b = params["p1"].reshape(8)
    dense_w = params["p2"].transpose(0, 2, 1).reshape(10, 2048)  # dense_pack: (N/5, K, 5)
    dense_b = params["p3"].reshape(10)
    padded = np.pad(data[0].astype(np.float64), ((0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(1, 2))
    x = np.einsum("chwij,ocij->ohw", windows, conv_w) + conv_b[:, None, None]
    x = np.maximum(x, 0).reshape(8, 16, 2, 16, 2).max(axis=(2, 4)).reshape(-1)
    logits = dense_w @ x + dense_b
    e = np.exp(logits - logits.max())
    return (e / e.sum())[None, :]


@pytest.mark.parametrize("arch", ["aarch64", "armv7hf"])
def test_cross_build_matches_numpy_and_the_shared_reference(artifacts: Path, arch: str) -> None:
    """The project's ARM builds: TVM's x86 golden agrees with numpy on their own params (the
    README's tolerance), and the graph is the shared reference's (same model, other weights)."""
    from tvmrt.runtime.params import load_param_dict_from_file

    ours = artifacts / "cross" / arch
    copies = [ours] + ([ARTIFACTS / "cross" / arch] if (ARTIFACTS / "cross").is_dir() else [])
    for folder in copies:
        params = {
            k: v.numpy()
            for k, v in load_param_dict_from_file(folder / "deploy_param.params").items()
        }
        with (
            np.load(folder / "inputs.npz") as inputs,
            np.load(folder / "golden_x86_tvm016.npz") as golden,
        ):
            assert golden["output_0"].shape == (1, 10)
            want = _cnn_reference(params, inputs["data"])
            np.testing.assert_allclose(golden["output_0"], want, rtol=1e-5, atol=1e-6)
    if len(copies) == 1:
        return  # no reference copy in $TVMRT_ARTIFACTS: the numpy check above is the whole test
    shared = copies[1]
    assert sorted(p.name for p in ours.iterdir()) == sorted(p.name for p in shared.iterdir())
    graph = json.loads((ours / "deploy_graph.json").read_text())
    assert graph == json.loads((shared / "deploy_graph.json").read_text())
    for name in ["deploy.so", "deploy_lib.so"]:
        assert (ours / name).read_bytes()[:20] == (shared / name).read_bytes()[:20], (
            name
        )  # ELF class, machine


def test_data_beside_the_artifacts_skips_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TVMRT_REQUIRE_ARTIFACTS", raising=False)
    root = fx.ArtifactRoot(tmp_path / "artifacts")
    with pytest.raises(pytest.skip.Exception, match=r"'rpc' .*TVMRT_ARTIFACTS"):
        _ = root.parent / "rpc" / "session.jsonl"
    (tmp_path / "seeds").mkdir()
    assert root.parent / "seeds" / "a.txt" == tmp_path / "seeds" / "a.txt"
