"""The native library's names are global from ``import tvmrt`` on, as libtvm's after ``import tvm``.

TVM's way to use a system library from Python is ``ctypes.CDLL("mylib.so")`` (its static
constructors call ``TVMBackendRegisterSystemLibSymbol``), then ``runtime.system_lib()``
(TVM 0.19's ``tests/python/runtime/test_runtime_module_load.py``, ``check_system_lib``). Each
case runs in a fresh interpreter, as TVM's test does, since the names a process exports are
decided once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.paths import REPO

# TVM's flow: import, load the library with ctypes, then ask the system library for it
_CTYPES_FLOW = r"""
import ctypes, sys
import numpy as np
import tvmrt.runtime as rt
from tvmrt.contrib import graph_executor
ctypes.CDLL(sys.argv[1])  # registers the kernels and the module blob
lib = rt.system_lib()
gmod = graph_executor.GraphModule(lib["default"](rt.cpu()))
golden = np.load(sys.argv[2])
gmod.set_input("data", golden["data"])
gmod.run()
print(gmod.get_output(0).numpy().tobytes() == golden["output_0"].tobytes())
"""

_GLOBAL_NAMES = r"""
import ctypes
import tvmrt
print(hasattr(ctypes.CDLL(None), "tvmrt_get_num_threads"))
"""


def _child(code: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TVM_NUM_THREADS": "1", **env},
        cwd=REPO,
    )


def test_a_system_library_loaded_with_ctypes_fills_system_lib(artifacts):
    folder = artifacts / "relay016" / "systemlib-so"
    done = _child(_CTYPES_FLOW, str(folder / "deploy.so"), str(folder / "golden.npz"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["True"]  # TVM 0.16's outputs, bitwise


def test_tvmrt_local_symbols_keeps_the_names_local_until_a_load_needs_them(artifacts):
    folder = artifacts / "relay016" / "systemlib-so"
    done = _child(_GLOBAL_NAMES, TVMRT_LOCAL_SYMBOLS="1")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["False"]
    done = _child(_CTYPES_FLOW, str(folder / "deploy.so"), str(folder / "golden.npz"),
                  TVMRT_LOCAL_SYMBOLS="1")  # fmt: skip
    assert done.returncode != 0
    assert "undefined symbol: TVMAPISetLastError" in done.stderr  # the loader's words
    assert _child(_GLOBAL_NAMES).stdout.split() == ["True"]  # the default


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/maps")
def test_a_tvm_runtime_already_loaded_keeps_its_own_names(tmp_path: Path):
    # a stand-in named as TVM's runtime, loaded global before tvmrt: its names must answer
    # for libraries loaded later, so tvmrt does not put its own before them
    source = tmp_path / "stand_in.c"
    source.write_text(
        "int TVMBackendRegisterSystemLibSymbol(const char *n, void *p) { return 0; }\n"
    )
    stand_in = tmp_path / "libtvm_runtime.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(stand_in), str(source)], check=True)
    code = f"import ctypes; ctypes.CDLL({str(stand_in)!r}, ctypes.RTLD_GLOBAL)\n" + _GLOBAL_NAMES
    done = _child(code)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["False"]
