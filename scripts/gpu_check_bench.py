"""``make gpu-check``'s timings on the GPU (scripts/gpu_check.py runs them; bench/README.md
``## cuda_gpu`` explains the method and holds the figures)."""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tvmrt import runtime
from tvmrt.contrib import graph_executor
from tvmrt.runtime.backends.cuda import CUDADeviceAPI
from tvmrt.runtime.device_api import find_storage, get_device_api
from tvmrt.runtime.graph_executor.debug import create_debug_executor
from tvmrt.runtime.loaders import cuda_launch
from tvmrt.runtime.loaders.cuda import kernel_timer


def graph_module(folder: Path) -> graph_executor.GraphModule:
    lib = runtime.load_module(str(folder / "cnn_ptx.so"))
    return graph_executor.GraphModule(lib["default"](runtime.cuda()))


def mobilenet_module(folder: Path) -> Any:
    """The MobileNet-class folder's graph executor on cuda(0) (TVM's GraphModule face)."""
    from tvmrt.artifact import find_artifact, load_artifact

    return load_artifact(find_artifact(folder / "mobilenet_cuda"), runtime.cuda()).executor


def _wall(work: Callable[[], object], runs: int) -> float:
    """us per ``work()`` (a run, a call), back to back after 20 untimed, the stream
    synchronised before and at the end."""
    dev = runtime.cuda()
    for _ in range(20):
        work()
    dev.sync()
    start = time.perf_counter()
    for _ in range(runs):
        work()
    dev.sync()
    return (time.perf_counter() - start) / runs * 1e6


def _gpu_times(
    api: CUDADeviceAPI, work: Callable[[], object], runs: int = 50
) -> tuple[float, float, int]:
    """``work()`` queued ``runs`` times, each time behind a held stream (nothing runs on the
    GPU until all of it is queued, so no host gap lands inside its events). Returns, per
    call: its span on the GPU in us (an event pair around it, its kernels and the GPU's own
    gaps between them); the sum of its kernels' times in us (an event pair around each
    launch, which adds the events' own time, about 2 us a kernel on an H200); the number of
    kernels it launches."""
    dev = runtime.cuda()
    drv = api.driver
    stream = ctypes.c_void_p(api.stream(dev))
    span = 0.0
    for _ in range(runs):
        start, end, ms = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_float()
        drv.call("cuEventCreate", ctypes.byref(start), 0)
        drv.call("cuEventCreate", ctypes.byref(end), 0)
        with api.hold_stream(dev):
            drv.call("cuEventRecord", start, stream)
            work()
            drv.call("cuEventRecord", end, stream)
        drv.call("cuEventElapsedTime", ctypes.byref(ms), start, end)
        span += ms.value
        for event in (start, end):
            drv.call("cuEventDestroy_v2", event)
    with kernel_timer() as timer:
        for _ in range(runs):
            with api.hold_stream(dev):
                work()
    kernels = sum(ms for _, ms in timer.times) * 1e3
    return span / runs * 1e3, kernels / runs, len(timer.times) // runs


def _debug(folder: Path, name: str) -> Any:
    """The debug executor (TVM's ``GraphExecutorDebug`` module) of a CUDA fixture."""
    dev = runtime.cuda()
    if name == "cnn":
        return runtime.load_module(str(folder / "cnn_ptx.so"))["debug_create"]("default", dev)
    root = folder / "mobilenet_cuda"
    lib = runtime.load_module(str(root / "deploy.so"))
    debug = create_debug_executor((root / "deploy.json").read_text(), lib, dev)
    debug["load_params"]((root / "deploy.params").read_bytes())
    return debug


