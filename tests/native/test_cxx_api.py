"""The C++ layer beyond the guide program (tests/native/cxx/api_check.cc, run against the
real runtime): TVM_REGISTER_GLOBAL and Registry::Get, PackedFunc from a lambda, TVMRetValue
conversions, NDArray, a factory's lib["default"](dev), errors as tvm::runtime::Error; and the
static system-module app, both built with AddressSanitizer + UndefinedBehaviorSanitizer
(runtime and program) and run clean. The headers compile warning-free under -Wall -Wextra
-Wpedantic -Wshadow -Wconversion -Werror."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from support.cxx import SANITIZE, cxx_env, native_lib_dir, shell
from support.paths import REPO

CHECK = Path(__file__).parent / "cxx" / "api_check.cc"


@pytest.mark.parametrize("variant", ["plain", "asan"])
def test_api_check(tmp_path_factory, artifacts, tmp_path, variant):
    env = cxx_env(native_lib_dir(tmp_path_factory, variant))
    flags = SANITIZE if variant == "asan" else ""
    shell(
        f"g++ -std=c++17 -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Werror {flags} {CHECK} "
        "$(tvmrt config --cflags --libs) -o api_check",
        env,
        tmp_path,
    )
    lib = tmp_path / "deploy.so"
    shutil.copy(artifacts / "relay016" / "linkparams-so" / "deploy.so", lib)
    out = shell(f"./api_check {lib} 2>&1", env, tmp_path)
    assert out == "inputs=1 outputs=1\nok\n"


@pytest.mark.slow
def test_system_module_app_under_sanitizers(tmp_path_factory, artifacts, tmp_path):
    env = cxx_env(native_lib_dir(tmp_path_factory, "asan"))
    model = artifacts / "relay016" / "systemlib-tar" / "deploy.tar"
    golden = np.load(model.parent / "golden.npz")
    build = tmp_path / "build"
    shell(
        f"make -s -C {REPO / 'examples' / 'cpp'} system_module BUILD={build} MODEL={model} "
        f'CXXFLAGS="-std=c++17 -O1 -g {SANITIZE}" '
        'TVMRT_CONFIG="$TVMRT_PYTHON -m tvmrt.config"',
        env,
        tmp_path,
    )
    golden["data"].astype("<f4").tofile(tmp_path / "in.bin")
    out = shell(f"{build / 'system_module'} data in.bin out.bin 2>&1", env, tmp_path)
    assert out == "output 0: float32 40 bytes\n"
    assert (tmp_path / "out.bin").read_bytes() == golden["output_0"].astype("<f4").tobytes()
