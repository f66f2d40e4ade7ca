"""What libtvmrt_runtime.so is made of: system libraries only (no libpython), TVM's C API
exported under TVM's names, and nothing else exported but tvmrt_-prefixed helpers."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from tests.native.conftest import NativeBuild

# the C API the issue asks for (TVM's names), and the kernel services
API = [
    "TVMGetLastError",
    "TVMAPISetLastError",
    "TVMModLoadFromFile",
    "TVMModGetFunction",
    "TVMModImport",
    "TVMModFree",
    "TVMFuncGetGlobal",
    "TVMFuncCall",
    "TVMFuncFree",
    "TVMFuncRegisterGlobal",
    "TVMFuncCreateFromCFunc",
    "TVMCFuncSetReturn",
    "TVMFuncListGlobalNames",
    "TVMFuncRemoveGlobal",
    "TVMArrayAlloc",
    "TVMArrayFree",
    "TVMArrayCopyFromBytes",
    "TVMArrayCopyToBytes",
    "TVMArrayCopyFromTo",
    "TVMSynchronize",
    "TVMStreamCreate",
    "TVMStreamFree",
    "TVMSetStream",
    "TVMStreamStreamSynchronize",
    "TVMObjectRetain",
    "TVMObjectFree",
    "TVMBackendAllocWorkspace",
    "TVMBackendFreeWorkspace",
    "TVMBackendParallelLaunch",
    "TVMBackendParallelBarrier",
    "TVMBackendGetFuncFromEnv",
    "TVMBackendRegisterSystemLibSymbol",
]
ALLOWED_NEEDED = re.compile(r"lib(c|dl|pthread|m)\.so\.\d+|ld-linux.*")


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} (binutils) is not installed")
    return path


def test_depends_on_system_libraries_only(native: NativeBuild) -> None:
    lib = native.lib_dir / "libtvmrt_runtime.so"
    out = subprocess.run(
        [_tool("readelf"), "-d", str(lib)], capture_output=True, text=True, check=True
    ).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
    if native.variant == "asan":  # the sanitizer runtimes come with the instrumented build
        needed = [n for n in needed if not n.startswith(("libasan", "libubsan"))]
    assert needed, out
    assert all(ALLOWED_NEEDED.fullmatch(n) for n in needed), needed
    assert "python" not in out.lower()


def test_exports_tvm_c_api(native: NativeBuild) -> None:
    lib = native.lib_dir / "libtvmrt_runtime.so"
    out = subprocess.run(
        [_tool("nm"), "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True
    ).stdout
    exported = {line.split()[-1] for line in out.splitlines() if line.split()[-2:-1] == ["T"]}
    assert not set(API) - exported
    assert all(n.startswith(("TVM", "tvmrt_")) for n in exported), sorted(exported)
