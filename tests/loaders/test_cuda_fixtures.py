"""TVM 0.27's own host code calling its CUDA kernels, against the libcuda stand-in.

The fixtures come from scripts/make_cuda_fixtures.py (TVM 0.27 + nvcc, cached under
build/cuda-fixtures); the stand-in checks the launches' parameter sizes against the PTX
nvcc wrote and logs them, so these tests prove what TVM's host code and tvmrt hand the
driver (grid, block, argument values), not what the kernels compute (``make gpu-check``).
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from support.cuda_fixtures import CUDA_FIXTURES, cuda_fixtures
from support.fake_cuda import FakeLog, build, stand_in_backend
from tvmrt import runtime
from tvmrt.error import KernelError
from tvmrt.runtime.backends import _cuda_driver
from tvmrt.runtime.loaders.cuda import CUDAModule

FIXTURES = CUDA_FIXTURES
device_table = importlib.import_module("tvmrt.runtime.device")
CUDA = int(runtime.DLDeviceType.kDLCUDA)


@pytest.fixture(scope="module")
def fixtures() -> Path:
    return cuda_fixtures()


@pytest.fixture
def fake(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[FakeLog]:
    lib = build(tmp_path_factory.mktemp("fakecuda"))
    with stand_in_backend(lib, monkeypatch, sm=90) as log:
        yield log


@pytest.mark.parametrize("fmt", ["ptx", "cubin", "fatbin"])
def test_tvm027_add_one_launch(fixtures: Path, fake: FakeLog, fmt: str) -> None:
    lib = runtime.load_module(str(fixtures / f"add_one_{fmt}.so"))
    (dev_mod,) = lib.imported_modules
    assert isinstance(dev_mod, CUDAModule)
    assert dev_mod.format == fmt
    info = dev_mod.table["add_one_kernel"]
    assert [str(t) for t in info.arg_types] == ["handle", "handle", "int32"]
    assert info.arg_extra_tags == (0, 0, 0)  # the tvm-ffi era's table layout
    golden = np.load(fixtures / "add_one_golden.npz")
    a = runtime.array(golden["arr_0"], runtime.cuda())
    b = runtime.empty(golden["expected"].shape, "float32", runtime.cuda())
    fake.reset()
    lib["add_one"](a, b)
    launch = [line for line in fake.lines() if line.startswith("cuLaunchKernel")]
    n = golden["arr_0"].shape[0]
    block = 1024  # dlight's fallback schedule for n = 1000: one block of 1024 threads
    args = " dev dev u32:1000" if fmt == "ptx" else ""  # parameter sizes known from PTX only
    assert launch == [
        f"cuLaunchKernel add_one_kernel grid={-(-n // block)},1,1 block={block},1,1 smem=0 "
        f"stream=0 args={args}"
    ]


def test_tvm027_dense_relu_2d_launch(fixtures: Path, fake: FakeLog) -> None:
    lib = runtime.load_module(str(fixtures / "dense_relu_ptx.so"))
    golden = np.load(fixtures / "dense_relu_golden.npz")
    x, w = (runtime.array(golden[k], runtime.cuda()) for k in ("arr_0", "arr_1"))
    out = runtime.empty((8, 32), "float32", runtime.cuda())
    fake.reset()
    lib["dense_relu"](x, w, out)
    (launch,) = [line for line in fake.lines() if line.startswith("cuLaunchKernel")]
    assert launch.startswith("cuLaunchKernel dense_relu_kernel grid=")
    assert launch.endswith("args= dev dev dev")
    with pytest.raises(KernelError, match="dense_relu"):
        lib["dense_relu"](x, w)  # TVM's own argument check, in its host code


def test_sass_fixture_refused_on_another_gpu(fixtures: Path, fake: FakeLog) -> None:
    fake.config(sm=75)
    lib = runtime.load_module(str(fixtures / "add_one_cubin.so"))
    assert lib.imported_modules[0].image.summary() == "SASS sm_90"
    a = runtime.empty((4,), "float32", runtime.cuda())
    with pytest.raises(KernelError, match=r"SASS sm_90 only.*this GPU, sm_75"):
        lib["add_one"](a, a)


def test_separate_ptx_file_and_meta(fixtures: Path, fake: FakeLog) -> None:
    mod = runtime.load_module(str(fixtures / "add_one.ptx"))
    assert isinstance(mod, CUDAModule)
    assert mod.image.summary() == "PTX ISA 9.0 for sm_75"
    a = runtime.empty((8,), "float32", runtime.cuda())
    fake.reset()
    mod["add_one_kernel"](a.data_ptr, a.data_ptr, 8, 1, 8)
    assert fake.lines()[-1].endswith("block=8,1,1 smem=0 stream=0 args= dev dev u32:8")


def test_inspect_reports_the_cuda_module(fixtures: Path) -> None:
    from support.cli import tvmrt

    done = tvmrt("inspect", str(fixtures / "add_one_fatbin.so"))
    assert (
        "device code: CUDA kernels ('cuda' module, 1 kernel(s), fatbin: PTX ISA 9.0 for sm_75; "
        "SASS sm_75): run it with --device cuda"
    ) in done.stdout


def test_graph_factory_runs_its_cuda_kernels_in_order(fixtures: Path, fake: FakeLog) -> None:
    from tvmrt.contrib import graph_executor

    lib = runtime.load_module(str(fixtures / "cnn_ptx.so"))
    golden = np.load(fixtures / "cnn_golden.npz")
    module = graph_executor.GraphModule(lib["default"](runtime.cuda()))
    module.set_input("x", golden["x"])
    fake.reset()
    module.run()
    launches = [line.split()[1] for line in fake.lines() if line.startswith("cuLaunchKernel")]
    assert launches == ["fused_conv2d_relu_kernel", "fused_matmul_add_kernel", "softmax_kernel"]
    assert not any("Synchronize" in line for line in fake.lines())  # run() does not wait
    assert module.get_output(0).numpy().shape == golden["expected"].shape
    assert fake.lines()[-1] == "cuStreamSynchronize 0"  # get_output does


def test_serve_on_cuda_answers_through_the_driver(
    fixtures: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    import json

    pytest.importorskip("uvicorn")
    from support.serve import tvmrt_serve

    lib = build(tmp_path_factory.mktemp("fakecuda-serve"))
    x = np.load(fixtures / "cnn_golden.npz")["x"]
    body = {"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                        "data": x.reshape(-1).tolist()}]}  # fmt: skip
    args = (str(fixtures / "cnn_ptx.so"), "--device", "cuda")
    with tvmrt_serve(*args, env={_cuda_driver.LIBRARY_ENV: str(lib)}) as served:
        status, _, reply = served.request(
            "POST", "/v2/models/cnn_ptx/infer", json.dumps(body).encode()
        )
    assert status == 200, reply
    (out,) = json.loads(reply)["outputs"]
    assert out["shape"] == [1, 10]  # values: the stand-in runs no kernels


def test_relay_era_factory_with_a_cuda_blob_entry(fixtures: Path, fake: FakeLog) -> None:
    from tvmrt.contrib import graph_executor

    if not (fixtures / "relay019_ptx.so").exists():
        pytest.skip("the Relay-era fixture needs TVM 0.19 (the tvm019 peers venv)")
    lib = runtime.load_module(str(fixtures / "relay019_ptx.so"))
    (kernels,) = lib.imported_modules
    (dev_mod,) = kernels.imported_modules  # _lib imports cuda (TVM 0.19's import tree)
    assert isinstance(dev_mod, CUDAModule)
    assert dev_mod.table["tvmgen_default_fused_nn_softmax_kernel"].arg_extra_tags == ()
    module = graph_executor.GraphModule(lib["default"](runtime.cuda()))
    module.set_input("x", np.load(fixtures / "relay019_golden.npz")["x"])
    fake.reset()
    module.run()  # TVM 0.19's host code: __tvm_set_device, then TVMBackendGetFuncFromEnv
    launches = [line for line in fake.lines() if line.startswith("cuLaunchKernel")]
    assert launches == [
        "cuLaunchKernel tvmgen_default_fused_nn_dense_add_nn_relu_kernel grid=32,1,1 "
        "block=64,1,1 smem=0 stream=0 args= dev dev dev dev",
        "cuLaunchKernel tvmgen_default_fused_nn_softmax_kernel grid=1,1,1 block=32,1,1 smem=0 "
        "stream=0 args= dev dev",
    ]


def test_relay_vm_executable_for_cuda(fixtures: Path, fake: FakeLog) -> None:
    """TVM 0.19's ``relay.vm.compile`` of the same model for ``cuda``: the VM puts the
    constants and the input on the GPU, launches the same kernels (VM names) with the same
    grid and block as the graph build, returns a cuda(0) tensor and frees what it took."""
    from tvmrt.runtime import vm as vm_rt

    if not (fixtures / "relay019_vm.ro").exists():
        pytest.skip("the Relay-era fixtures need TVM 0.19 (the tvm019 peers venv)")
    lib = runtime.load_module(str(fixtures / "relay019_vm_ptx.so"))
    exe = vm_rt.Executable.load_exec((fixtures / "relay019_vm.ro").read_bytes(), lib)
    x = np.load(fixtures / "relay019_golden.npz")["x"]
    fake.reset()
    vm = vm_rt.VirtualMachine(exe, runtime.cuda())
    out = vm.invoke("main", runtime.array(x))
    assert out.device == runtime.cuda(0)
    assert out.shape == (1, 32)
    log = fake.lines()
    assert [line for line in log if line.startswith("cuLaunchKernel")] == [
        "cuLaunchKernel vm_mod_fused_nn_dense_add_nn_relu_kernel grid=32,1,1 block=64,1,1 "
        "smem=0 stream=0 args= dev dev dev dev",
        "cuLaunchKernel vm_mod_fused_nn_softmax_kernel grid=1,1,1 block=32,1,1 smem=0 "
        "stream=0 args= dev dev",
    ]
    assert "cuMemcpyHtoDAsync 8192 stream=0" in log  # the 32x64 weight constant
    assert "cuMemcpyHtoDAsync 256 stream=0" in log  # the input
    del vm, exe, out
    gc.collect()
    assert fake.live_allocations() == 0


def test_bench_waits_for_the_gpu_in_each_measurement(fixtures: Path, fake: FakeLog) -> None:
    """``tvmrt bench --device cuda`` times the runs, not their launches: each measurement
    starts and ends with the stream synchronised (a GPU's run returns once it is queued)."""
    import contextlib
    import io

    from tvmrt.cli import main as cli_main

    args = ["bench", str(fixtures / "cnn_ptx.so"), "--device", "cuda", "--warmup", "0"]
    fake.reset()
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli_main([*args, "--repeat", "3", "--number", "2"]) == 0
    seen = [
        "sync" if line == "cuStreamSynchronize 0" else "launch"
        for line in fake.lines()
        if line == "cuStreamSynchronize 0" or line.startswith("cuLaunchKernel")
    ]
    measurement = ["sync", *["launch"] * 6, "sync"]  # 2 runs of 3 kernels
    assert seen[-3 * len(measurement) :] == measurement * 3


def test_profile_times_cuda_kernels_with_events(fixtures: Path, fake: FakeLog) -> None:
    """``tvmrt profile --device cuda``: each node's time is its kernels' CUDA event time (the
    stand-in reports 250 us per timed launch, a figure wall time never gives), with events
    recorded around every launch, each node's launches queued behind a held stream, for the
    per-node table and TVM's Report (--csv) alike."""
    import contextlib
    import csv
    import io

    from tvmrt.cli import main as cli_main

    lib = str(fixtures / "relay019_ptx.so")
    if not (fixtures / "relay019_ptx.so").exists():
        pytest.skip("the Relay-era fixture needs TVM 0.19 (the tvm019 peers venv)")
    for fmt in ([], ["--csv"]):
        fake.reset()
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert cli_main(["profile", lib, "--device", "cuda", "--number", "2", *fmt]) == 0
        log = fake.lines()
        launches = [i for i, line in enumerate(log) if line.startswith("cuLaunchKernel")]
        record = "cuEventRecord stream=0"  # start and end events on the launch's stream
        timed = [i for i in launches if log[i - 1] == record and log[i + 1] == record]
        assert len(timed) >= 2  # both kernels (the warm-up runs are not timed)
        assert log.count(record) == 2 * len(timed)
        assert log.count("cuEventElapsedTime") == len(timed)
        for i in timed:  # queued behind a held stream: no host gap inside its event pair
            last = [
                x for x in log[:i] if x in ("cuLaunchHostFunc stream=0", "cuStreamSynchronize 0")
            ]
            assert last[-1] == "cuLaunchHostFunc stream=0"
        if fmt:
            rows = list(csv.DictReader(io.StringIO(out.getvalue().strip())))
            assert [float(r["Duration (us)"]) for r in rows] == [250.0, 250.0]
            assert {r["Device"] for r in rows} == {"cuda0"}
        else:
            table = [line.split() for line in out.getvalue().splitlines()[2:4]]
            assert [row[2] for row in table] == ["250.0", "250.0"]


def test_gpu_check_script_runs_through_on_the_stand_in(
    fixtures: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``make gpu-check`` (scripts/gpu_check.py) runs every step to its end against the
    stand-in, so the check is ready for a session with a GPU; it says FAIL there, since the
    stand-in computes nothing (the results are checked on the GPU)."""
    import os
    import subprocess
    import sys

    from support.paths import REPO

    lib = build(tmp_path_factory.mktemp("fakecuda"))
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), _cuda_driver.LIBRARY_ENV: str(lib)}
    env["FAKE_LIBCUDA_SM"] = "90"  # the cubin fixtures hold SASS for sm_90
    script = str(REPO / "scripts" / "gpu_check.py")
    proc = subprocess.run(
        [sys.executable, script, str(fixtures)], env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "Traceback" not in out, out
    assert "FAILED" not in out, out
    steps = (
        "device: Fake GPU", "add_one.ptx + meta", "mobilenet_cuda (graph)",
        "relay019_vm_ptx.so (VM)", "RPC relay019_ptx.so", "run(): wall",
        "profile (debug executor)", "C launcher off", "dense_relu call",
        "driver cuMemcpyHtoD", "gpu-check: FAIL",
    )  # fmt: skip
    for step in steps:
        assert step in out, out
