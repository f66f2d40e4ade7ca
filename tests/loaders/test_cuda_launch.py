"""The C launcher of CUDA kernels (``_native/cuda_launch.c``) against the libcuda stand-in.

Host code calls a CUDA kernel through ``TVMFuncCall``; with the native backend the handle it
gets is a C launcher, which launches without Python once warm. These tests run every CUDA
fixture (TVM's own host code) with the C launches on and off (off: every launch runs the
Python launch, :func:`cuda_launch.enable`) and compare the stand-in's logs in its exact mode
(each parameter's bytes, the stream's address); they count the Python launches to show the
warm C path never enters them, and check what must still go through Python (the profiler's
timer, the cold cases) gives the same launches and errors.
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from support.cuda_fixtures import cuda_fixtures
from support.fake_cuda import FakeLog, build, stand_in_backend
from tvmrt import runtime
from tvmrt.runtime import kernel_services
from tvmrt.runtime._ctypes_api import TVMValue
from tvmrt.runtime.launch import FunctionInfo
from tvmrt.runtime.loaders import cuda_launch
from tvmrt.runtime.loaders.cuda import CUDAKernel, CUDAModule, kernel_timer
from tvmrt.runtime.loaders.opencl import current_device, set_device

device_table = importlib.import_module("tvmrt.runtime.device")
CUDA = int(runtime.DLDeviceType.kDLCUDA)
HANDLE, INT, FLOAT, NULL = 3, 0, 2, 4  # TVM's type codes of the values host code passes


@pytest.fixture(scope="module")
def fake_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("fakecuda"))


@pytest.fixture
def fake(fake_lib: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLog]:
    if not cuda_launch.enable(True):
        pytest.skip("the native backend (with the C launcher) is not built")
    with stand_in_backend(fake_lib, monkeypatch, sm=90) as log:
        log.exact()
        try:
            yield log
        finally:
            log.exact(False)
            cuda_launch.enable(True)
            set_device(CUDA, 0)


@pytest.fixture
def python_launches(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the kernels the Python launch (CUDAKernel.launch) ran, in order."""
    calls: list[str] = []
    launch = CUDAKernel.launch

    def counting(self: CUDAKernel, args: Any, work: Any) -> None:
        calls.append(self.name)
        launch(self, args, work)

    monkeypatch.setattr(CUDAKernel, "launch", counting)
    return calls


def _launches(fake: FakeLog, run: Callable[[], object]) -> list[str]:
    fake.reset()
    run()
    return [line for line in fake.lines() if line.startswith("cuLaunch")]


def _graph(lib_path: Path, golden: Path) -> Callable[[], object]:
    from tvmrt.contrib import graph_executor

    module = graph_executor.GraphModule(
        runtime.load_module(str(lib_path))["default"](runtime.cuda())
    )
    module.set_input("x", np.load(golden)["x"])
    return module.run


def _mobilenet(folder: Path) -> Callable[[], object]:
    from tvmrt.artifact import find_artifact, load_artifact

    module = load_artifact(find_artifact(folder / "mobilenet_cuda"), runtime.cuda()).executor
    module.set_input("x", np.load(folder / "mobilenet_golden.npz")["x"])
    return module.run  # type: ignore[no-any-return]


def _host_call(lib_path: Path, name: str, *shapes: tuple[int, ...]) -> Callable[[], object]:
    lib = runtime.load_module(str(lib_path))
    arrays = [runtime.array(np.ones(s, "float32"), runtime.cuda()) for s in shapes]
    return lambda: lib[name](*arrays)


def _runner(folder: Path, fixture: str) -> Callable[[], object]:
    if fixture.startswith("add_one_"):
        return _host_call(folder / f"{fixture}.so", "add_one", (1000,), (1000,))
    if fixture.startswith("dense_relu_"):
        return _host_call(folder / f"{fixture}.so", "dense_relu", (8, 64), (32, 64), (8, 32))
    if fixture == "mobilenet_cuda":
        return _mobilenet(folder)
    golden = "cnn_golden.npz" if fixture == "cnn_ptx" else "relay019_golden.npz"
    return _graph(folder / f"{fixture}.so", folder / golden)


