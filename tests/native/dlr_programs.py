"""Shared by the tests of DLR's C API (test_dlr_c.py, test_dlr_c_misuse.py): the Neo
folders (tests/dlr/build_neo_fixtures.py, TVM 0.16), examples/cpp's DLR program built by its
Makefile against a libdlr.so build, and a run of it on a copy of the CPU folder."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tests.native.conftest import INCLUDE, NativeBuild

from support.built import built
from support.paths import REPO

__all__ = ["neo_folder", "neo_root", "program", "program_for", "run_program"]

NEO_SCRIPT = REPO / "tests" / "dlr" / "build_neo_fixtures.py"


@pytest.fixture(scope="module")
def neo_root() -> Path:
    return built(NEO_SCRIPT, "dlr")


def program_for(native: NativeBuild, out: Path) -> Path:
    """examples/cpp's dlr_model, built by its Makefile against this build's libdlr.so."""
    exe = out / "dlr_model"
    if not exe.exists():
        env = dict(native.env)
        env["TVMRT_LIBDIR"] = str(native.lib_dir)
        env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
        cflags = f"-std=c11 -Wall -Wextra -Werror {native.flags}"
        proc = subprocess.run(
            [
                "make",
                "-s",
                "-C",
                str(REPO / "examples" / "cpp"),
                "dlr_model",
                f"BUILD={out}",
                f"CFLAGS={cflags}",
                f"TVMRT_CONFIG={sys.executable} -m tvmrt.config",
            ],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return exe


def check_program(native: NativeBuild, native_root: Path, name: str) -> Path:
    """tests/native/c/<name>.c (a DLR API check program) linked with this build's libdlr.so."""
    exe = native_root / f"{name}-{native.variant}"
    cmd = ["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", *native.flags.split(), f"-I{INCLUDE}"]
    cmd += [str(REPO / "tests" / "native" / "c" / f"{name}.c"), "-o", str(exe)]
    cmd += [f"-L{native.lib_dir}", "-ldlr", f"-Wl,-rpath,{native.lib_dir}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return exe


@pytest.fixture
def program(native: NativeBuild, native_root: Path) -> Path:
    out = native_root / f"dlr-example-{native.variant}"
    out.mkdir(exist_ok=True)
    return program_for(native, out)


def neo_folder(neo_root: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "neo-cpu"
    shutil.copytree(neo_root / "neo-cpu", folder)
    golden = np.load(neo_root / "neo-cpu.npz")
    golden["data"].tofile(tmp_path / "data.bin")
    golden["mask"].tofile(tmp_path / "mask.bin")
    return folder


def run_program(
    native: NativeBuild, program: Path, folder: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    tmp = folder.parent
    return native.run(
        program, folder, tmp, *extra, f"data={tmp / 'data.bin'}", f"mask={tmp / 'mask.bin'}"
    )
