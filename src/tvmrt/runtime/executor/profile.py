"""Whole-model profiling of an AOT build (``tvmrt profile`` on ``Executor("aot")``).

An AOT build has no graph: one generated function calls every kernel, so the finest
granularity the runtime sees is the whole model. :class:`AotProfiler` offers what the
debug executor offers ``tvmrt profile`` (``run(number, repeat)`` printing a table, a
Chrome trace in its dump folder, ``profile()`` returning TVM's ``Report``) with one row:
the model's entry function.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from typing import Any

from tvmrt.runtime.benchmark import TimingConfig
from tvmrt.runtime.executor._aot import AotExecutor
from tvmrt.runtime.executor.aot_executor import AotModule
from tvmrt.runtime.kernel_services import num_threads
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.profiling import Count, Metric, Profiler, Report

__all__ = ["AotProfiler"]

_WARMUP_RUNS = 3
_TRACE = "_tvmdbg_execution_trace.json"


class AotProfiler:
    """An :class:`AotModule` that times the whole model.

    Parameters
    ----------
    module
        The AOT executor (``lib["default"](dev)``).
    dump_root
        Folder for the Chrome trace (default: a new temporary folder).
    """

    def __init__(self, module: AotExecutor, dump_root: str | None = None) -> None:
        self.module = module
        self._aot = AotModule(module)
        self._dump_path = dump_root or tempfile.mkdtemp(prefix="tvmrt_aot_profile_")
        os.makedirs(self._dump_path, exist_ok=True)

    @property
    def dump_path(self) -> str:
        """The folder of the Chrome trace (``_tvmdbg_execution_trace.json``)."""
        return self._dump_path

    @property
    def entry_name(self) -> str:
        """The entry function timed (``tvmgen_default___tvm_main__``)."""
        return f"{self.module.model_name}___tvm_main__"

    def set_input(self, key: int | str | None = None, value: Any = None, **params: Any) -> None:
        """As :meth:`AotModule.set_input`."""
        self._aot.set_input(key, value, **params)

    def get_output(self, index: int, out: NDArray | None = None) -> NDArray:
        """As :meth:`AotModule.get_output`."""
        return self._aot.get_output(index, out)

    def get_num_outputs(self) -> int:
        """The number of outputs."""
        return self._aot.get_num_outputs()

    def run(self, number: int = 10, repeat: int = 1) -> list[float]:
        """Time ``repeat`` measurements of ``number`` runs; print a table; write the trace.

        Returns the mean seconds per run of each measurement.

        Raises
        ------
        InvalidArgumentError
            If ``number`` or ``repeat`` is not positive (checked as by every timing front,
            :class:`~tvmrt.runtime.benchmark.TimingConfig`).
        """
        timing = TimingConfig(number=number, repeat=repeat)
        self._aot.run()  # warm up once
        means = []
        for _ in range(timing.repeat):
            start = time.perf_counter()
            for _ in range(timing.number):
                self._aot.run()
            means.append((time.perf_counter() - start) / timing.number)
        mean_us = sum(means) / len(means) * 1e6
        print(f"{'Node Name':40s} {'Ops':>6s} {'Time(us)':>12s} {'Time(%)':>8s}")
        print(f"{self.entry_name:40s} {'AOT':>6s} {mean_us:12.3f} {100.0:8.1f}")
        print(f"{'Total_time':40s} {'-':>6s} {mean_us:12.3f} {'-':>8s}")
        events = [
            {"ts": ts, "tid": 1, "pid": 1, "name": self.entry_name, "ph": ph}
            for ts, ph in ((0.0, "B"), (mean_us, "E"))
        ]
        with open(os.path.join(self._dump_path, _TRACE), "w") as f:
            json.dump({"displayTimeUnit": "ns", "traceEvents": events}, f)
        return means

    def profile(self) -> Report:
        """Run the model 3 times, then once more timed: TVM's ``Report`` with one call."""
        for _ in range(_WARMUP_RUNS):
            self._aot.run()
        configuration: dict[str, Metric] = {
            "Executor": "AOT",
            "Number of threads": Count(num_threads()),
        }
        prof = Profiler([self.module.device], configuration)
        prof.start()
        shapes = ", ".join(
            f"{t.dtype}[{', '.join(str(d) for d in t.shape)}]"
            for t in (*self.module.inputs, *self.module.outputs)
        )
        prof.start_call(self.entry_name, self.module.device, {"Argument Shapes": shapes})
        self._aot.run()
        prof.stop_call()
        prof.stop()
        return prof.report()
