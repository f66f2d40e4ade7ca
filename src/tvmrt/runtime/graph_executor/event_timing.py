"""Timing nodes on a CUDA GPU with CUDA events, for the debug executor (``tvmrt profile``).

TVM's time evaluator and profiler time CUDA work with events; so do these: a node's time is
its kernels' own (events recorded around each launch, :class:`kernel_timer`), not the
host's wall time, which would add the launch overhead. Each timed call runs with the
GPU's stream held (:func:`held`) until the call has queued all its work: on an idle GPU an
event pair would otherwise also span the host's time to queue the kernel after its start
event (measured on an H200: 3 small kernels, 39.6 us by events around each unheld, 13.5 us
held, 10.8 us for the whole run).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence

from tvmrt.runtime.benchmark import TimingConfig, time_evaluate_config
from tvmrt.runtime.device import Device, DLDeviceType
from tvmrt.runtime.device_api import get_device_api
from tvmrt.runtime.loaders.cuda import kernel_timer

__all__ = ["all_on_cuda", "held", "kernel_timer", "time_with_events"]


def all_on_cuda(devices: Sequence[Device]) -> bool:
    """Whether every one of ``devices`` (at least one) is a local CUDA GPU."""
    return bool(devices) and all(d.device_type == DLDeviceType.kDLCUDA for d in devices)


def held(dev: Device) -> contextlib.AbstractContextManager[None]:
    """``dev``'s current stream held until the block exits (the CUDA backend's
    ``hold_stream``); a no-op on a device whose backend cannot hold one."""
    hold_stream = getattr(get_device_api(dev), "hold_stream", None)
    return contextlib.nullcontext() if hold_stream is None else hold_stream(dev)


def time_with_events(
    timed: Callable[[], object], host: Device, timing: TimingConfig, dev: Device
) -> list[float]:
    """Seconds per call of ``timed`` (a node on the CUDA GPU ``dev``), one value per repeat:
    the kernel time its launches record with CUDA events, each call queued behind a held
    stream. A node that launches no kernel (a copy) is timed by the wall clock."""

    def call_held() -> None:
        with held(dev):
            timed()

    with kernel_timer() as timer:
        result = time_evaluate_config(call_held, host, timing, clock=timer.clock_ns)()
    if not timer.times:
        result = time_evaluate_config(timed, host, timing)()
    return [float(t) for t in result.results]
