"""tvmrt's own time per CUDA launch from host code, against the libcuda stand-in.

TVM 0.27's host code for ``add_one`` (``build/cuda-fixtures/add_one_ptx.so``, made by
scripts/make_cuda_fixtures.py) checks its arguments, calls ``__tvm_set_device`` and the
kernel through the function environment (``TVMBackendGetFuncFromEnv`` / ``TVMFuncCall``),
and the kernel is launched with ``cuLaunchKernel``. The driver is the recording stand-in
(tests/support/fake_libcuda.c, compiled here), which logs and returns, so the time is
tvmrt's and the stand-in's, no GPU's. Paired, in the same process, interleaved:

* the host call as tvmrt makes it: the C launcher (``_native/cuda_launch.c``) launches and
  ``__tvm_set_device`` is C too;
* the same with the C launches turned off (``cuda_launch.enable(False)``): every launch and
  ``__tvm_set_device`` goes through Python, as before the C launcher;
* the bare ``cuLaunchKernel`` through ctypes with the same function, grid, block and
  arguments (what any Python caller pays).

Reported: microseconds per call, and overhead = call - bare. ``--model mobilenet`` times a
whole graph ``run()`` of ``build/cuda-fixtures/mobilenet_cuda`` instead (30 launches), C
launches on and off, with the launches and Python launches per run.

    python bench/cuda_dispatch.py [--calls 2000] [--repeat 15] [--model add_one|mobilenet]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build_stand_in(out: Path) -> Path:
    """Compile tests/support/fake_libcuda.c into ``out``."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise SystemExit("cuda_dispatch: needs a C compiler for the libcuda stand-in")
    lib = out / "libfakecuda.so"
    src = ROOT / "tests" / "support" / "fake_libcuda.c"
    subprocess.run([cc, "-std=c11", "-O2", "-shared", "-fPIC", "-o", str(lib), str(src),
                    "-lpthread"], check=True)  # fmt: skip
    return lib


def _median_us(times: list[int], n: int) -> float:
    return statistics.median(times) / n / 1e3