def _bench_graph(
    label: str, module: Any, x: np.ndarray[Any, Any], api: CUDADeviceAPI, debug: Any
) -> None:
    """run() wall time back to back vs its time on the GPU (see _gpu_times); the debug
    executor's profile of one run (its nodes' event times) against the same; and the wall
    time with every launch through Python (the C launcher off), paired."""
    module.set_input("x", x)
    wall = _wall(module.run, 300)
    span, kernels, count = _gpu_times(api, module.run)
    print(f"  {label} run(): wall {wall:.1f} us/run (back to back); on the GPU {span:.1f} us "
          f"(events around the run); overhead {wall - span:.1f} us = "
          f"{max(wall - span, 0) / wall:.1%} of the run")  # fmt: skip
    print(f"    its {count} kernels by events around each: {kernels:.1f} us in all; wall - "
          f"that sum: {wall - kernels:.1f} us")  # fmt: skip
    debug["set_input"]("x", runtime.array(x))
    debug["profile"](None)  # a first profile loads what the debug executor's module needs
    calls = debug["profile"](None).calls
    nodes = sum(float(call["Duration (us)"].microseconds) for call in calls)
    print(f"    profile (debug executor): {len(calls)} calls, {nodes:.1f} us in all "
          f"(events around each node's kernels, stream held)")  # fmt: skip
    if cuda_launch.enable(False):
        try:
            python_wall = _wall(module.run, 300)
        finally:
            cuda_launch.enable(True)
        again = _wall(module.run, 300)
        print(f"    with Python launches (C launcher off): wall {python_wall:.1f} us/run; with "
              f"it on again: {again:.1f} us/run")  # fmt: skip


def bench(folder: Path, api: CUDADeviceAPI) -> None:
    dev = runtime.cuda()
    x = np.load(folder / "cnn_golden.npz")["x"]
    _bench_graph("cnn graph", graph_module(folder), x, api, _debug(folder, "cnn"))
    if (folder / "mobilenet_cuda").exists():
        x = np.load(folder / "mobilenet_golden.npz")["x"]
        _bench_graph(
            "mobilenet_cuda graph", mobilenet_module(folder), x, api, _debug(folder, "mobilenet")
        )
    lib = runtime.load_module(str(folder / "dense_relu_ptx.so"))
    golden = np.load(folder / "dense_relu_golden.npz")
    x, w = (runtime.array(golden[k], dev) for k in ("arr_0", "arr_1"))
    out = runtime.empty((8, 32), "float32", dev)
    func = lib["dense_relu"]
    runs = 2000
    wall = _wall(lambda: func(x, w, out), runs)
    span, kernel, _ = _gpu_times(api, lambda: func(x, w, out), runs=200)
    print(f"  dense_relu call: wall {wall:.1f} us/call (back to back, {runs} calls); on the GPU "
          f"{span:.1f} us (kernel {kernel:.1f} us by events around it); overhead "
          f"{wall - span:.1f} us = {max(wall - span, 0) / wall:.0%} of the call (one small "
          "kernel: the host's cost of a call from Python shows)")  # fmt: skip
    _bench_copies(api)


def _bench_copies(api: CUDADeviceAPI) -> None:
    """host->device GB/s of one 64 MiB pageable buffer: tvmrt's copy vs the driver's own
    calls on the same buffer, in interleaved rounds (the median of each)."""
    dev = runtime.cuda()
    nbytes = 64 << 20
    host = np.ones(nbytes, np.uint8)
    arr = runtime.empty((nbytes,), "uint8", dev)
    storage = find_storage(2, arr.data_ptr)
    assert storage is not None
    dev_api = get_device_api(dev)
    drv = api.driver

    def copy_async() -> None:
        drv.call("cuMemcpyHtoDAsync_v2", arr.data_ptr, host.ctypes.data, nbytes, None)
        drv.call("cuStreamSynchronize", None)

    copies: dict[str, Callable[[], object]] = {
        "tvmrt copy_from_host": lambda: dev_api.copy_from_host(storage, 0, host),
        "driver cuMemcpyHtoD": lambda: drv.call(
            "cuMemcpyHtoD_v2", arr.data_ptr, host.ctypes.data, nbytes
        ),
        "driver HtoDAsync + sync": copy_async,
    }
    rates: dict[str, list[float]] = {label: [] for label in copies}
    for round_ in range(7):
        order = list(copies) if round_ % 2 == 0 else list(reversed(copies))
        for label in order:
            copies[label]()
            start = time.perf_counter()
            for _ in range(5):
                copies[label]()
            dev.sync()
            rates[label].append(nbytes * 5 / (time.perf_counter() - start) / 1e9)
    for label, values in rates.items():
        print(
            f"  host->device 64 MiB, {label:24s}: {float(np.median(values)):.2f} GB/s "
            f"(median of {len(values)} interleaved rounds)"
        )
