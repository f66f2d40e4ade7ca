"""Whole-model profiling of an AOT build (``tvmrt profile`` on ``Executor("aot")``).

An AOT build has no graph: one generated function calls every kernel, so the finest
granularity the runtime sees is the whole model. These helpers give
:class:`~tvmrt.runtime.executor.AotModule` what the debug executor offers ``tvmrt
profile`` (a timing table, a Chrome trace in its dump folder, TVM's ``Report``) with one
row: the model's entry function. They time the face's ``run`` only, so they work on an
executor anywhere its packed functions are (on an RPC server the times include the
round trip of each call).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence

from tvmrt.runtime.benchmark import TimingConfig
from tvmrt.runtime.device_type import RPC_SESS_MASK
from tvmrt.runtime.kernel_services import num_threads
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.profiling import Count, Metric, Profiler, Report

__all__ = ["profile_whole_run", "time_whole_run"]

_WARMUP_RUNS = 3
_TRACE = "_tvmdbg_execution_trace.json"


def time_whole_run(
    run: Callable[[], object], entry_name: str, number: int, repeat: int, dump_path: str
) -> str:
    """Time ``repeat`` measurements of ``number`` runs; write the Chrome trace to
    ``dump_path``; return the one-row table.

    Raises
    ------
    InvalidArgumentError
        If ``number`` or ``repeat`` is not positive (checked as by every timing front,
        :class:`~tvmrt.runtime.benchmark.TimingConfig`).
    """
    timing = TimingConfig(number=number, repeat=repeat)
    run()  # warm up once
    means = []
    for _ in range(timing.repeat):
        start = time.perf_counter()
        for _ in range(timing.number):
            run()
        means.append((time.perf_counter() - start) / timing.number)
    mean_us = sum(means) / len(means) * 1e6
    events = [
        {"ts": ts, "tid": 1, "pid": 1, "name": entry_name, "ph": ph}
        for ts, ph in ((0.0, "B"), (mean_us, "E"))
    ]
    os.makedirs(dump_path, exist_ok=True)
    with open(os.path.join(dump_path, _TRACE), "w") as f:
        json.dump({"displayTimeUnit": "ns", "traceEvents": events}, f)
    return "\n".join(
        [
            f"{'Node Name':40s} {'Ops':>6s} {'Time(us)':>12s} {'Time(%)':>8s}",
            f"{entry_name:40s} {'AOT':>6s} {mean_us:12.3f} {100.0:8.1f}",
            f"{'Total_time':40s} {'-':>6s} {mean_us:12.3f} {'-':>8s}",
        ]
    )


def profile_whole_run(
    run: Callable[[], object], entry_name: str, arrays: Sequence[NDArray]
) -> Report:
    """Run the model 3 times, then once more timed: TVM's ``Report`` with one call.

    ``arrays`` are the executor's inputs then outputs (their shapes are the row's
    ``Argument Shapes``; the first one's device is the row's). On a device of an RPC
    session the run is timed here, around the remote call, and the configuration names
    no thread count (the server's is not known here).
    """
    for _ in range(_WARMUP_RUNS):
        run()
    device = arrays[0].device
    configuration: dict[str, Metric] = {"Executor": "AOT"}
    if device.device_type < RPC_SESS_MASK:
        configuration["Number of threads"] = Count(num_threads())
    prof = Profiler([device], configuration)
    prof.start()
    shapes = ", ".join(f"{a.dtype}[{', '.join(str(d) for d in a.shape)}]" for a in arrays)
    prof.start_call(entry_name, device, {"Argument Shapes": shapes})
    run()
    prof.stop_call()
    prof.stop()
    return prof.report()
