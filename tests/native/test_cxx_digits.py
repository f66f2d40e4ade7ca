"""examples/cpp runs from a clone: `make -C examples/cpp run-digits` builds digits.cc
against tvmrt's C runtime and runs it on the digits model the repository ships
(examples/digits/tvm016, TVM 0.16's legacy-ABI build), and `run-digits-ffi` on the
tvm-ffi build `tvmrt compile` made of it (examples/digits/model: graph JSON + deploy.so):
the outputs are the Python runtime's, byte for byte, also from the single-file tvm-ffi
build (standalone.so)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from support.cxx import cxx_env, native_lib_dir, shell
from support.paths import REPO
from tvmrt import runtime
from tvmrt.contrib import graph_executor

DIGITS = REPO / "examples" / "digits"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return cxx_env(native_lib_dir(tmp_path_factory))


@pytest.fixture(scope="module")
def built(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    build = tmp_path_factory.mktemp("cpp-digits")
    out = shell(
        f"make -C {REPO / 'examples' / 'cpp'} run-digits BUILD={build} PYTHON={sys.executable} "
        f"TVMRT_CONFIG='{sys.executable} -m tvmrt.config'",
        env,
        build,
    )
    assert "accuracy: " in out
    return build


def _python_probabilities(lib_path: Path, graph: Path, params: Path) -> np.ndarray:
    lib = runtime.load_module(str(lib_path))
    module = graph_executor.create(graph.read_text(), lib, runtime.cpu())
    module.load_params(params.read_bytes())
    module.run(image=np.load(DIGITS / "model" / "heldout.npz")["image"])
    return module.get_output(0).numpy()


@pytest.mark.parametrize(
    ("build", "files"),
    [
        ("tvm016", ("deploy_lib.so", "deploy_graph.json", "deploy_param.params")),
        ("model", ("deploy.so", "deploy.json", "deploy.params")),  # tvm-ffi, tvmrt compile's
        ("model", ("standalone.so", "deploy.json", "deploy.params")),  # one file, tvm-ffi
    ],
)
def test_digits_program_matches_the_python_runtime(
    env: dict[str, str], built: Path, build: str, files: tuple[str, str, str]
) -> None:
    lib, graph, params = (DIGITS / build / name for name in files)
    probs = built / f"probs-{build}-{lib.stem}.bin"
    out = shell(
        f"{built / 'digits'} {lib} {graph} {params} images.bin labels.bin {probs}", env, built
    )
    expected = _python_probabilities(lib, graph, params)
    assert probs.read_bytes() == expected.astype("<f4").tobytes()
    labels = np.load(DIGITS / "model" / "heldout.npz")["label"]
    right = int((expected.argmax(axis=1) == labels).sum())
    assert f"accuracy: {right}/360 held-out digits" in out
    assert right > 340


def test_the_makefile_runs_the_tvm_ffi_build(env: dict[str, str], built: Path) -> None:
    out = shell(
        f"make -C {REPO / 'examples' / 'cpp'} run-digits-ffi BUILD={built} "
        f"PYTHON={sys.executable} TVMRT_CONFIG='{sys.executable} -m tvmrt.config'",
        env,
        built,
    )
    assert "accuracy: 349/360 held-out digits" in out
