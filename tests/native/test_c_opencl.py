"""The C runtime on kDLOpenCL (runtime/opencl.c, runtime/opencl_module.c) on pocl.

TVM 0.16's OpenCL factories (a CNN; a dense model with two outputs) and its CPU+OpenCL graph
(``device_index`` per entry, ``__copy`` nodes between the devices) run through
tests/native/c/run_model.c, plain and under ASan + UBSan, against the goldens TVM computed
(relay016/README.md: tolerance 1e-5). The C API's arrays, copies at a byte offset, workspace
and kernel arguments are driven through ctypes; the refusals without a driver, without a
device and with a CPU graph given no CPU are checked in their words.

The programs open the system's ICD loader, ``libOpenCL.so.1``, as tvmrt does from Python
(``tests/support/opencl.py`` says why the tests skip where it runs no kernel).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from tests.native.conftest import NativeBuild

from support.fixtures import artifact_folder, built_fixtures
from support.opencl import opencl_unusable
from tvmrt import runtime
from tvmrt.error import ArrayError

TOL = {"rtol": 1e-5, "atol": 1e-5}
# (id, folder, library, golden, input name, RUN_MODEL_DEVICE)
_MODELS = [
    ("cnn", "opencl-factory", "deploy.so", "golden.npz", "data", "opencl"),
    ("dense-two-outputs", "opencl-factory", "dense.so", "dense_golden.npz", "x", "opencl"),
    ("cpu-and-opencl", "hetero-opencl-cpu", "deploy.so", "golden.npz", "data", "cpu,opencl"),
]


@pytest.fixture(scope="module")
def pocl() -> dict[str, str]:
    """The environment of a C program that runs on the OpenCL driver tvmrt uses here."""
    if opencl_unusable():
        pytest.skip(str(opencl_unusable()))
    return {k: v for k, v in os.environ.items() if k == "TVMRT_LIBOPENCL"}


def _npz(path: Path) -> dict[str, np.ndarray]:
    """The arrays of an .npz file, the file closed (an open one warns when collected)."""
    with np.load(path) as data:
        return dict(data)


def _assert_output(path: Path, want: np.ndarray) -> None:
    """The raw output a program wrote to path is TVM's golden `want` (tolerance TOL)."""
    got = np.fromfile(path, dtype=want.dtype).reshape(want.shape)
    np.testing.assert_allclose(got, want, **TOL)


