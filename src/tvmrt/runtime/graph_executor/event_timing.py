"""Timing nodes on a CUDA GPU with CUDA events, for the debug executor (``tvmrt profile``).

TVM's time evaluator and profiler time CUDA work with events; so do these: a node's time is
its kernels' own (events recorded around each launch, :class:`kernel_timer`), not the
host's wall time, which would add the launch overhead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tvmrt.runtime.benchmark import TimingConfig, time_evaluate_config
from tvmrt.runtime.device import Device, DLDeviceType
from tvmrt.runtime.loaders.cuda import kernel_timer

__all__ = ["all_on_cuda", "kernel_timer", "time_with_events"]


def all_on_cuda(devices: Sequence[Device]) -> bool:
    """Whether every one of ``devices`` (at least one) is a local CUDA GPU."""
    return bool(devices) and all(d.device_type == DLDeviceType.kDLCUDA for d in devices)


def time_with_events(
    timed: Callable[[], object], host: Device, timing: TimingConfig
) -> list[float]:
    """Seconds per call of ``timed`` (a node on a CUDA GPU), one value per repeat: the
    kernel time its launches record with CUDA events. A node that launches no kernel (a
    copy) is timed by the wall clock."""
    with kernel_timer() as timer:
        result = time_evaluate_config(timed, host, timing, clock=timer.clock_ns)()
    if not timer.times:
        result = time_evaluate_config(timed, host, timing)()
    return [float(t) for t in result.results]