FIXTURES = {  # fixture -> launches per call
    **{f"add_one_{fmt}": 1 for fmt in ("ptx", "cubin", "fatbin")},
    **{f"dense_relu_{fmt}": 1 for fmt in ("ptx", "cubin", "fatbin")},
    "cnn_ptx": 3,
    "relay019_ptx": 2,
    "mobilenet_cuda": 0,  # counted below: every kernel of the graph
}


@pytest.mark.parametrize("fixture", sorted(FIXTURES))
def test_c_launches_equal_python_launches(
    fake: FakeLog, python_launches: list[str], fixture: str
) -> None:
    folder = cuda_fixtures()
    if not (folder / (fixture if fixture == "mobilenet_cuda" else f"{fixture}.so")).exists():
        pytest.skip(f"{fixture} was not made (scripts/make_cuda_fixtures.py)")
    run = _runner(folder, fixture)
    run()  # loads the images; the first launch of each kernel binds its launcher (Python)
    python_launches.clear()
    in_c = _launches(fake, run)
    assert python_launches == []  # warm: not one launch entered Python
    cuda_launch.enable(False)
    in_python = _launches(fake, run)
    assert len(python_launches) == len(in_python)
    assert in_c == in_python  # grid, block, smem, stream and every argument's bytes
    assert len(in_c) == (FIXTURES[fixture] or len(in_c))
    assert in_c
    if fixture.endswith("ptx") or fixture == "mobilenet_cuda":  # sizes known from the PTX
        assert all(line.split("args=")[1].strip() for line in in_c)


def test_mobilenet_runs_its_thirty_kernels_without_python(
    fake: FakeLog, python_launches: list[str]
) -> None:
    folder = cuda_fixtures()
    if not (folder / "mobilenet_cuda").exists():
        pytest.skip("mobilenet_cuda was not made (scripts/make_cuda_fixtures.py)")
    run = _mobilenet(folder)
    run()
    first = list(python_launches)
    python_launches.clear()
    launches = _launches(fake, run)
    # each kernel entered Python once, on its first launch (which binds its launcher)
    assert len(first) == len(set(first)) == len({line.split()[1] for line in launches})
    assert len(launches) == 30
    assert python_launches == []


PTX = """//
.version 8.0
.target sm_90
.address_size 64

.visible .entry mix_kernel(
\t.param .u64 mix_kernel_param_0,
\t.param .u32 mix_kernel_param_1,
\t.param .f32 mix_kernel_param_2,
\t.param .u64 mix_kernel_param_3
)
{
\tret;
}
"""
T = runtime.DataType
MIX = FunctionInfo(
    "mix_kernel",
    (T("handle"), T("int32"), T("float32"), T("int64")),
    ("blockIdx.x", "threadIdx.x", "threadIdx.x", "tir.use_dyn_shared_memory"),
)


def _env_call(handle: int, values: list[tuple[object, int]]) -> str:
    """Call ``handle`` as host code does (TVMFuncCall, TVM's type codes); the error or ""."""
    n = len(values)
    args, codes = (TVMValue * max(n, 1))(), (ctypes.c_int * max(n, 1))()
    for i, (value, code) in enumerate(values):
        codes[i] = code
        if code == FLOAT:
            args[i].v_float64 = float(value)  # type: ignore[arg-type]
        elif code == INT:
            args[i].v_int64 = int(value)  # type: ignore[call-overload]
        elif code == HANDLE:
            args[i].v_handle = int(value)  # type: ignore[call-overload]
    call = kernel_services.native_library().TVMFuncCall
    call.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                     ctypes.c_void_p, ctypes.c_void_p]  # fmt: skip
    ret, ret_code = TVMValue(), ctypes.c_int(0)
    kernel_services.clear_last_error()
    rc = call(handle, args, codes, n, ctypes.byref(ret), ctypes.byref(ret_code))
    return kernel_services.take_last_error() if rc else ""