def _with_pocl(env: dict[str, str], pocl: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """env with pocl's, and under ASan the leaks of the ICD loader (an opendir it keeps) and of
    pocl (its LLVM, when a kernel is compiled on a cold pocl cache) suppressed: they are not
    ours, and with a warm cache pocl's do not show, so a clean machine would fail alone."""
    env = {**env, **pocl}
    if "ASAN_OPTIONS" in env:  # an ASan build (harmless to a plain one)
        suppressions = tmp_path / "lsan.supp"
        suppressions.write_text("leak:libOpenCL\nleak:libpocl\n")
        env["LSAN_OPTIONS"] = f"suppressions={suppressions}:print_suppressions=0"
        env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":fast_unwind_on_malloc=0"
    return env


def _run_model(
    native: NativeBuild,
    exe: Path,
    tmp_path: Path,
    env: dict[str, str],
    model: tuple[str, str, str, str, str],
) -> subprocess.CompletedProcess[str]:
    folder, library, golden, name, devices = model
    where = artifact_folder("relay016") / folder
    _npz(where / golden)[name].tofile(tmp_path / "x.bin")
    full = {**_with_pocl(native.env, env, tmp_path), "RUN_MODEL_DEVICE": devices}
    return native.run_env(
        exe, full, "factory", where / library, name, tmp_path / "x.bin", tmp_path / "o"
    )


@pytest.mark.parametrize("model", [m[1:] for m in _MODELS], ids=[m[0] for m in _MODELS])
def test_c_runtime_runs_tvm_opencl_builds_against_their_goldens(
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    pocl: dict[str, str],
    tmp_path: Path,
    model: tuple[str, str, str, str, str],
) -> None:
    proc = _run_model(native, compile_c(native, "run_model", False), tmp_path, pocl, model)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    golden = _npz(artifact_folder("relay016") / model[0] / model[2])
    outputs = sorted(k for k in golden if k.startswith("output_"))
    assert proc.stdout.strip() == f"outputs: {len(outputs)}"
    for i, key in enumerate(outputs):
        _assert_output(tmp_path / f"o{i}.bin", golden[key])


def test_a_cpu_graph_given_only_opencl_is_refused_as_python_refuses_it(
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    pocl: dict[str, str],
    tmp_path: Path,
) -> None:
    # the CPU+OpenCL graph's dense layer is CPU code: its weights cannot fall back to opencl(0)
    model = ("hetero-opencl-cpu", "deploy.so", "golden.npz", "data", "opencl")
    proc = _run_model(native, compile_c(native, "run_model", False), tmp_path, pocl, model)
    lib = runtime.load_module(str(artifact_folder("relay016") / model[0] / model[1]))
    with pytest.raises(ArrayError) as python:
        lib["default"](runtime.opencl(0))
    assert "no cpu device was given" in str(python.value)
    assert proc.returncode == 1
    assert proc.stderr.rstrip().endswith(f"failed: ArrayError: {python.value}"), proc.stderr


def test_c_runtime_refuses_opencl_without_a_driver_or_a_device(
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    pocl: dict[str, str],
    tmp_path: Path,
) -> None:
    exe = compile_c(native, "run_model", False)
    model = ("opencl-factory", "dense.so", "dense_golden.npz", "x", "opencl")
    missing = str(tmp_path / "libOpenCL.so.1")
    proc = _run_model(native, exe, tmp_path, {**pocl, "TVMRT_LIBOPENCL": missing}, model)
    assert proc.returncode == 1
    assert (
        f"failed: DeviceUnavailableError: OpenCL: cannot load the OpenCL library '{missing}' ("
        in proc.stderr
    ), proc.stderr
    # the loader without pocl's library beside it, and no system vendors (OCL_ICD_VENDORS
    # names an empty folder instead of /etc/OpenCL/vendors), finds no platform: no device 0
    vendors = tmp_path / "no-vendors"
    vendors.mkdir()
    no_pocl = {k: v for k, v in pocl.items() if k != "LD_LIBRARY_PATH"}
    no_pocl["OCL_ICD_VENDORS"] = str(vendors)
    proc = _run_model(native, exe, tmp_path, no_pocl, model)
    assert proc.returncode == 1
    assert proc.stderr.rstrip().endswith(
        "failed: DeviceUnavailableError: device opencl(0) does not exist: this machine has 0 "
        "OpenCL device(s)"
    ), proc.stderr


# the C API on opencl(0), through ctypes: an 8-float array and a view of it at byte offset
# 20; a second command queue; workspace given back and taken again; a kernel given a handle
# that is no live buffer
_API = r"""
import ctypes, sys
import numpy as np
from tvmrt.runtime._ctypes_api import DLTensor, TVMValue

lib = ctypes.CDLL(sys.argv[1])
lib.TVMGetLastError.restype = ctypes.c_char_p
lib.TVMBackendAllocWorkspace.restype = ctypes.c_void_p
lib.TVMBackendAllocWorkspace.argtypes = [ctypes.c_int] * 2 + [ctypes.c_uint64] + [ctypes.c_int] * 2
lib.TVMBackendFreeWorkspace.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p]


def check(rc):
    if rc != 0:
        sys.exit(lib.TVMGetLastError().decode())


shape = (ctypes.c_int64 * 1)(8)
handle = ctypes.POINTER(DLTensor)()
check(lib.TVMArrayAlloc(shape, 1, 2, 32, 1, 4, 0, ctypes.byref(handle)))
whole = np.arange(8, dtype="float32")
check(lib.TVMArrayCopyFromBytes(handle, whole.ctypes.data_as(ctypes.c_void_p), 32))
view = DLTensor.from_buffer_copy(handle.contents)  # elements 5 and 6: bytes 20..27
view.shape = (ctypes.c_int64 * 1)(2)
view.byte_offset = 20
part = np.array([-1, -2], dtype="float32")
check(lib.TVMArrayCopyFromBytes(ctypes.byref(view), part.ctypes.data_as(ctypes.c_void_p), 8))
out = np.zeros(8, dtype="float32")
check(lib.TVMArrayCopyToBytes(handle, out.ctypes.data_as(ctypes.c_void_p), 32))
print(out.tolist())
stream = ctypes.c_void_p()  # a second command queue, made current, finished, freed
check(lib.TVMStreamCreate(4, 0, ctypes.byref(stream)))
check(lib.TVMSetStream(4, 0, stream))
twice = whole * 2
check(lib.TVMArrayCopyFromBytes(handle, twice.ctypes.data_as(ctypes.c_void_p), 32))
check(lib.TVMSynchronize(4, 0, stream))
check(lib.TVMArrayCopyToBytes(handle, out.ctypes.data_as(ctypes.c_void_p), 32))
check(lib.TVMSetStream(4, 0, None))
check(lib.TVMStreamFree(4, 0, stream))
print(out.tolist())
print(lib.TVMStreamFree(4, 0, None), lib.TVMGetLastError().decode())
view.byte_offset = 28  # 8 bytes from byte 28 of 32
print(lib.TVMArrayCopyToBytes(ctypes.byref(view), out.ctypes.data_as(ctypes.c_void_p), 8),
      lib.TVMGetLastError().decode())
check(lib.TVMArrayFree(handle))

first = lib.TVMBackendAllocWorkspace(4, 0, 100, 2, 32)
assert first, lib.TVMGetLastError()
check(lib.TVMBackendFreeWorkspace(4, 0, first))
print(lib.TVMBackendAllocWorkspace(4, 0, 4000, 2, 32) == first)  # the pool's block again
print(lib.TVMBackendFreeWorkspace(4, 0, 0x1234560), lib.TVMGetLastError().decode())

mod, f = ctypes.c_void_p(), ctypes.c_void_p()
check(lib.TVMModLoadFromFile(sys.argv[2].encode(), b"", ctypes.byref(mod)))
check(lib.TVMModGetFunction(mod, b"tvmgen_default_fused_nn_dense_add_kernel", 1, ctypes.byref(f)))

args, codes = (TVMValue * 7)(), (ctypes.c_int * 7)()
for i in range(4):  # the kernel's four buffers: handles no array has
    args[i].v_handle, codes[i] = 0x1234560, 3
for i in range(4, 7):  # blockIdx.x, threadIdx.x, threadIdx.y
    args[i].v_int64, codes[i] = 1, 0
ret, code = TVMValue(), ctypes.c_int()
print(lib.TVMFuncCall(f, args, codes, 7, ctypes.byref(ret), ctypes.byref(code)),
      lib.TVMGetLastError().decode())
check(lib.TVMFuncFree(f))
check(lib.TVMModFree(mod))
"""


def test_c_api_arrays_workspace_and_kernel_arguments_on_opencl(
    native_plain: NativeBuild, pocl: dict[str, str]
) -> None:
    native = native_plain
    env = {**native.env, **pocl}
    dense = artifact_folder("relay016") / "opencl-factory" / "dense.so"
    proc = subprocess.run(
        [sys.executable, "-c", _API, str(native.lib_dir / "libtvmrt_runtime.so"), str(dense)],
        env={**env, "PYTHONPATH": os.pathsep.join(sys.path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "[0.0, 1.0, 2.0, 3.0, 4.0, -1.0, -2.0, 7.0]"
    assert lines[1] == "[0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0]"
    assert lines[2] == (
        "-1 InvalidArgumentError: stream 0 of opencl(0) is the default queue: it is not freed"
    )
    assert lines[3].startswith("-1 ArrayError: 8 bytes at offset 28 do not fit a 32-byte ")
    assert lines[4] == "True"
    assert lines[5] == (
        "-1 TVMBackendFreeWorkspace: 0x1234560 is not workspace of device type 4 allocated by "
        "TVMBackendAllocWorkspace"
    )
    assert lines[6] == (
        "-1 ArrayError: kernel 'tvmgen_default_fused_nn_dense_add_kernel' argument 0: "
        "0x1234560 is not the data handle of a live OpenCL array"
    )


@pytest.mark.parametrize("variant", ["plain", "asan"])
def test_cxx_deployment_program_on_kdlopencl(
    tmp_path_factory: pytest.TempPathFactory, pocl: dict[str, str], tmp_path: Path, variant: str
) -> None:
    """tests/native/cxx/device_deploy.cc, TVM's C++ API on kDLOpenCL: NDArrays made on the
    device, the factory's default there, bytes in and out; compiled warning-free against
    tvmrt's headers, plain and under ASan/UBSan, against TVM's golden."""
    from tests.support.cxx import SANITIZE, cxx_env, native_lib_dir, shell

    env = {**cxx_env(native_lib_dir(tmp_path_factory, variant)), **pocl}
    source = Path(__file__).parent / "cxx" / "device_deploy.cc"
    flags = SANITIZE if variant == "asan" else ""
    # the program's rpath finds tvmrt; LD_LIBRARY_PATH is only for pocl (pocl env)
    shell(
        f"g++ -std=c++17 -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Werror {flags} {source} "
        "$(tvmrt config --cflags --libs) -o device_deploy",
        {k: v for k, v in env.items() if k != "LD_LIBRARY_PATH"},
        tmp_path,
    )
    where = artifact_folder("relay016") / "opencl-factory"
    golden = _npz(where / "dense_golden.npz")
    golden["x"].astype("<f4").tofile(tmp_path / "x.bin")
    env = _with_pocl(env, pocl, tmp_path)
    shell(f"./device_deploy opencl {where / 'dense.so'} x 64 x.bin 10 out.bin", env, tmp_path)
    _assert_output(tmp_path / "out.bin", golden["output_0"])


# both engines in one process, on one library: the Python engine's OpenCL run installs the
# host's device workspace; the C engine's kernels must still get workspace of the C
# runtime's own (its OpenCL module cannot take the host's buffers)
_BOTH_ENGINES = r"""
import ctypes, sys
import numpy as np
from tvmrt import runtime
from tvmrt.contrib import graph_executor
from tvmrt.runtime import kernel_services
from tvmrt.runtime._ctypes_api import DLTensor, TVMValue

path, golden = sys.argv[1], np.load(sys.argv[2])
py = graph_executor.GraphModule(runtime.load_module(path)["default"](runtime.opencl(0)))
py.set_input("data", golden["data"])
py.run()
print(np.abs(py.get_output(0).numpy() - golden["output_0"]).max() < 1e-5)

lib = ctypes.CDLL(kernel_services.library_path())
lib.TVMGetLastError.restype = ctypes.c_char_p


def check(rc):
    if rc != 0:
        sys.exit(lib.TVMGetLastError().decode())


def call(mod, name, values, codes):
    f, ret, code = ctypes.c_void_p(), TVMValue(), ctypes.c_int()
    check(lib.TVMModGetFunction(mod, name.encode(), 0, ctypes.byref(f)))
    args = (TVMValue * len(values))(*values)
    check(lib.TVMFuncCall(f, args, (ctypes.c_int * len(codes))(*codes), len(codes),
                          ctypes.byref(ret), ctypes.byref(code)))
    check(lib.TVMFuncFree(f))
    return ctypes.c_void_p(ret.v_handle)


mod = ctypes.c_void_p()
check(lib.TVMModLoadFromFile(path.encode(), b"", ctypes.byref(mod)))
dev = TVMValue()
dev.v_device.device_type, dev.v_device.device_id = 4, 0
gmod = call(mod, "default", [dev], [6])
x = np.ascontiguousarray(golden["data"])
shape = (ctypes.c_int64 * x.ndim)(*x.shape)
t = DLTensor(data=x.ctypes.data, ndim=x.ndim, shape=shape)
t.device.device_type, t.dtype.code, t.dtype.bits, t.dtype.lanes = 1, 2, 32, 1
call(gmod, "set_input", [TVMValue(v_str=b"data"), TVMValue(v_handle=ctypes.addressof(t))],
     [11, 7])
call(gmod, "run", [], [])
out = call(gmod, "get_output", [TVMValue(v_int64=0)], [0])
got = np.empty_like(golden["output_0"])
check(lib.TVMArrayCopyToBytes(out, got.ctypes.data_as(ctypes.c_void_p), got.nbytes))
print(np.abs(got - golden["output_0"]).max() < 1e-5)
check(lib.TVMArrayFree(out))
check(lib.TVMModFree(gmod))
check(lib.TVMModFree(mod))
"""


def test_the_c_and_python_engines_run_opencl_in_one_process(pocl: dict[str, str]) -> None:
    where = artifact_folder("relay016") / "opencl-factory"
    env = {**os.environ, **pocl, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("LD_PRELOAD", None)
    proc = subprocess.run(
        [sys.executable, "-c", _BOTH_ENGINES, str(where / "deploy.so"), str(where / "golden.npz")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.split() == ["True", "True"]


def test_dlr_c_api_runs_an_opencl_neo_folder(
    native: NativeBuild, native_root: Path, pocl: dict[str, str], tmp_path: Path
) -> None:
    """DLR's C API (examples/cpp/dlr_model.c, -ldlr) on kDLOpenCL: a Neo folder
    (compiled.so, compiled_model.json, compiled.params) made from TVM 0.16's OpenCL dense
    build, as DLR users deployed to Mali and Adreno; both outputs against TVM's golden."""
    from tests.native.dlr_programs import program_for

    where = artifact_folder("relay016") / "opencl-factory"
    factory = runtime.load_module(str(where / "dense.so"))
    folder = tmp_path / "neo-opencl"
    folder.mkdir()
    (folder / "compiled_model.json").write_text(factory["get_graph_json"]())
    params = runtime.save_param_dict(factory["get_graph_params"]())
    (folder / "compiled.params").write_bytes(params)
    (folder / "compiled.so").write_bytes((where / "dense.so").read_bytes())
    golden = _npz(where / "dense_golden.npz")
    golden["x"].tofile(tmp_path / "x.bin")
    out = native_root / f"dlr-example-{native.variant}"
    out.mkdir(exist_ok=True)
    env = _with_pocl(native.env, pocl, tmp_path)
    proc = native.run_env(
        program_for(native, out), env, folder, tmp_path, "4", f"x={tmp_path / 'x.bin'}"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[:2] == [
        "DLR 1.10.0, backend tvm, metadata no, 1 inputs, 4 weights, 2 outputs",
        "input 0: x float32 (1, 64)",
    ]
    for i in range(2):
        _assert_output(tmp_path / f"output_{i}.bin", golden[f"output_{i}"])


def test_graph_executor_create_takes_a_device_per_pair(
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    pocl: dict[str, str],
    tmp_path: Path,
) -> None:
    """tvm.graph_runtime.create(json, lib, 1, 0, 4, 0) + load_params: the CPU+OpenCL graph
    from its files (graph JSON and params taken from TVM's factory), as TVM's C++ users
    created heterogeneous executors."""
    where = artifact_folder("relay016") / "hetero-opencl-cpu"
    factory = runtime.load_module(str(where / "deploy.so"))
    (tmp_path / "graph.json").write_text(factory["get_graph_json"]())
    params = runtime.save_param_dict(factory["get_graph_params"]())
    (tmp_path / "params").write_bytes(params)
    golden = _npz(where / "golden.npz")
    golden["data"].tofile(tmp_path / "x.bin")
    env = {**_with_pocl(native.env, pocl, tmp_path), "RUN_MODEL_DEVICE": "cpu,opencl"}
    exe = compile_c(native, "run_model", False)
    args = ["files", where / "deploy.so", tmp_path / "graph.json", tmp_path / "params"]
    proc = native.run_env(exe, env, *args, "data", tmp_path / "x.bin", tmp_path / "o")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _assert_output(tmp_path / "o0.bin", golden["output_0"])


# a tvm-ffi kernel library's function called through the C API on opencl(0): its inputs
# and an output array made on the device, the result read back
_FFI_CALL = r"""
import ctypes, sys
import numpy as np
from tvmrt.runtime._ctypes_api import DLTensor

lib = ctypes.CDLL(sys.argv[1])
lib.TVMGetLastError.restype = ctypes.c_char_p
path, name, data = sys.argv[2], sys.argv[3], np.load(sys.argv[4])


def check(rc):
    if rc != 0:
        sys.exit(lib.TVMGetLastError().decode())


def on_device(shape):
    dims = (ctypes.c_int64 * len(shape))(*shape)
    handle = ctypes.POINTER(DLTensor)()
    check(lib.TVMArrayAlloc(dims, len(shape), 2, 32, 1, 4, 0, ctypes.byref(handle)))
    return handle


mod, f = ctypes.c_void_p(), ctypes.c_void_p()
check(lib.TVMModLoadFromFile(path.encode(), b"", ctypes.byref(mod)))
check(lib.TVMModGetFunction(mod, name.encode(), 1, ctypes.byref(f)))
inputs = [data[k] for k in sorted(data) if k.startswith("arg")]
want = data["expected"]
arrays = [on_device(a.shape) for a in inputs] + [on_device(want.shape)]
for a, handle in zip(inputs, arrays):
    a = np.ascontiguousarray(a)
    check(lib.TVMArrayCopyFromBytes(handle, a.ctypes.data_as(ctypes.c_void_p), a.nbytes))
values = (ctypes.c_void_p * len(arrays))(*[ctypes.cast(h, ctypes.c_void_p) for h in arrays])
codes = (ctypes.c_int * len(arrays))(*[7] * len(arrays))  # kTVMDLTensorHandle
ret, code = ctypes.c_int64(), ctypes.c_int()
check(lib.TVMFuncCall(f, values, codes, len(arrays), ctypes.byref(ret), ctypes.byref(code)))
got = np.empty_like(want)
check(lib.TVMArrayCopyToBytes(arrays[-1], got.ctypes.data_as(ctypes.c_void_p), got.nbytes))
print(float(np.abs(got - want).max()))
for handle in arrays:
    check(lib.TVMArrayFree(handle))
check(lib.TVMFuncFree(f))
check(lib.TVMModFree(mod))
"""

_ERAS = ("tvm021", "tvm025", "tvm027")


@pytest.mark.parametrize("program", ["add_one", "dense_relu"])
@pytest.mark.parametrize("era", _ERAS)
def test_c_runtime_runs_tvm_ffi_opencl_kernels_of_every_era(
    native_plain: NativeBuild, pocl: dict[str, str], era: str, program: str
) -> None:
    """TVM 0.21, 0.25 and 0.27's OpenCL kernel libraries (tests/fixtures/build_opencl.py:
    tvm-ffi host code, an ``opencl`` entry of OpenCL C in ``__tvm_ffi__library_bin`` whose
    kernel table has TVM >= 0.21's ``arg_extra_tags``) called through the C API."""
    folder = built_fixtures("build_opencl.py", peer=era, folder=f"opencl{era[3:]}")
    proc = subprocess.run(
        [sys.executable, "-c", _FFI_CALL, str(native_plain.lib_dir / "libtvmrt_runtime.so"),
         str(folder / f"{program}.so"), program, str(folder / f"{program}.npz")],
        env={**native_plain.env, **pocl, "PYTHONPATH": os.pathsep.join(sys.path)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert float(proc.stdout) <= 1e-5