def _mobilenet(args: argparse.Namespace, fake: Path) -> None:
    import numpy as np

    from tvmrt import runtime
    from tvmrt.artifact import find_artifact, load_artifact
    from tvmrt.runtime.loaders import cuda_launch
    from tvmrt.runtime.loaders.cuda import CUDAKernel

    folder = args.fixtures / "mobilenet_cuda"
    if not folder.exists():
        raise SystemExit(f"cuda_dispatch: {folder} is missing (scripts/make_cuda_fixtures.py)")
    module = load_artifact(find_artifact(folder), runtime.cuda()).executor
    module.set_input("x", np.load(args.fixtures / "mobilenet_golden.npz")["x"])
    module.run()  # loads the image, binds every launcher
    stand_in = ctypes.CDLL(str(fake))
    stand_in.fake_log.restype = ctypes.c_char_p
    python_launches = [0]
    launch = CUDAKernel.launch

    def counting(self: CUDAKernel, *a: object) -> None:
        python_launches[0] += 1
        launch(self, *a)  # type: ignore[arg-type]

    CUDAKernel.launch = counting  # type: ignore[method-assign]
    n = max(args.calls // 30, 1)
    c_times, py_times, counts = [], [], {}
    for _ in range(args.repeat):
        for on, times in ((True, c_times), (False, py_times)):
            cuda_launch.enable(on)
            stand_in.fake_reset()
            python_launches[0] = 0
            start = time.perf_counter_ns()
            for _ in range(n):
                module.run()
            times.append(time.perf_counter_ns() - start)
            log = (stand_in.fake_log() or b"").decode().splitlines()
            counts[on] = (sum(line.startswith("cuLaunch") for line in log) / n,
                          python_launches[0] / n)  # fmt: skip
    cuda_launch.enable(True)
    c_us, py_us = _median_us(c_times, n), _median_us(py_times, n)
    print(
        f"{'MobileNet run() (graph executor)':<44}{'us/run':>10}{'launches':>10}{'in Python':>10}"
    )
    print(
        f"{'C launches (tvmrt)':<44}{c_us:>10.1f}{counts[True][0]:>10.0f}{counts[True][1]:>10.0f}"
    )
    print(f"{'C launches off (every launch in Python)':<44}{py_us:>10.1f}{counts[False][0]:>10.0f}"
          f"{counts[False][1]:>10.0f}")  # fmt: skip
    print(f"saved per run: {py_us - c_us:.1f} us ({(py_us - c_us) / counts[True][0]:.2f} us per "
          f"launch); C / Python: {c_us / py_us:.2f}")  # fmt: skip


def main() -> None:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--model", choices=("add_one", "mobilenet"), default="add_one")
    parser.add_argument("--fixtures", type=Path, default=ROOT / "build" / "cuda-fixtures")
    args = parser.parse_args()
    lib_path = args.fixtures / "add_one_ptx.so"
    if not lib_path.exists():
        raise SystemExit(f"cuda_dispatch: {lib_path} is missing (scripts/make_cuda_fixtures.py)")
    tmp = Path(tempfile.mkdtemp())
    fake = build_stand_in(tmp)
    os.environ["TVMRT_LIBCUDA"] = str(fake)
    if args.model == "mobilenet":
        _mobilenet(args, fake)
        return

    from tvmrt import runtime
    from tvmrt.runtime.loaders import cuda_launch
    from tvmrt.runtime.loaders.cuda import CUDAModule

    lib = runtime.load_module(str(lib_path))
    (kernels,) = lib.imported_modules
    assert isinstance(kernels, CUDAModule)
    a = runtime.empty((1000,), "float32", runtime.cuda())
    b = runtime.empty((1000,), "float32", runtime.cuda())
    host = lib["add_one"]
    host(a, b)  # loads the image, binds the launcher
    stand_in = ctypes.CDLL(str(fake))

    # the reference: the same launch straight through ctypes
    api = kernels.api(runtime.cuda(), "add_one_kernel")
    func = ctypes.c_void_p(kernels.cu_function(runtime.cuda(), api, "add_one_kernel"))
    slots = [ctypes.c_uint64(a.data_ptr), ctypes.c_uint64(b.data_ptr), ctypes.c_int32(1000)]
    pointers = [ctypes.cast(ctypes.pointer(s), ctypes.c_void_p) for s in slots]
    params = (ctypes.c_void_p * 3)(*pointers)
    launch = api.driver.raw("cuLaunchKernel")
    n = args.calls

    def tvmrt_calls() -> None:
        for _ in range(n):
            host(a, b)

    def bare_calls() -> None:
        for _ in range(n):
            launch(func, 1, 1, 1, 1024, 1, 1, 0, None, params, None)

    c_times, py_times, bare_times = [], [], []
    for _ in range(args.repeat):
        for on, times in ((True, c_times), (False, py_times)):
            cuda_launch.enable(on)
            stand_in.fake_reset()  # the stand-in's log is bounded: keep it from filling
            start = time.perf_counter_ns()
            tvmrt_calls()
            times.append(time.perf_counter_ns() - start)
        stand_in.fake_reset()
        start = time.perf_counter_ns()
        bare_calls()
        bare_times.append(time.perf_counter_ns() - start)
    cuda_launch.enable(True)
    c_us, py_us = _median_us(c_times, n), _median_us(py_times, n)
    bare_us = _median_us(bare_times, n)
    print(f"{'path':<44}{'us/call':>10}{'overhead':>10}")
    print(f"{'host call, C launcher (tvmrt)':<44}{c_us:>10.2f}{c_us - bare_us:>10.2f}")
    print(
        f"{'host call, C launches off (Python launch)':<44}{py_us:>10.2f}{py_us - bare_us:>10.2f}"
    )
    print(f"{'bare cuLaunchKernel through ctypes':<44}{bare_us:>10.2f}")
    print(f"overhead ratio C / Python: {(c_us - bare_us) / (py_us - bare_us):.2f}")


if __name__ == "__main__":
    main()