CASES = {
    "plain": [(-5, INT), (1.5, FLOAT), (2**40 + 7, INT), (4, INT), (64, INT), (128, INT), (0, INT)],
    "masked ints": [(2**33 + 9, INT), (-0.25, FLOAT), (-1, INT), (1, INT), (1, INT), (1, INT), (0, INT)],
    "dyn smem, extents <= 0": [(7, INT), (3e38, FLOAT), (0, INT), (0, INT), (-3, INT), (32, INT), (1000, INT)],
    "float beyond float32": [(7, INT), (1e300, FLOAT), (0, INT), (2, INT), (2, INT), (2, INT), (0, INT)],
    "48 KiB of dyn smem": [(7, INT), (1.0, FLOAT), (0, INT), (2, INT), (2, INT), (2, INT), (64 * 1024, INT)],
    "int passed for a float": [(7, INT), (3, INT), (0, INT), (2, INT), (2, INT), (2, INT), (0, INT)],
}  # fmt: skip
HOT = {"plain", "masked ints", "dyn smem, extents <= 0"}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("null", [False, True])
def test_packing_equals_the_python_launch(
    fake: FakeLog, python_launches: list[str], case: str, null: bool
) -> None:
    mod = CUDAModule("ptx", PTX.encode(), {"mix_kernel": MIX}, "test module")
    kernel = mod["mix_kernel"]
    assert isinstance(kernel, CUDAKernel)
    assert kernel.native_handle
    buf = runtime.empty((64,), "float32", runtime.cuda())
    first = (0, NULL) if null else (buf.data_ptr, HANDLE)
    warm = [first, (1, INT), (1.0, FLOAT), (1, INT), (1, INT), (1, INT), (1, INT), (0, INT)]
    assert _env_call(kernel.native_handle, warm) == ""  # binds the launcher (Python)
    python_launches.clear()
    fake.reset()
    assert _env_call(kernel.native_handle, [first, *CASES[case]]) == ""
    in_c = [line for line in fake.lines() if line.startswith("cuLaunch")]
    assert python_launches == ([] if case in HOT else ["mix_kernel"])
    cuda_launch.enable(False)
    fake.reset()
    assert _env_call(kernel.native_handle, [first, *CASES[case]]) == ""
    in_python = [line for line in fake.lines() if line.startswith("cuLaunch")]
    assert len(in_c) == 1
    assert in_c == in_python


def test_cooperative_launch_in_c(fake: FakeLog, python_launches: list[str]) -> None:
    info = FunctionInfo(
        MIX.name, MIX.arg_types, (*MIX.launch_param_tags, "tir.use_cooperative_launch")
    )
    mod = CUDAModule("ptx", PTX.encode(), {"mix_kernel": info}, "test module")
    handle = mod["mix_kernel"].native_handle
    assert handle
    args = [(0, NULL), (3, INT), (0.5, FLOAT), (9, INT), (2, INT), (8, INT), (16, INT), (64, INT)]
    assert _env_call(handle, args) == ""  # binds the launcher (Python)
    python_launches.clear()
    launches = []
    for on in (True, False):
        cuda_launch.enable(on)
        fake.reset()
        assert _env_call(handle, args) == ""
        launches.append([line for line in fake.lines() if line.startswith("cuLaunch")])
    assert python_launches == ["mix_kernel"]  # the second call only: C launches off
    assert launches[0] == launches[1]
    assert launches[0][0].startswith(
        "cuLaunchCooperativeKernel mix_kernel grid=2,1,1 block=16,1,1 smem=64 "
    )


