"""examples/cpp runs from a clone: `make -C examples/cpp run-digits` builds digits.cc
against tvmrt's C runtime and runs it on the digits model the repository ships
(examples/digits/tvm016, TVM 0.16's legacy-ABI build): the outputs are the Python
runtime's, byte for byte. The tvm-ffi builds of the same model (examples/digits/model)
are refused by name, not failed on their first kernel."""

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


def _python_probabilities() -> np.ndarray:
    legacy = DIGITS / "tvm016"
    lib = runtime.load_module(str(legacy / "deploy_lib.so"))
    module = graph_executor.create((legacy / "deploy_graph.json").read_text(), lib, runtime.cpu())
    module.load_params((legacy / "deploy_param.params").read_bytes())
    module.run(image=np.load(DIGITS / "model" / "heldout.npz")["image"])
    return module.get_output(0).numpy()


def test_digits_program_matches_the_python_runtime(env: dict[str, str], built: Path) -> None:
    legacy = DIGITS / "tvm016"
    probs = built / "probs.bin"
    out = shell(
        f"{built / 'digits'} {legacy / 'deploy_lib.so'} {legacy / 'deploy_graph.json'} "
        f"{legacy / 'deploy_param.params'} images.bin labels.bin {probs}",
        env,
        built,
    )
    expected = _python_probabilities()
    assert probs.read_bytes() == expected.astype("<f4").tobytes()
    labels = np.load(DIGITS / "model" / "heldout.npz")["label"]
    right = int((expected.argmax(axis=1) == labels).sum())
    assert f"accuracy: {right}/360 held-out digits" in out
    assert right > 340


@pytest.mark.parametrize(
    ("lib", "message"),
    [
        ("deploy.so", "exports fused_matmul_add_relu as __tvm_ffi_fused_matmul_add_relu"),
        ("standalone.so", "it defines __tvm_ffi__library_bin"),
    ],
)
def test_a_tvm_ffi_build_is_refused_by_name(
    env: dict[str, str], built: Path, lib: str, message: str
) -> None:
    model = DIGITS / "model"
    out = shell(
        f"{built / 'digits'} {model / lib} {model / 'deploy.json'} {model / 'deploy.params'} "
        "images.bin labels.bin 2>&1 || echo exit=$?",
        env,
        built,
    )
    assert "exit=1" in out
    assert "ModuleLoadError" in out
    assert "tvm-ffi" in out
    assert message in out
    assert "runs libraries of TVM 0.20 and earlier" in out
