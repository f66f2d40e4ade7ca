"""DLR's C API (dlr.h, libdlr.so): a DLR program, examples/cpp/dlr_model.c, built by
examples/cpp's Makefile with -ldlr, runs a Neo-layout CPU folder (made from TVM 0.16's build
by tests/dlr/build_neo_fixtures.py) plain and under ASan + UBSan; its outputs are TVM's,
byte for byte, and the Python tvmrt.dlr's; it builds as C++, with pkg-config's `dlr` and
with CMake's tvmrt::dlr. DLR's device check keeps its words (Relay VM folders:
test_dlr_c_vm.py); libdlr.so exports DLR's API and TVM's and keeps the wheel's glibc floor."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from tests.native.conftest import INCLUDE, NativeBuild, _build
from tests.native.dlr_programs import neo_folder, neo_root, program, run_program

from support.paths import REPO
from tvmrt import dlr
from tvmrt.dlr.dlr_model import DLRError

__all__ = ["neo_root", "program"]  # fixtures

DEVICE_ERROR = 'Compiled model requires device type "gpu" but user gave "cpu".'


def test_a_dlr_program_runs_a_neo_folder_bitwise(
    native: NativeBuild, program: Path, neo_root: Path, tmp_path: Path
) -> None:
    folder = neo_folder(neo_root, tmp_path)
    (folder / "libdlr.so").write_bytes(b"DLR's own library: never loaded")
    proc = run_program(native, program, folder)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "DLR 1.10.0, backend tvm, metadata yes, 2 inputs, 2 weights, 2 outputs",
        "input 0: data float32 (1, 3, 8, 8)",
        "input 1: mask int32 (1, 10)",
        "output 0: probabilities float32 (1, 10)",
        "output 1: class_id int32 (1)",
    ]
    golden = np.load(neo_root / "neo-cpu.npz")
    python = dlr.DLRModel(str(folder)).run({"data": golden["data"], "mask": golden["mask"]})
    for i in range(2):
        produced = (tmp_path / f"output_{i}.bin").read_bytes()
        assert produced == golden[f"out_{i}"].tobytes()  # TVM 0.16's run
        assert produced == python[i].tobytes()  # tvmrt.dlr's


def test_the_program_builds_as_cxx_too(native_root: Path, neo_root: Path, tmp_path: Path) -> None:
    """DLR's own dlr.h is C++ only; DLR programs were C++: tvmrt's header serves both."""
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    native = _build("plain", native_root)
    exe = tmp_path / "dlr_model_cxx"
    cmd = ["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-x", "c++", f"-I{INCLUDE}"]
    cmd += [str(REPO / "examples" / "cpp" / "dlr_model.c"), "-x", "none", "-o", str(exe)]
    cmd += [f"-L{native.lib_dir}", "-ldlr", f"-Wl,-rpath,{native.lib_dir}"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    folder = neo_folder(neo_root, tmp_path)
    proc = run_program(native, exe, folder)
    assert proc.returncode == 0, proc.stderr
    golden = np.load(neo_root / "neo-cpu.npz")
    assert (tmp_path / "output_0.bin").read_bytes() == golden["out_0"].tobytes()


def test_the_device_check_keeps_dlrs_words(
    native: NativeBuild, program: Path, neo_root: Path, tmp_path: Path
) -> None:
    folder = neo_folder(neo_root, tmp_path)
    meta = json.loads((folder / "compiled.meta").read_text())
    meta["Requirements"]["TargetDeviceType"] = "gpu"
    (folder / "compiled.meta").write_text(json.dumps(meta))
    proc = run_program(native, program, folder)
    assert proc.returncode == 1
    assert proc.stderr == f"CreateDLRModel failed: DLRError: {DEVICE_ERROR}\n"
    with pytest.raises(DLRError, match=re.escape(DEVICE_ERROR)):
        dlr.DLRModel(str(folder))
    asked_gpu = native.run(program, neo_root / "neo-cpu", tmp_path, "2")
    assert asked_gpu.stderr == (
        'CreateDLRModel failed: DLRError: Compiled model requires device type "cpu" but '
        'user gave "gpu".\n'
    )


def test_libdlr_exports_dlrs_api_and_tvms(native: NativeBuild) -> None:
    lib = native.lib_dir / "libdlr.so"
    out = subprocess.run(
        ["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True
    ).stdout
    exported = {line.split()[-1] for line in out.splitlines() if line.split()[-2:-1] == ["T"]}
    text = (INCLUDE / "dlr.h").read_text()
    declared = set(re.findall(r"^DLR_DLL [^(;]*?\b(\w+)\(", text, re.MULTILINE))
    assert len(declared) == 37  # DLR 1.10's dlr.h less CreateDLRModelFromHexagon
    assert declared <= exported
    assert all(n in declared or n.startswith(("TVM", "tvmrt_")) for n in exported)
    elf = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True, check=True)
    assert "Library soname: [libdlr.so]" in elf.stdout


@pytest.mark.skipif(shutil.which("pkg-config") is None, reason="pkg-config is not installed")
def test_pkg_config_dlr_links_a_dlr_program(
    native_root: Path, neo_root: Path, tmp_path: Path
) -> None:
    """The wheel's layout (tvmrt/include, tvmrt/lib with libdlr.so and pkgconfig/dlr.pc):
    `pkg-config --cflags --libs dlr` is all a DLR program needs."""
    native = _build("plain", native_root)
    package = REPO / "src" / "tvmrt"
    root = tmp_path / "site" / "tvmrt"
    shutil.copytree(package / "include", root / "include")
    shutil.copytree(package / "lib" / "pkgconfig", root / "lib" / "pkgconfig")
    shutil.copy(native.lib_dir / "libdlr.so", root / "lib" / "libdlr.so")
    env = dict(native.env, PKG_CONFIG_PATH=str(root / "lib" / "pkgconfig"))
    flags = subprocess.run(
        ["pkg-config", "--cflags", "--libs", "dlr"], env=env, capture_output=True, text=True
    ).stdout.split()
    exe = tmp_path / "dlr_model"
    source = REPO / "examples" / "cpp" / "dlr_model.c"
    subprocess.run(["cc", "-std=c11", str(source), *flags, "-o", str(exe)], env=env, check=True)
    folder = neo_folder(neo_root, tmp_path)
    proc = run_program(native, exe, folder)
    assert proc.returncode == 0, proc.stderr
    golden = np.load(neo_root / "neo-cpu.npz")
    assert (tmp_path / "output_1.bin").read_bytes() == golden["out_1"].tobytes()
    ldd = subprocess.run(["ldd", str(exe)], capture_output=True, text=True, check=True).stdout
    assert str((root / "lib").resolve()) in os.path.realpath(
        ldd.split("libdlr.so => ")[1].split(" (")[0]
    )


def test_libdlr_keeps_the_wheels_glibc_floor(native_root: Path) -> None:
    """No glibc symbol newer than manylinux2014's 2.17 (stat and fstat, GLIBC_2.33 today,
    are not used: the wheel would need glibc 2.33)."""
    lib = _build("plain", native_root).lib_dir / "libdlr.so"
    out = subprocess.run(["objdump", "-T", str(lib)], capture_output=True, text=True, check=True)
    versions = {tuple(map(int, v.split("."))) for v in re.findall(r"GLIBC_(\d+\.\d+)", out.stdout)}
    assert versions, out.stdout[:2000]
    assert max(versions) <= (2, 17), sorted(versions)


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")
def test_cmake_target_tvmrt_dlr_links_a_dlr_program(
    native_root: Path, neo_root: Path, tmp_path: Path
) -> None:
    """find_package(tvmrt) gives tvmrt::dlr (libdlr.so found in the wheel's lib/)."""
    native = _build("plain", native_root)
    package = REPO / "src" / "tvmrt"
    root = tmp_path / "site" / "tvmrt"
    shutil.copytree(package / "include", root / "include")
    shutil.copytree(package / "lib" / "cmake", root / "lib" / "cmake")
    for name in ("libdlr.so", "libtvmrt_runtime.so"):
        shutil.copy(native.lib_dir / name, root / "lib" / name)
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(REPO / "examples" / "cpp" / "dlr_model.c", project / "dlr_model.c")
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.13)\nproject(app C)\nfind_package(tvmrt REQUIRED)\n"
        "add_executable(dlr_model dlr_model.c)\ntarget_link_libraries(dlr_model tvmrt::dlr)\n"
    )
    build = tmp_path / "build"
    for cmd in (
        ["cmake", "-S", str(project), "-B", str(build), f"-Dtvmrt_DIR={root / 'lib/cmake/tvmrt'}"],
        ["cmake", "--build", str(build)],
    ):
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
    folder = neo_folder(neo_root, tmp_path)
    proc = run_program(native, build / "dlr_model", folder)
    assert proc.returncode == 0, proc.stderr
    golden = np.load(neo_root / "neo-cpu.npz")
    assert (tmp_path / "output_0.bin").read_bytes() == golden["out_0"].tobytes()
