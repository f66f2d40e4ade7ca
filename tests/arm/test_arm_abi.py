"""The C ABI on 32-bit and 64-bit machines: struct layouts, packed arguments, params blobs.

tvmrt's ctypes mirrors of ``DLTensor``, ``TVMValue``, ``TVMParallelGroupEnv`` and the DLPack
capsules must have the layout the C compiler gives the headers tvmrt ships, on every ABI:
on armv7hf pointers are 4 bytes, ``TVMValue`` stays 8 and ``int64_t`` fields are 8-aligned
(AAPCS), so a 64-bit-only assumption (pointer = 8 bytes, ``TVMValue`` = pointer) breaks
here. The references are the C compiler's ``offsetof``/``sizeof`` for tvmrt's own headers
(the board's compiler, or ``$CC``: the cross compiler under emulation) and the hand table
of the two data models below. Runs on every machine; ``make test-arm`` runs it on aarch64
and armv7hf under emulation.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tvmrt import runtime
from tvmrt.runtime import _ctypes_api as api
from tvmrt.runtime.loaders.link import include_dir
from tvmrt.testing.kernels_c import KERNEL_PRELUDE

pytestmark = pytest.mark.arm

POINTER = ctypes.sizeof(ctypes.c_void_p)

# (struct, field) -> (offset with 4-byte pointers, offset with 8-byte pointers); "" = sizeof
EXPECTED = {
    ("DLTensor", "data"): (0, 0),
    ("DLTensor", "device"): (4, 8),
    ("DLTensor", "ndim"): (12, 16),
    ("DLTensor", "dtype"): (16, 20),
    ("DLTensor", "shape"): (20, 24),
    ("DLTensor", "strides"): (24, 32),
    ("DLTensor", "byte_offset"): (32, 40),
    ("DLTensor", ""): (40, 48),
    ("TVMValue", ""): (8, 8),
    ("TVMParallelGroupEnv", "num_task"): (4, 8),
    ("TVMParallelGroupEnv", ""): (8, 16),
    ("DLManagedTensor", "manager_ctx"): (40, 48),
    ("DLManagedTensor", "deleter"): (44, 56),
    ("DLManagedTensor", ""): (48, 64),
    ("DLManagedTensorVersioned", "manager_ctx"): (8, 8),
    ("DLManagedTensorVersioned", "deleter"): (12, 16),
    ("DLManagedTensorVersioned", "flags"): (16, 24),
    ("DLManagedTensorVersioned", "dl_tensor"): (24, 32),
    ("DLManagedTensorVersioned", ""): (64, 80),
}

LAYOUT_C = r"""
#include <stddef.h>
#include <stdio.h>
#include <dlpack/dlpack.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/c_backend_api.h>
/* DLManagedTensor and DLManagedTensorVersioned: dlpack.h (v1.x) as tvmrt ships it */
#define F(s, f) printf("%s %s %u\n", #s, #f, (unsigned)offsetof(s, f))
#define S(s) printf("%s - %u\n", #s, (unsigned)sizeof(s))
int main(void) {
  F(DLTensor, data); F(DLTensor, device); F(DLTensor, ndim); F(DLTensor, dtype);
  F(DLTensor, shape); F(DLTensor, strides); F(DLTensor, byte_offset); S(DLTensor);
  S(TVMValue); F(TVMParallelGroupEnv, num_task); S(TVMParallelGroupEnv);
  F(DLManagedTensor, manager_ctx); F(DLManagedTensor, deleter); S(DLManagedTensor);
  F(DLManagedTensorVersioned, manager_ctx); F(DLManagedTensorVersioned, deleter);
  F(DLManagedTensorVersioned, flags); F(DLManagedTensorVersioned, dl_tensor);
  S(DLManagedTensorVersioned);
  return 0;
}
"""

# echo(x int64, y float64, h handle, out int64[8]): what the callee saw, in an int64 tensor
ECHO_C = r"""
#include <string.h>
int echo(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* res) {
  DLTensor* out = TENSOR(3);
  int64_t* o = (int64_t*)out->data;
  double y = args[1].v_float64;
  DLTensor* h = TENSOR(2);
  o[0] = n;
  o[1] = args[0].v_int64;
  memcpy(&o[2], &y, sizeof y);
  o[3] = codes[0] * 1000000 + codes[1] * 10000 + codes[2] * 100 + codes[3];
  o[4] = h->ndim;
  o[5] = h->shape[0] * 1000 + h->shape[1];
  o[6] = (int64_t)(h->byte_offset + 1000 * h->bits + 100000 * h->device_type);
  o[7] = (int64_t)sizeof(void*);
  return 0;
}
"""


def _compiler() -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the layout probe (set $CC)")
    return cc


def _c_layout(tmp_path: Path) -> dict[tuple[str, str], int]:
    src = tmp_path / "layout.c"
    exe = tmp_path / "layout"
    src.write_text(LAYOUT_C)
    cmd = [*_compiler().split(), f"-I{include_dir()}", "-o", str(exe), str(src)]
    subprocess.run(cmd, check=True, capture_output=True)
    lines = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    layout = {}
    for line in lines.splitlines():
        struct, field, value = line.split()
        layout[(struct, "" if field == "-" else field)] = int(value)
    return layout


def _ctypes_layout() -> dict[tuple[str, str], int]:
    layout = {}
    for struct, field in EXPECTED:
        cls = getattr(api, struct)
        layout[(struct, field)] = ctypes.sizeof(cls) if field == "" else getattr(cls, field).offset
    return layout


def test_ctypes_layouts_follow_this_data_model():
    column = 0 if POINTER == 4 else 1
    assert _ctypes_layout() == {key: value[column] for key, value in EXPECTED.items()}


def test_ctypes_layouts_match_the_c_compiler(tmp_path):
    assert _ctypes_layout() == _c_layout(tmp_path)


def test_packed_arguments_reach_a_kernel_intact(tmp_path):
    """int64 beyond 32 bits, a double, a strided DLTensor handle: each in its own 8-byte slot."""
    src = tmp_path / "echo.c"
    lib = tmp_path / "echo.so"
    src.write_text(KERNEL_PRELUDE + ECHO_C)
    cmd = [*_compiler().split(), "-shared", "-fPIC", "-O1", "-o", str(lib), str(src)]
    subprocess.run(cmd, check=True, capture_output=True)
    module = runtime.load_module(str(lib))
    big = (1 << 40) + 12345  # loses its high word if packed into a 4-byte slot
    h = runtime.array(np.zeros((3, 7), dtype="float32"))
    out = runtime.array(np.zeros(8, dtype="int64"))
    module["echo"](big, -2.75, h, out)
    o = out.numpy()
    assert o[0] == 4
    assert o[1] == big
    assert o[2:3].view("float64")[0] == -2.75
    assert o[3] == 0 * 1000000 + 2 * 10000 + 7 * 100 + 7  # kDLInt, kDLFloat, DLTensor x2
    assert o[4] == 2
    assert o[5] == 3007
    assert o[6] == 32 * 1000 + 1 * 100000  # byte_offset 0, float32, kDLCPU
    assert o[7] == POINTER


def test_params_blob_round_trips_bytewise(artifacts):
    """TVM's x86-written params (uint64 counts and sizes) load and save to the same bytes."""
    for arch in ("aarch64", "armv7hf"):
        blob = (artifacts / "cross" / arch / "deploy_param.params").read_bytes()
        params = runtime.load_param_dict(blob)
        assert sorted(params) == ["p0", "p1", "p2", "p3"]
        assert bytes(runtime.save_param_dict(params)) == blob
