"""``tvmrt compile --target cuda``: TVM 0.27 + nvcc make a tvm-ffi era CUDA artifact.

The ONNX model is the CUDA fixtures' CNN (Conv, Relu, Reshape, Gemm, Softmax; written by
scripts/make_cuda_fixtures.py into build/cuda-fixtures). Compiling runs in a subprocess, so
this process never imports TVM. The artifact then runs on ``cuda(0)`` against the recording
libcuda stand-in (tests/support/fake_libcuda.c): its kernels are launched with TVM's grid,
block and arguments, the same launches as the fixture built step by step by the fixture
script (``cnn_ptx.so``). The stand-in never computes: outputs on a GPU are ``make
gpu-check``'s. Skipped without TVM, onnx, nvcc or the fixtures.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from support.cuda_fixtures import CUDA_FIXTURES, cuda_fixtures
from support.fake_cuda import FakeLog, build, stand_in_backend
from support.paths import REPO
from tvmrt import runtime
from tvmrt.artifact import find_artifact, inspect_artifact, load_artifact

FIXTURES = CUDA_FIXTURES
device_table = importlib.import_module("tvmrt.runtime.device")
CUDA = int(runtime.DLDeviceType.kDLCUDA)

if importlib.util.find_spec("tvm") is None or importlib.util.find_spec("onnx") is None:
    pytest.skip("compiling needs the compile extra (apache-tvm, onnx)", allow_module_level=True)
if shutil.which("nvcc") is None:
    pytest.skip("compiling for CUDA needs nvcc (nvidia-cuda-nvcc)", allow_module_level=True)


def compile_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    cmd = [sys.executable, "-m", "tvmrt", "compile", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, check=False)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    model = cuda_fixtures() / "cnn.onnx"
    out = tmp_path_factory.mktemp("cuda-build") / "cnn"
    done = compile_cli(str(model), "-o", str(out), "--target", "cuda")
    assert done.returncode == 0, done.stdout + done.stderr
    assert '"kind": "cuda", "arch": "sm_75"' in done.stdout
    return out


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLog]:
    with stand_in_backend(build(tmp_path), monkeypatch) as log:
        yield log


def launches(fake: FakeLog, path: Path) -> list[str]:
    model = load_artifact(find_artifact(path), runtime.cuda())
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype("float32")
    model.executor.set_input("x", x)
    fake.reset()
    model.executor.run()
    assert model.executor.get_output(0).numpy().shape == (1, 10)
    return [line for line in fake.lines() if line.startswith("cuLaunchKernel")]


def test_compiled_cuda_artifact_is_inspected_as_one(compiled: Path) -> None:
    for path in (compiled, compiled / "standalone.so"):
        report = inspect_artifact(find_artifact(path))
        assert (report.library.abi or "").startswith("tvm-ffi")
        assert report.library.device_code == (
            "CUDA kernels ('cuda' module, 3 kernel(s), ptx: PTX ISA 9.0 for sm_75): run it "
            "with --device cuda"
        )


def test_compiled_cuda_artifact_launches_as_the_fixture(compiled: Path, fake: FakeLog) -> None:
    want = launches(fake, FIXTURES / "cnn_ptx.so")
    assert len(want) == 3
    assert launches(fake, compiled / "standalone.so") == want
    assert launches(fake, compiled) == want  # deploy.json + deploy.so + deploy.params


def test_cuda_target_refusals(tmp_path: Path) -> None:
    model = cuda_fixtures() / "cnn.onnx"
    done = compile_cli(str(model), "-o", str(tmp_path / "a"), "--target", "cuda", "--tune", "1")
    assert done.returncode != 0
    assert "--tune is for CPU targets; a cuda build is not tuned" in done.stderr
    bad = '{"kind": "cuda", "arch": "compute_75"}'
    done = compile_cli(str(model), "-o", str(tmp_path / "b"), "--target", bad)
    assert done.returncode != 0
    assert "CUDA target arch 'compute_75': expected sm_XY, e.g. 'sm_75'" in done.stderr
