"""`tvmrt config` / `python -m tvmrt.config`, the pkg-config file and the CMake package, in
the layout the wheel installs (tvmrt/include, tvmrt/lib with the libraries, lib/pkgconfig,
lib/cmake/tvmrt)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

import tvmrt
from support.cxx import cxx_env, native_lib_dir, shell
from support.paths import REPO
from tvmrt import config

PACKAGE = REPO / "src" / "tvmrt"
EXAMPLES = REPO / "examples" / "cpp"


@pytest.fixture(scope="module")
def lib_dir(tmp_path_factory):
    return native_lib_dir(tmp_path_factory)


def _config(*args, env):
    return subprocess.run(
        [sys.executable, "-m", "tvmrt.config", *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_flags_and_folders(lib_dir):
    env = cxx_env(lib_dir)
    done = _config("--cflags", "--libs", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        f"-I{PACKAGE / 'include'}",
        f"-L{lib_dir}",
        f"-Wl,-rpath,{lib_dir}",
        "-ltvmrt_runtime",
        "-ldl",
        "-lpthread",
        "-lm",
    ]
    static = _config("--libs", "--static", env=env).stdout.split()
    assert static == [str(lib_dir / "libtvmrt_runtime.a"), "-ldl", "-lpthread", "-lm"]
    folders = _config("--includedir", "--libdir", "--cmakedir", "--pkgconfigdir", env=env)
    include, lib, pkgconfig, cmake = folders.stdout.split()  # in a fixed order
    assert (include + "/tvm/runtime/module.h", lib) == (
        str(PACKAGE / "include" / "tvm" / "runtime" / "module.h"),
        str(lib_dir),
    )
    assert (PACKAGE / "include" / "dlpack" / "dlpack.h").is_file()
    assert (cmake, pkgconfig) == (str(config.cmake_dir()), str(config.pkgconfig_dir()))
    # the tvmrt verb prints the same line
    assert shell("tvmrt config --cflags --libs", env, lib_dir) == done.stdout


def test_missing_library_and_no_option_exit_2(tmp_path):
    env = cxx_env(tmp_path)  # an empty folder: no library there
    done = _config("--libs", env=env)
    assert done.returncode == 2
    assert "libtvmrt_runtime.so/.a not found" in done.stderr
    assert "make native" in done.stderr
    assert _config(env=env).returncode == 2
    verb = subprocess.run(
        [sys.executable, "-m", "tvmrt", "config"], env=env, capture_output=True, text=True
    )
    assert verb.returncode == 2
    assert "give at least one of --cflags" in verb.stderr


def test_pkgconfig_and_cmake_versions_are_the_package_version():
    pc = (config.pkgconfig_dir() / "tvmrt.pc").read_text()
    assert f"Version: {tvmrt.__version__}\n" in pc
    cmake = (config.cmake_dir() / "tvmrtConfigVersion.cmake").read_text()
    assert f'set(PACKAGE_VERSION "{tvmrt.__version__}")' in cmake


@pytest.fixture(scope="module")
def wheel_layout(lib_dir, tmp_path_factory):
    """tvmrt's package data as the wheel installs it, with the built libraries in lib/."""
    root = tmp_path_factory.mktemp("site") / "tvmrt"
    shutil.copytree(PACKAGE / "include", root / "include")
    shutil.copytree(PACKAGE / "lib", root / "lib")
    for name in ("libtvmrt_runtime.so", "libtvmrt_runtime.a"):
        shutil.copy(lib_dir / name, root / "lib" / name)
    return root


@pytest.mark.skipif(shutil.which("pkg-config") is None, reason="pkg-config is not installed")
def test_pkg_config_builds_the_guide_program(wheel_layout, lib_dir, tmp_path):
    env = cxx_env(lib_dir)
    env["PKG_CONFIG_PATH"] = str(wheel_layout / "lib" / "pkgconfig")
    flags = shell("pkg-config --cflags --libs tvmrt", env, tmp_path).split()
    libdir = wheel_layout / "lib"
    assert f"-I{wheel_layout / 'include'}" in [f.replace("/lib/pkgconfig/../..", "") for f in flags]
    shell(
        f"g++ -std=c++17 {EXAMPLES / 'guide.cc'} $(pkg-config --cflags --libs tvmrt) -o g",
        env,
        tmp_path,
    )
    needed = shell(f"ldd {tmp_path / 'g'}", env, tmp_path)
    resolved = [line for line in needed.splitlines() if "libtvmrt_runtime.so" in line]
    assert len(resolved) == 1
    assert str(libdir.resolve()) in str(
        (tmp_path / resolved[0].split("=>")[1].split("(")[0].strip()).resolve()
    )


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")
@pytest.mark.slow
def test_cmake_find_package_builds_both_examples(wheel_layout, lib_dir, artifacts, tmp_path):
    env = cxx_env(lib_dir)
    model = artifacts / "relay016" / "systemlib-tar" / "deploy.tar"
    build = tmp_path / "build"
    shell(
        f"cmake -S {EXAMPLES} -B {build} -Dtvmrt_DIR={wheel_layout / 'lib' / 'cmake' / 'tvmrt'} "
        f"-DMODEL={model} > /dev/null && cmake --build {build} > /dev/null",
        env,
        tmp_path,
    )
    assert (build / "guide").is_file()
    assert (build / "relay_vm").is_file()
    assert (build / "graph_model").is_file()
    assert (build / "aot_model").is_file()
    assert (build / "relax_model").is_file()
    golden = np.load(model.parent / "golden.npz")
    golden["data"].astype("<f4").tofile(tmp_path / "in.bin")
    shell(f"{build / 'system_module'} data in.bin out.bin", env, tmp_path)
    assert (tmp_path / "out.bin").read_bytes() == golden["output_0"].astype("<f4").tobytes()
