"""Python overhead of one host call into a CUDA kernel, against the libcuda stand-in.

TVM 0.27's host code for ``add_one`` (``build/cuda-fixtures/add_one_ptx.so``, made by
scripts/make_cuda_fixtures.py) checks its arguments, calls ``__tvm_set_device`` and the
kernel through the function environment (``TVMBackendGetFuncFromEnv`` / ``TVMFuncCall``,
answered by ``runtime/kernel_callbacks.py``), and the kernel calls ``cuLaunchKernel``. The
driver is the recording stand-in (tests/support/fake_libcuda.c, compiled here), which logs
and returns, so the time is tvmrt's and the stand-in's, no GPU's. Paired reference, in the
same process, interleaved: the same ``cuLaunchKernel`` called straight through ctypes with
the same function, grid, block and arguments (what any Python caller pays), and the host
call with the function environment's kept answers disabled (every call resolves its kernel
and ``__tvm_set_device`` by name, as before they were kept). Reported:
microseconds per call for each, the difference (tvmrt's overhead per host call: the Python
call into the host function, the function environment's callbacks for ``__tvm_set_device``
and the kernel, the launch's Python) and how many name lookups a warm call still makes.

    python bench/cuda_dispatch.py [--calls 2000] [--repeat 15] [--fixtures build/cuda-fixtures]
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


def main() -> None:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--fixtures", type=Path, default=ROOT / "build" / "cuda-fixtures")
    args = parser.parse_args()
    lib_path = args.fixtures / "add_one_ptx.so"
    if not lib_path.exists():
        raise SystemExit(f"cuda_dispatch: {lib_path} is missing (scripts/make_cuda_fixtures.py)")
    tmp = Path(tempfile.mkdtemp())
    fake = build_stand_in(tmp)
    os.environ["TVMRT_LIBCUDA"] = str(fake)

    from tvmrt import runtime
    from tvmrt.runtime import kernel_callbacks
    from tvmrt.runtime.loaders.cuda import CUDAModule

    lib = runtime.load_module(str(lib_path))
    (kernels,) = lib.imported_modules
    assert isinstance(kernels, CUDAModule)
    a = runtime.empty((1000,), "float32", runtime.cuda())
    b = runtime.empty((1000,), "float32", runtime.cuda())
    host = lib["add_one"]
    host(a, b)  # loads the image, resolves the names once
    stand_in = ctypes.CDLL(str(fake))
    stand_in.fake_log.restype = ctypes.c_char_p

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

    lookups = [0]
    original = kernel_callbacks._lookup

    def counting(token: int, name: str) -> object:
        lookups[0] += 1
        return original(token, name)

    class NoKeep(dict[int, object]):
        """The callbacks without kept answers: every call resolves its name (as before)."""

        def __setitem__(self, key: int, value: object) -> None:
            pass

    kept = kernel_callbacks._resolved
    host_times, uncached_times, bare_times = [], [], []
    for _ in range(args.repeat):
        stand_in.fake_reset()  # the stand-in's log is bounded: keep it from filling
        start = time.perf_counter_ns()
        tvmrt_calls()
        host_times.append(time.perf_counter_ns() - start)
        kernel_callbacks._resolved = NoKeep()  # type: ignore[assignment]
        stand_in.fake_reset()
        start = time.perf_counter_ns()
        tvmrt_calls()
        uncached_times.append(time.perf_counter_ns() - start)
        kernel_callbacks._resolved = kept
        stand_in.fake_reset()
        start = time.perf_counter_ns()
        bare_calls()
        bare_times.append(time.perf_counter_ns() - start)
    kernel_callbacks._lookup = counting  # type: ignore[assignment]
    stand_in.fake_reset()
    host(a, b)
    kernel_callbacks._lookup = original  # type: ignore[assignment]
    host_us = statistics.median(host_times) / n / 1e3
    uncached_us = statistics.median(uncached_times) / n / 1e3
    bare_us = statistics.median(bare_times) / n / 1e3
    print(f"{'path':<44}{'us/call':>10}{'overhead':>10}")
    print(
        f"{'host call, names resolved once (tvmrt)':<44}{host_us:>10.2f}{host_us - bare_us:>10.2f}"
    )
    print(f"{'host call, names resolved on every call':<44}{uncached_us:>10.2f}"
          f"{uncached_us - bare_us:>10.2f}")  # fmt: skip
    print(f"{'bare cuLaunchKernel through ctypes':<44}{bare_us:>10.2f}")
    print(f"overhead ratio resolved-once / every-call: "
          f"{(host_us - bare_us) / (uncached_us - bare_us):.2f}")  # fmt: skip
    print(f"name lookups (kernel_callbacks._lookup) per host call, once warm: {lookups[0]}")


if __name__ == "__main__":
    main()
