"""System-module deployment (TVM's "Deploy as System Module"): a system-lib build's lib0.o and
module blob linked with libtvmrt_runtime.a into one executable (examples/cpp/system_module.cc
through examples/cpp/Makefile), which runs with no .so beside it and computes the relay016
goldens bitwise: TVM 0.16's own exports (blob as devc.o, and as devc.c) and tvmrt's
re-export with export_library(path, fcompile=False)."""

from __future__ import annotations

import shutil
import subprocess
import tarfile

import numpy as np
import pytest

import tvmrt
from support.cxx import cxx_env, native_lib_dir, shell
from support.paths import REPO

EXAMPLES = REPO / "examples" / "cpp"
CASES = [
    ("systemlib-tar", "deploy.tar"),  # lib0.o + devc.o (blob packed by LLVM)
    ("systemlib-seed-flow", "deploy.tar"),  # export_library(fcompile=False) in TVM 0.16
    ("systemlib-seed-flow", "deploy_devc_c.tar"),  # lib0.o + devc.c (TVM's C packer)
    ("systemlib-tar", "tvmrt-reexport"),  # tvmrt's export_library(fcompile=False) of the above
]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return cxx_env(native_lib_dir(tmp_path_factory))


def _model_tar(artifacts, folder, name, tmp_path):
    source = artifacts / "relay016" / folder
    if name != "tvmrt-reexport":
        return source / name
    copy = tmp_path / "copy.tar"  # loading a tar links a .so beside it: use a copy
    shutil.copy(source / "deploy.tar", copy)
    out = tmp_path / "reexport.tar"
    tvmrt.runtime.load_module(str(copy)).export_library(str(out), fcompile=False)
    with tarfile.open(out) as archive:
        assert archive.getnames() == ["lib0.o", "devc.c"]
    return out


@pytest.mark.slow
@pytest.mark.parametrize(("folder", "name"), CASES)
def test_static_system_module_app_matches_golden(env, artifacts, tmp_path, folder, name):
    model = _model_tar(artifacts, folder, name, tmp_path)
    golden = np.load(artifacts / "relay016" / folder / "golden.npz")
    build = tmp_path / "build"
    shell(
        f"make -s -C {EXAMPLES} system_module BUILD={build} MODEL={model} "
        'TVMRT_CONFIG="$TVMRT_PYTHON -m tvmrt.config"',
        env,
        tmp_path,
    )
    app = build / "system_module"
    needed = subprocess.run(["ldd", str(app)], capture_output=True, text=True).stdout
    assert "tvmrt" not in needed
    assert "python" not in needed.lower()
    run_dir = tmp_path / "run"  # nothing but the input: no .so, no graph, no params
    run_dir.mkdir()
    golden["data"].astype("<f4").tofile(run_dir / "in.bin")
    out = shell(f"{app} data in.bin out.bin", env, run_dir)
    assert out == "output 0: float32 40 bytes\n"
    assert (run_dir / "out.bin").read_bytes() == golden["output_0"].astype("<f4").tobytes()


def test_system_module_app_names_a_bad_input(env, artifacts, tmp_path):
    model = artifacts / "relay016" / "systemlib-tar" / "deploy.tar"
    build = tmp_path / "build"
    shell(
        f"make -s -C {EXAMPLES} system_module BUILD={build} MODEL={model} "
        'TVMRT_CONFIG="$TVMRT_PYTHON -m tvmrt.config"',
        env,
        tmp_path,
    )
    (tmp_path / "short.bin").write_bytes(b"\0" * 12)
    out = shell(
        f"{build / 'system_module'} data short.bin o.bin 2>&1 || echo exit=$?", env, tmp_path
    )
    assert "short.bin has 12 bytes, input data needs 3072" in out
    assert "exit=1" in out
    out = shell(
        f"{build / 'system_module'} nope short.bin o.bin 2>&1 || echo exit=$?", env, tmp_path
    )
    assert "exit=1" in out
    assert "nope" in out