def test_a_driver_error_gives_the_python_text(fake: FakeLog, python_launches: list[str]) -> None:
    mod = CUDAModule("ptx", PTX.encode(), {"mix_kernel": MIX}, "test module")
    kernel = mod["mix_kernel"]
    buf = runtime.empty((64,), "float32", runtime.cuda())
    head = [(buf.data_ptr, HANDLE), (1, INT), (1.0, FLOAT), (1, INT)]
    assert _env_call(kernel.native_handle, [*head, (1, INT), (1, INT), (1, INT), (0, INT)]) == ""
    python_launches.clear()
    bad = [*head, (3, INT), (1, INT), (2048, INT), (16, INT)]  # 2048 threads: the driver refuses
    in_c = _env_call(kernel.native_handle, bad)
    assert python_launches == []
    cuda_launch.enable(False)
    in_python = _env_call(kernel.native_handle, bad)
    assert python_launches == ["mix_kernel"]
    assert (
        in_c
        == in_python
        == (
            "KernelError: launching CUDA kernel 'mix_kernel' on cuda(0) with grid (3, 1, 1), block "
            "(2048, 1, 1) and 16 bytes of dynamic shared memory failed: CUDA: cuLaunchKernel failed: "
            "CUDA_ERROR_INVALID_VALUE (invalid argument)"
        )
    )


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ([(0, NULL), (1, INT), (1.0, FLOAT), (1, INT), (1, INT)], "takes 4 arguments and 4 launch"),
        ([(1.5, FLOAT), (1, INT), (1.0, FLOAT), (1, INT), (1, INT), (1, INT), (1, INT), (0, INT)],
         "argument 0 must be a handle value, got 1.5"),
    ],
)  # fmt: skip
def test_bad_calls_fail_as_in_python(
    fake: FakeLog, values: list[tuple[object, int]], message: str
) -> None:
    mod = CUDAModule("ptx", PTX.encode(), {"mix_kernel": MIX}, "test module")
    handle = mod["mix_kernel"].native_handle
    assert handle
    warm = [(0, NULL), (1, INT), (1.0, FLOAT), (1, INT), (1, INT), (1, INT), (1, INT), (0, INT)]
    assert _env_call(handle, warm) == ""
    fake.reset()
    in_c = _env_call(handle, values)
    cuda_launch.enable(False)
    in_python = _env_call(handle, values)
    assert in_c == in_python
    assert in_c.startswith("KernelError: ")
    assert message in in_c
    assert not [line for line in fake.lines() if line.startswith("cuLaunch")]


def test_a_released_kernel_fails_by_name(fake: FakeLog) -> None:
    mod = CUDAModule("ptx", PTX.encode(), {"mix_kernel": MIX}, "test module")
    handle = mod["mix_kernel"].native_handle
    assert handle
    del mod
    gc.collect()
    args = [(0, NULL), (1, INT), (1.0, FLOAT), (1, INT), (1, INT), (1, INT), (1, INT), (0, INT)]
    assert _env_call(handle, args) == (
        "KernelError: CUDA kernel 'mix_kernel' was released with its module"
    )


def test_profiling_times_every_kernel_through_python(
    fake: FakeLog, python_launches: list[str]
) -> None:
    folder = cuda_fixtures()
    run = _graph(folder / "cnn_ptx.so", folder / "cnn_golden.npz")
    run()
    python_launches.clear()
    fake.reset()
    with kernel_timer() as timer:
        run()
    names = ["fused_conv2d_relu_kernel", "fused_matmul_add_kernel", "softmax_kernel"]
    assert [name for name, _ in timer.times] == names == python_launches
    assert all(ms == 0.25 for _, ms in timer.times)  # the stand-in's event time
    assert sum(line.startswith("cuEventRecord") for line in fake.lines()) == 6
    python_launches.clear()
    run()  # the timer is gone: C again
    assert python_launches == []


def test_two_threads_launch_on_their_own_streams(fake: FakeLog, python_launches: list[str]) -> None:
    folder = cuda_fixtures()
    run = _host_call(folder / "add_one_ptx.so", "add_one", (1000,), (1000,))
    run()
    api = device_table.get_device_api(runtime.cuda())
    streams: dict[str, int] = {}
    python_launches.clear()
    fake.reset()

    def worker(name: str) -> None:
        stream = api.create_stream(runtime.cuda())
        api.set_stream(runtime.cuda(), stream)
        streams[name] = stream
        for _ in range(5):
            run()

    threads = [threading.Thread(target=worker, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    launches = [line for line in fake.lines() if line.startswith("cuLaunch")]
    assert python_launches == []
    assert len(launches) == 10
    assert streams["a"] != streams["b"]
    for stream in streams.values():
        assert sum(f"stream={stream:#x} " in line for line in launches) == 5
    for stream in streams.values():
        api.free_stream(runtime.cuda(), stream)


def test_set_device_from_host_code_is_seen_by_python(
    fake: FakeLog, python_launches: list[str]
) -> None:
    fake.config(count=2, sm=90)
    folder = cuda_fixtures()
    run = _host_call(folder / "add_one_ptx.so", "add_one", (1000,), (1000,))
    run()
    set_device(CUDA, 1)
    assert current_device(CUDA) == runtime.cuda(1)
    python_launches.clear()
    run()  # host code: __tvm_set_device(kDLCUDA, 0) in C, then the kernel
    assert current_device(CUDA) == runtime.cuda(0)
    assert python_launches == []
