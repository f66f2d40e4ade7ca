"""A Relax VM that profiles: TVM's ``VirtualMachine.profile`` and tvmrt's ProfilingExecutor.

:class:`RelaxVMProfiler` is :class:`~tvmrt.runtime.relax_vm.VirtualMachine` with what
``tvmrt profile`` asks of an executor (:class:`~tvmrt.runtime.executor.protocol.ProfilingExecutor`):
``run_timed`` times ``main`` with the VM module's ``time_evaluator`` (on the device, or on
an RPC server), then reports one run call by call (the C VM's ``profile``: every Call
instruction timed, kernels and builtins, TVM's ``Report``) and writes those calls as a
Chrome trace in :attr:`dump_path`. A VM has no graph, so :meth:`node_timing` is None.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from typing import Any

from tvmrt.runtime.device import Device
from tvmrt.runtime.executor.protocol import not_replicated
from tvmrt.runtime.module import Module
from tvmrt.runtime.profiling import Report
from tvmrt.runtime.profiling.metrics import NumericMetric
from tvmrt.runtime.relax_vm import VirtualMachine

__all__ = ["RelaxVMProfiler"]

TRACE_FILE = "_tvmdbg_execution_trace.json"  # the name the debug executor's dump uses


class RelaxVMProfiler(VirtualMachine):
    """A Relax :class:`~tvmrt.runtime.relax_vm.VirtualMachine` for ``tvmrt profile``.

    Parameters
    ----------
    rt_mod, device, memory_cfg
        As :class:`~tvmrt.runtime.relax_vm.VirtualMachine`.
    dump_root
        The folder :attr:`dump_path` names: the Chrome trace of the last :meth:`run_timed`.
    """

    def __init__(
        self,
        rt_mod: Module,
        device: Device | Sequence[Device],
        memory_cfg: Any = None,
        dump_root: str | None = None,
    ) -> None:
        super().__init__(rt_mod, device, memory_cfg)
        self._dump_root = dump_root

    def profile(self, func_name: str = "main", *args: Any) -> Report:
        """TVM's ``profile(func_name, *args)``: one warm-up run, then one with every call
        timed. Without arguments, ``main`` runs on the inputs ``set_input`` kept (tvmrt)."""
        if not args and func_name == "main" and self._given:
            args = tuple(self._arguments())
        return super().profile(func_name, *args)

    @property
    def dump_path(self) -> str:
        """The folder of the Chrome trace of the last :meth:`run_timed`."""
        if self._dump_root is None:
            self._dump_root = tempfile.mkdtemp(prefix="tvmrt_relax_profile_")
        return self._dump_root

    def run_timed(self, number: int, repeat: int) -> str:
        """Time ``repeat`` measurements of ``number`` runs of ``main``, then one run call by
        call; returns both as text (TVM's ``BenchmarkResult`` and ``Report.table()``)."""
        device = self._device if isinstance(self._device, Device) else self._device[0]
        timing = self.time_evaluator("main", device, number=number, repeat=repeat)
        result = timing(*self._arguments())
        report = self.profile()
        self._write_trace(report)
        return f"{str(result).rstrip()}\n\nCalls of one run:\n{report.table().rstrip()}"

    def _write_trace(self, report: Report) -> None:
        """The run's calls, one after the other, as Chrome trace events."""
        events: list[dict[str, Any]] = []
        at = 0.0
        for call in report.calls:
            name = str(call.get("Name", ""))
            duration = call.get("Duration (us)")
            us = duration.number() if isinstance(duration, NumericMetric) else 0.0
            events.append({"ts": at, "tid": 1, "pid": 1, "name": name, "ph": "B"})
            events.append({"ts": at + us, "tid": 1, "pid": 1, "name": name, "ph": "E"})
            at += us
        os.makedirs(self.dump_path, exist_ok=True)
        with open(os.path.join(self.dump_path, TRACE_FILE), "w") as f:
            json.dump({"displayTimeUnit": "ns", "traceEvents": events}, f)

    def node_timing(self) -> None:
        """None: a VM has no graph nodes (:meth:`run_timed` times its calls)."""
        return None

    def replicate(self, count: int) -> list[VirtualMachine]:
        """Not offered: load without debug to run several executors.

        Raises
        ------
        UnsupportedError
            Always.
        """
        raise not_replicated()
