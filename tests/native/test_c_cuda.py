"""The C runtime on kDLCUDA: a Relay-era CUDA factory (TVM 0.19's host code, nvcc's PTX) run by
tests/native/c/run_model.c on cuda(0), against the recording libcuda stand-in
(tests/support/fake_libcuda.c, loaded through TVMRT_LIBCUDA; it logs every driver call to
FAKE_LIBCUDA_LOG and checks contexts, copy bounds and the kernels' parameter sizes from the
PTX). The stand-in never runs a kernel, so these prove what the C runtime hands the driver
(allocations, copies, launches with TVM's grid/block and arguments, frees), compared with the
Python runtime's calls on the same stand-in; the outputs against the CPU golden are proved on
a GPU by `make gpu-check`. The refusals without a driver or a GPU are the Python runtime's
words, produced by it here and compared.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from tests.native.conftest import NativeBuild
from tests.support.cuda_fixtures import CUDA_FIXTURES, cuda_fixtures
from tests.support.fake_cuda import FakeLog, build, stand_in_backend

from tvmrt import runtime
from tvmrt.contrib import graph_executor
from tvmrt.error import DeviceUnavailableError
from tvmrt.runtime.backends import _cuda_driver

FIXTURE = CUDA_FIXTURES / "relay019_ptx.so"
GOLDEN = FIXTURE.with_name("relay019_golden.npz")
device_table = importlib.import_module("tvmrt.runtime.device")
CUDA = int(runtime.DLDeviceType.kDLCUDA)


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cuda_fixtures()
    return build(tmp_path_factory.mktemp("fakecuda"))


@contextmanager
def python_cuda(lib: Path, monkeypatch: pytest.MonkeyPatch, gpus: int = 1) -> Iterator[FakeLog]:
    """The Python runtime's CUDA backend on the stand-in, in this process."""
    with stand_in_backend(lib, monkeypatch, count=gpus) as log:
        yield log


def _lsan_options(tmp_path: Path) -> str:
    """LeakSanitizer's options for a program on the stand-in: the stand-in's own records are
    not leaks of ours."""
    suppressions = tmp_path / "lsan.supp"
    suppressions.write_text("leak:libfakecuda\n")
    return f"suppressions={suppressions}"


def run_c(
    native: NativeBuild, exe: Path, tmp_path: Path, env: dict[str, str]
) -> tuple[int, str, list[str]]:
    """run_model on cuda(0): (exit status, stderr, the stand-in's log lines)."""
    np.load(GOLDEN)["x"].tofile(tmp_path / "x.bin")
    log = tmp_path / "cuda.log"
    full = {**native.env, "RUN_MODEL_DEVICE": "cuda", "FAKE_LIBCUDA_LOG": str(log), **env}
    full["LSAN_OPTIONS"] = _lsan_options(tmp_path)
    proc = native.run_env(exe, full, "factory", FIXTURE, "x", tmp_path / "x.bin", tmp_path / "o")
    lines = log.read_text().splitlines() if log.exists() else []
    return proc.returncode, proc.stdout + proc.stderr, lines


