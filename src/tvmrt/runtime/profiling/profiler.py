"""``Profiler``: times calls on devices into a :class:`~tvmrt.runtime.profiling.Report`."""

# SPDX-License-Identifier: Apache-2.0
# Formats derived from apache/tvm src/runtime/profiling.cc (v0.19).

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence

from tvmrt.error import InvalidArgumentError, TVMError
from tvmrt.runtime.device import MASK2STR, RPC_SESS_MASK, Device, DLDeviceType
from tvmrt.runtime.device_api import find_device_api
from tvmrt.runtime.profiling.metrics import (
    DURATION,
    Count,
    Duration,
    Metric,
    Percent,
    check_metrics,
)
from tvmrt.runtime.profiling.report import Report, duration_of

__all__ = ["Profiler", "device_string"]


def device_string(dev: Device) -> str:
    """TVM's ``DeviceString``: ``DLDeviceType2Str`` + device id, e.g. ``cpu0``, ``cuda1``;
    a device of an RPC session is prefixed with its session as ``repr`` shows it
    (``remote[0]:cpu0``)."""
    if dev.device_type >= RPC_SESS_MASK:
        session = dev.device_type // RPC_SESS_MASK - 1
        return f"remote[{session}]:" + device_string(
            Device(dev.device_type % RPC_SESS_MASK, dev.device_id)
        )
    return MASK2STR.get(dev.device_type, str(dev.device_type)) + str(dev.device_id)


class _Frame:
    __slots__ = ("device", "metrics", "name", "start_ns", "stop_ns")

    def __init__(self, name: str, device: Device, metrics: dict[str, Metric], start: int) -> None:
        self.name, self.device, self.metrics = name, device, metrics
        self.start_ns, self.stop_ns = start, start


