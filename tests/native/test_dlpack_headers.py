"""tvmrt's public headers live beside another project's DLPack header in one program.

tvmrt's tvm/runtime/c_runtime_api.h includes its own dlpack/dlpack.h. Both carry upstream's
include guards (DLPACK_DLPACK_H_, TVM_RUNTIME_C_RUNTIME_API_H_) and DLPack v1.x's types, so
a C or C++ file that also includes tvm-ffi's dlpack/dlpack.h (PyTorch ships the same header)
compiles whichever comes first, and the managed-tensor and version structs are there.
"""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest
from tests.native.conftest import INCLUDE, _need

OURS = '#include "tvm/runtime/c_runtime_api.h"\n#include "tvm/runtime/c_backend_api.h"\n'

# uses what each side declares: tvmrt's API and DLPack v1.x's structs
BODY = """
int use(DLManagedTensorVersioned* t, DLManagedTensor* old, TVMValue* v) {
  DLPackVersion version = t->version;
  DLTensor* tensor = &t->dl_tensor;
  int code = kTVMDLTensorHandle;
  v->v_handle = tensor;
  old->dl_tensor = *tensor;
  if (tensor->device.device_type != kDLCPU) return -1;
  return (int)version.major + code + (int)(t->flags & DLPACK_FLAG_BITMASK_READ_ONLY) +
         (int)sizeof(TVMParallelGroupEnv);
}
"""


def tvm_ffi_include() -> Path:
    spec = importlib.util.find_spec("tvm_ffi")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("tvm-ffi (the `compile` extra) is not installed")
    for root in spec.submodule_search_locations:
        include = Path(root) / "include"
        if (include / "dlpack" / "dlpack.h").is_file():
            return include
    pytest.skip("tvm-ffi ships no dlpack/dlpack.h")


@pytest.mark.parametrize("ours_first", [True, False], ids=["tvmrt-first", "tvm-ffi-first"])
@pytest.mark.parametrize("lang", ["c", "c++"])
def test_compiles_with_tvm_ffi_dlpack(lang: str, ours_first: bool, tmp_path: Path) -> None:
    other = tvm_ffi_include()
    compiler = _need("cc" if lang == "c" else "c++")
    std = "-std=c11" if lang == "c" else "-std=c++17"
    theirs = f'#include "{other / "dlpack" / "dlpack.h"}"\n'  # by path: not ours by mistake
    text = (OURS + theirs if ours_first else theirs + OURS) + BODY
    source = tmp_path / ("unit.c" if lang == "c" else "unit.cc")
    source.write_text(text, encoding="utf-8")
    flags = [std, "-Wall", "-Wextra", "-Werror", f"-I{INCLUDE}"]
    result = subprocess.run(
        [compiler, *flags, "-c", str(source), "-o", str(tmp_path / "unit.o")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
