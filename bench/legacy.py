"""Latency of real legacy models (MobileNet v1/v2) and the share of time spent outside kernels.

Method
------
For each model the graph executor is created as a user would (``load_module`` +
``graph_executor.create`` + ``load_params``), the input is set once, and after a warm-up
the script alternates, ``--repeat`` times:

* **run**: one ``GraphModule.run()``, timed with ``perf_counter_ns``;
* **native replay**: the executor's own prepared kernel calls (``executor.node_calls``:
  the same functions, argument arrays and buffers, in graph order) called back to back
  from C by ``tvmrt_time_call_sequence`` in the native backend, with no interpreter in
  between. This is the kernels' time including the backend services they call
  (workspace, parallel launch), timed in C.

Alternating means machine noise hits both alike. Reported (medians):

* ``run``: latency of one inference;
* ``dispatch``: ``run - native replay``: executor loop, ctypes calls, error checks;
* ``backend``: an upper-bound estimate of the time kernels spend inside backend services,
  = workspace alloc/free pairs per inference x cost of one pair + parallel launches per
  inference x cost of one empty launch (both costs measured in C by the backend itself:
  ``tvmrt_time_workspace``, ``tvmrt_time_empty_launch``; counts from ``kernel_services.stats()``);
* ``outside`` = ``dispatch + backend``, and its share of ``run`` (target: < 3 %).

Usage::

    .venv/bin/python bench/legacy.py [--repeat 200] [--warmup 20] [--threads N]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from tvmrt import runtime
from tvmrt.contrib import graph_executor
from tvmrt.runtime import kernel_services
from tvmrt.runtime.loaders.library import native_call_parts

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(os.environ.get("TVMRT_ARTIFACTS", REPO.parent / "shared" / "artifacts"))
MODELS = ("mobilenet_v1", "mobilenet_v2")


class Replay:
    """The executor's kernel calls, replayed from C."""

    def __init__(self, module: graph_executor.GraphModule) -> None:
        parts = []
        self.skipped = 0
        for call in module.executor.node_calls:
            if call is None:
                continue
            native = native_call_parts((call.func, call.args))  # type: ignore[attr-defined]
            if native is None:
                self.skipped += 1  # __nop / __copy: not a kernel
                continue
            parts.append(native)
        n = len(parts)
        self.count = n
        self._funcs = (ctypes.c_void_p * n)(*(p[0] for p in parts))
        self._args = (ctypes.c_void_p * n)(*(p[1] for p in parts))
        self._codes = (ctypes.c_void_p * n)(*(p[2] for p in parts))
        self._nargs = (ctypes.c_int * n)(*(p[3] for p in parts))
        self._lib = kernel_services.native_library()

    def __call__(self) -> int:
        """Nanoseconds for one pass over every kernel."""
        ns = self._lib.tvmrt_time_call_sequence(
            self.count, self._funcs, self._args, self._codes, self._nargs, 1
        )
        if ns < 0:
            raise RuntimeError(kernel_services.take_last_error())
        return int(ns)


def measure(model: str, repeat: int, warmup: int) -> dict[str, float]:
    """Run the model and return the figures in milliseconds (and counts)."""
    folder = ARTIFACTS / model
    lib = runtime.load_module(folder / "deploy_lib.so")
    module = graph_executor.create((folder / "deploy_graph.json").read_text(), lib, runtime.cpu())
    module.load_params((folder / "deploy_param.params").read_bytes())
    golden = np.load(folder / "golden.npz")
    module.set_input("data", golden["data"])
    replay = Replay(module)
    for _ in range(warmup):
        module.run()
        replay()
    np.testing.assert_allclose(module.get_output(0).numpy(), golden["output_0"], rtol=1e-6)

    kernel_services.reset_stats()
    module.run()
    stats = kernel_services.stats()
    ws_pairs = stats.workspace_allocs
    launches = stats.launches

    runs, natives = [], []
    for _ in range(repeat):
        start = time.perf_counter_ns()
        module.run()
        runs.append(time.perf_counter_ns() - start)
        natives.append(replay())
    lib_native = kernel_services.native_library()
    ws_cost = lib_native.tvmrt_time_workspace(4096, 200_000)
    launch_cost = lib_native.tvmrt_time_empty_launch(20_000)

    run_ms = statistics.median(runs) / 1e6
    native_ms = statistics.median(natives) / 1e6
    dispatch_ms = statistics.median(r - n for r, n in zip(runs, natives, strict=True)) / 1e6
    backend_ms = (ws_pairs * ws_cost + launches * launch_cost) / 1e6
    outside_ms = dispatch_ms + backend_ms
    return {
        "kernels": replay.count,
        "run": run_ms,
        "native": native_ms,
        "dispatch": dispatch_ms,
        "dispatch_per_call_us": dispatch_ms * 1e3 / max(replay.count, 1),
        "ws_pairs": ws_pairs,
        "ws_cost_ns": ws_cost,
        "launches": launches,
        "launch_cost_ns": launch_cost,
        "backend": backend_ms,
        "outside": outside_ms,
        "share": 100 * outside_ms / run_ms,
    }


def main() -> None:
    """Measure every model and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--threads", type=int, default=0, help="pool size (0: default)")
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    args = parser.parse_args()
    kernel_services.set_num_threads(args.threads)
    print(
        f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"pool of {kernel_services.num_threads()} threads, {args.repeat} runs after "
        f"{args.warmup} warm-up"
    )
    header = (
        "| model | kernels | run ms | native replay ms | dispatch ms (us/call) "
        "| ws pairs x ns | launches x ns | backend ms | outside ms | outside % |"
    )
    print(header)
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for model in args.models:
        r = measure(model, args.repeat, args.warmup)
        print(
            f"| {model} | {r['kernels']:.0f} | {r['run']:.2f} | {r['native']:.2f} "
            f"| {r['dispatch']:.3f} ({r['dispatch_per_call_us']:.2f}) "
            f"| {r['ws_pairs']:.0f} x {r['ws_cost_ns']:.0f} "
            f"| {r['launches']:.0f} x {r['launch_cost_ns']:.0f} "
            f"| {r['backend']:.3f} | {r['outside']:.3f} | {r['share']:.2f} |"
        )


if __name__ == "__main__":
    main()