class Profiler:
    """Times calls on devices and builds a :class:`Report` (TVM's C++ ``Profiler``).

    Use: :meth:`start`, then :meth:`start_call` / :meth:`stop_call` around each call,
    then :meth:`stop` and :meth:`report`. :meth:`start` opens a ``Total`` frame on every
    device and :meth:`stop` closes them, so the report's ``device_metrics`` hold the
    whole run and each call's ``Percent`` is its share of the longest device total.

    Each frame reads ``clock`` when it starts and stops. CPU frames read it directly;
    on other devices the device is synchronised first (TVM's default timer), where it
    has a backend.

    Parameters
    ----------
    devices
        Devices to total over, in order; at least one.
    configuration
        The report's configuration, e.g. ``{"Executor": "Graph", "Number of threads":
        Count(4)}``; the caller supplies it.
    clock
        Monotonic clock in integer nanoseconds; tests pass a fake one.

    Raises
    ------
    ValueError
        If ``devices`` is empty.

    Examples
    --------
    >>> ticks = iter(range(0, 10_000, 1000))
    >>> prof = Profiler([Device(1, 0)], {"Executor": "Graph"}, clock=lambda: next(ticks))
    >>> prof.start()
    >>> prof.start_call("fused_add", Device(1, 0), {"Hash": "abc"})
    >>> prof.stop_call()
    >>> prof.stop()
    >>> report = prof.report()
    >>> report.calls[0]["Duration (us)"], report.calls[0]["Percent"]
    (runtime.profiling.Duration(1.0), runtime.profiling.Percent(33.33333333333333))
    """

    def __init__(
        self,
        devices: Sequence[Device],
        configuration: Mapping[str, Metric] | None = None,
        *,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        self._devices = list(devices)
        if not self._devices:
            raise InvalidArgumentError("devices must list at least one device to profile")
        self._configuration = check_metrics(configuration or {}, "configuration")
        self._clock = clock
        self._in_flight: list[_Frame] = []
        self._done: list[_Frame] = []
        self._running = False

    @property
    def is_running(self) -> bool:
        """Whether :meth:`start` was called and :meth:`stop` not yet."""
        return self._running

    def now_ns(self) -> int:
        """tvmrt: the profiler's clock now (for :meth:`stop`'s ``at_ns``)."""
        return self._clock()

    def start(self) -> None:
        """Start profiling: open a ``Total`` frame on each device, in order.

        Calls recorded by an earlier start/stop are discarded.
        """
        if self._running:
            raise TVMError("profiler is already running; call stop() first")
        self._done.clear()
        self._running = True
        for dev in self._devices:
            self.start_call("Total", dev)

    def start_call(
        self, name: str, device: Device, extra_metrics: Mapping[str, Metric] | None = None
    ) -> None:
        """Start timing a call named ``name`` on ``device``.

        Parameters
        ----------
        name
            The call's ``Name`` (the kernel's function name).
        device
            Device the call runs on; its ``Device`` column reads like ``cpu0``.
        extra_metrics
            More metrics for this call's row (``Hash``, ``Argument Shapes``, layouts).
        """
        if not self._running:
            raise TVMError("start_call() needs a running profiler; call start() first")
        metrics = check_metrics(extra_metrics or {}, f"extra_metrics of {name!r}")
        self._sync(device)
        self._in_flight.append(_Frame(name, device, metrics, self._clock()))

    def stop_call(self, extra_metrics: Mapping[str, Metric] | None = None) -> None:
        """Stop timing the most recently started call; ``extra_metrics`` are added to it."""
        if len(self._in_flight) <= len(self._devices):
            raise TVMError("stop_call() has no matching start_call()")
        self._stop_frame(extra_metrics)

    def record_call(
        self,
        name: str,
        device: Device,
        start_ns: int,
        stop_ns: int,
        extra_metrics: Mapping[str, Metric] | None = None,
    ) -> None:
        """tvmrt: add a finished call that its runner timed itself (the C VM times each
        kernel call without Python between them and hands the times over afterwards);
        its row is as :meth:`start_call` and :meth:`stop_call` around it would make, with
        its duration ``stop_ns - start_ns``."""
        if not self._running:
            raise TVMError("record_call() needs a running profiler; call start() first")
        frame = _Frame(
            name, device, check_metrics(extra_metrics or {}, f"extra_metrics of {name!r}"), start_ns
        )
        frame.stop_ns = stop_ns
        self._done.append(frame)

    def stop(self, *, at_ns: int | None = None) -> None:
        """Stop profiling: close the ``Total`` frames, last device first.

        ``at_ns`` (tvmrt): when the profiled work ended, on the profiler's clock (after it,
        calls timed elsewhere were added with :meth:`record_call`); default now.
        """
        if not self._running:
            raise TVMError("profiler is not running; call start() first")
        if len(self._in_flight) > len(self._devices):
            open_calls = [f.name for f in self._in_flight[len(self._devices) :]]
            raise TVMError(f"calls {open_calls!r} are still open; call stop_call() first")
        while self._in_flight:
            self._stop_frame(None, at_ns)
        self._running = False

    def report(self) -> Report:
        """The report of the last start/stop: calls in the order they finished.

        Each call's row has ``Duration (us)``, ``Count`` 1, ``Name``, ``Device``, its extra
        metrics and ``Percent`` of the longest device total; ``device_metrics`` maps each
        device string to its ``Total`` row.
        """
        if self._running or not self._done:
            raise TVMError("report() needs a finished profile; call start() and stop() first")
        rows: list[dict[str, Metric]] = []
        for frame in self._done:
            row: dict[str, Metric] = {
                DURATION: Duration((frame.stop_ns - frame.start_ns) / 1e3),
                "Count": Count(1),
                "Name": frame.name,
                "Device": device_string(frame.device),
            }
            row.update(frame.metrics)
            rows.append(row)
        totals = rows[len(rows) - len(self._devices) :][::-1]  # popped from the end, like TVM
        del rows[len(rows) - len(self._devices) :]
        device_metrics = {str(row["Device"]): row for row in totals}
        overall = max(duration_of(row) for row in totals)
        for row in rows:
            row["Percent"] = Percent(_ratio(duration_of(row), overall) * 100)
        return Report(rows, device_metrics, self._configuration)

    def _stop_frame(
        self, extra_metrics: Mapping[str, Metric] | None, at_ns: int | None = None
    ) -> None:
        frame = self._in_flight[-1]
        self._sync(frame.device)
        frame.stop_ns = self._clock() if at_ns is None else at_ns
        frame.metrics.update(check_metrics(extra_metrics or {}, f"extra_metrics of {frame.name!r}"))
        self._in_flight.pop()
        self._done.append(frame)

    @staticmethod
    def _sync(dev: Device) -> None:
        if dev.device_type != DLDeviceType.kDLCPU:
            api = find_device_api(dev.device_type)
            if api is not None:
                api.sync(dev)


def _ratio(a: float, b: float) -> float:
    """``a / b`` with IEEE results for ``b == 0`` (nan or inf), as C++ computes it."""
    if b == 0:
        return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a)
    return a / b