def test_c_runtime_runs_a_relay_cuda_factory_on_kdlcuda(
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    stand_in: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    exe = compile_c(native, "run_model", False)
    rc, out, log = run_c(native, exe, tmp_path, {"TVMRT_LIBCUDA": str(stand_in)})
    assert rc == 0, out
    assert not [line for line in log if "no current context" in line], log
    # the factory's params (weight 32x64, bias 32) and the input (1x64) go to the GPU
    copies = [line.split()[1] for line in log if line.startswith("cuMemcpyHtoDAsync")]
    assert sorted(copies) == ["128", "256", "8192"]
    # TVM 0.19's host code launches both kernels: the same calls as the Python runtime's
    c_launches = [line for line in log if line.startswith("cuLaunchKernel")]
    with python_cuda(stand_in, monkeypatch) as fake:
        module = graph_executor.GraphModule(
            runtime.load_module(str(FIXTURE))["default"](runtime.cuda())
        )
        module.set_input("x", np.load(GOLDEN)["x"])
        fake.reset()
        module.run()
        py_launches = [line for line in fake.lines() if line.startswith("cuLaunchKernel")]
    assert c_launches == py_launches
    assert c_launches == [
        "cuLaunchKernel tvmgen_default_fused_nn_dense_add_nn_relu_kernel grid=32,1,1 "
        "block=64,1,1 smem=0 stream=0 args= dev dev dev dev",
        "cuLaunchKernel tvmgen_default_fused_nn_softmax_kernel grid=1,1,1 block=32,1,1 smem=0 "
        "stream=0 args= dev dev",
    ]
    # launches are queued; get_output copies the 1x32 result back, waiting for the stream
    after = log[log.index(c_launches[-1]) + 1 :]
    assert after[:2] == ["cuMemcpyDtoHAsync 128 stream=0", "cuStreamSynchronize 0"]
    # the stand-in's memory round-trips: it never computes, so the output is its zeroed
    # allocation, read back through the GPU path (get_output(i) and get_output(i, out) agree)
    assert np.fromfile(tmp_path / "o0.bin", dtype="float32").tolist() == [0.0] * 32
    # every allocation freed, the module unloaded once the handles are gone
    assert log.count("cuModuleUnload") == 1
    assert log[-1] == "live allocations at exit: 0"


def _python_error(stand_in: Path, monkeypatch: pytest.MonkeyPatch, gpus: int) -> str:
    with python_cuda(stand_in, monkeypatch, gpus):
        lib = runtime.load_module(str(FIXTURE))
        with pytest.raises(DeviceUnavailableError) as info:
            lib["default"](runtime.cuda())
    return f"DeviceUnavailableError: {info.value}"


def test_c_runtime_refuses_without_a_gpu_in_python_words(
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    stand_in: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    exe = compile_c(native, "run_model", False)
    env = {"TVMRT_LIBCUDA": str(stand_in), "FAKE_LIBCUDA_GPUS": "0"}
    rc, out, log = run_c(native, exe, tmp_path, env)
    want = _python_error(stand_in, monkeypatch, 0)
    assert want == (
        "DeviceUnavailableError: device cuda(0) does not exist: the NVIDIA driver (CUDA 13.0) "
        "reports 0 GPU(s)"
    )
    assert rc == 1, out
    assert out.rstrip().endswith(f"failed: {want}"), out
    assert not [line for line in log if line.startswith("cuMemAlloc")]


def test_c_runtime_refuses_without_a_driver_in_python_words(
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    stand_in: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    missing = tmp_path / "no-driver" / "libcuda.so.1"
    exe = compile_c(native, "run_model", False)
    rc, out, _ = run_c(native, exe, tmp_path, {"TVMRT_LIBCUDA": str(missing)})
    monkeypatch.setenv(_cuda_driver.LIBRARY_ENV, str(missing))
    monkeypatch.setattr(_cuda_driver, "_driver", [])
    with pytest.raises(DeviceUnavailableError) as info:
        _cuda_driver.driver()
    want = f"DeviceUnavailableError: {info.value}"
    assert "cannot load the NVIDIA driver library" in want
    assert rc == 1, out
    assert out.rstrip().endswith(f"failed: {want}"), out


def test_a_library_that_is_no_driver_is_named_so_in_c_and_python(
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # TVMRT_LIBCUDA naming another library (libm): both said "the NVIDIA driver is too old"
    other = "libm.so.6"
    exe = compile_c(native, "run_model", False)
    rc, out, _ = run_c(native, exe, tmp_path, {"TVMRT_LIBCUDA": other})
    monkeypatch.setenv(_cuda_driver.LIBRARY_ENV, other)
    monkeypatch.setattr(_cuda_driver, "_driver", [])
    with pytest.raises(DeviceUnavailableError) as info:
        _cuda_driver.driver()
    want = f"DeviceUnavailableError: {info.value}"
    assert f"'{other}' is not the NVIDIA driver library (it has no cuInit" in want
    assert "too old" not in want
    assert rc == 1, out
    assert out.rstrip().endswith(f"failed: {want}"), out


def test_cuda_blob_entry_survives_mutations(
    native_asan: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    stand_in: Path,
) -> None:
    """The module blob of the CUDA fixture (factory, `_lib`, `cuda`: fmt, kernel table, PTX),
    mutated with a fixed seed (tests/native/c/fuzz_parsers.c) under ASan + UBSan: every input
    loads or fails with an error message, never a crash, leak or undefined behaviour."""
    iterations = int(os.environ.get("TVMRT_NATIVE_FUZZ_ITERATIONS", "1000"))
    exe = compile_c(native_asan, "fuzz_parsers", True)
    proc = native_asan.run(exe, "blob", FIXTURE, str(iterations), "0", timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert proc.stdout.startswith(f"blob: {iterations} inputs"), proc.stdout
    assert "ERROR: AddressSanitizer" not in proc.stderr
    assert "runtime error" not in proc.stderr  # UBSan


@pytest.mark.parametrize("variant", ["plain", "asan"])
def test_cxx_deployment_program_on_kdlcuda(
    tmp_path_factory: pytest.TempPathFactory, stand_in: Path, tmp_path: Path, variant: str
) -> None:
    """tests/native/cxx/device_deploy.cc, TVM's C++ API on kDLCUDA (the program make gpu-check
    runs against the golden): it compiles warning-free against tvmrt's headers and, on the
    stand-in, puts the input on the GPU, launches both kernels, reads the output back after
    the stream and frees everything (plain and under ASan/UBSan)."""
    from tests.support.cxx import SANITIZE, cxx_env, native_lib_dir, shell

    env = cxx_env(native_lib_dir(tmp_path_factory, variant))
    source = Path(__file__).parent / "cxx" / "device_deploy.cc"
    flags = SANITIZE if variant == "asan" else ""
    shell(
        f"g++ -std=c++17 -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Werror {flags} {source} "
        "$(tvmrt config --cflags --libs) -o device_deploy",
        env,
        tmp_path,
    )
    np.load(GOLDEN)["x"].astype("<f4").tofile(tmp_path / "x.bin")
    log = tmp_path / "cuda.log"
    env.update(TVMRT_LIBCUDA=str(stand_in), FAKE_LIBCUDA_LOG=str(log))
    env["LSAN_OPTIONS"] = _lsan_options(tmp_path)
    shell(f"./device_deploy cuda {FIXTURE} x 64 x.bin 32 out.bin", env, tmp_path)
    lines = log.read_text().splitlines()
    assert "cuMemcpyHtoDAsync 256 stream=0" in lines  # the 1x64 input
    launches = [line.split()[1] for line in lines if line.startswith("cuLaunchKernel")]
    assert launches == [
        "tvmgen_default_fused_nn_dense_add_nn_relu_kernel",
        "tvmgen_default_fused_nn_softmax_kernel",
    ]
    last = max(i for i, line in enumerate(lines) if line.startswith("cuLaunchKernel"))
    assert "cuMemcpyDtoHAsync 128 stream=0" in lines[last + 1 :]  # the output, read back after
    assert lines[-1] == "live allocations at exit: 0"
    assert (tmp_path / "out.bin").stat().st_size == 32 * 4


_OFFSET_COPIES = r"""
import ctypes, sys
import numpy as np
from tvmrt.runtime import kernel_services
from tvmrt.runtime._ctypes_api import DLTensor

lib = ctypes.CDLL(kernel_services.library_path())


def check(rc):
    if rc != 0:
        lib.TVMGetLastError.restype = ctypes.c_char_p
        sys.exit(lib.TVMGetLastError().decode())


shape = (ctypes.c_int64 * 1)(8)
handle = ctypes.POINTER(DLTensor)()
check(lib.TVMArrayAlloc(shape, 1, 2, 32, 1, 2, 0, ctypes.byref(handle)))
whole = np.arange(8, dtype="float32")
check(lib.TVMArrayCopyFromBytes(handle, whole.ctypes.data_as(ctypes.c_void_p), 32))
view = DLTensor.from_buffer_copy(handle.contents)  # elements 5 and 6: bytes 20..27
view.shape = (ctypes.c_int64 * 1)(2)
view.byte_offset = 20
part = np.array([-1, -2], dtype="float32")
check(lib.TVMArrayCopyFromBytes(ctypes.byref(view), part.ctypes.data_as(ctypes.c_void_p), 8))
got = np.zeros(2, dtype="float32")
check(lib.TVMArrayCopyToBytes(ctypes.byref(view), got.ctypes.data_as(ctypes.c_void_p), 8))
out = np.zeros(8, dtype="float32")
check(lib.TVMArrayCopyToBytes(handle, out.ctypes.data_as(ctypes.c_void_p), 32))
print(got.tolist())
print(out.tolist())
check(lib.TVMArrayFree(handle))
"""


def test_c_copies_reach_a_byte_offset_into_gpu_memory(stand_in: Path, tmp_path: Path) -> None:
    """TVMArrayCopyFrom/ToBytes on a view of a cuda array at byte_offset 20: the backend is
    given the allocation and the offset (as TVM's CopyDataFromTo), and the stand-in's bounds
    check sees the copies land inside the 32-byte allocation, where the offset says."""
    log = tmp_path / "cuda.log"
    env = {**os.environ, "TVMRT_LIBCUDA": str(stand_in), "FAKE_LIBCUDA_LOG": str(log)}
    env.pop("LD_PRELOAD", None)
    proc = subprocess.run(
        [sys.executable, "-c", _OFFSET_COPIES], env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == [
        "[-1.0, -2.0]",
        "[0.0, 1.0, 2.0, 3.0, 4.0, -1.0, -2.0, 7.0]",
    ]
    lines = log.read_text().splitlines()
    assert not [line for line in lines if "no current" in line], lines
    assert [line.split()[1] for line in lines if line.startswith("cuMemcpy")] == [
        "32", "8", "8", "32",
    ]  # fmt: skip
    assert lines[-1] == "live allocations at exit: 0"
