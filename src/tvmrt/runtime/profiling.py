"""Profiling reports (TVM's ``tvm.runtime.profiling``): metrics, ``Report`` and ``Profiler``.

A :class:`Report` holds one dict of metrics per call, per-device totals and the run's
configuration, and prints them as a table, CSV or JSON in TVM v0.19's formats (spec §5.5).
:class:`Profiler` builds a report the way TVM's C++ profiler does (spec §5.4); the debug
executor drives it.

Metric values are :class:`Duration`, :class:`Count`, :class:`Percent`, :class:`Ratio` and
plain ``str``. TVM's string metric is ``tvm.runtime.String``, a ``str`` subclass, so tvmrt
uses ``str`` itself: ``report.calls[0]["Name"]`` is an ordinary string.

Where tvmrt departs from TVM's text, on purpose:

* ``json()`` escapes ``"``, ``\\`` and control characters in strings (TVM writes them raw,
  which gives invalid JSON), and writes non-finite numbers as ``NaN``/``Infinity``, so
  :meth:`Report.from_json` reads back everything :meth:`Report.json` writes.
* ``csv()`` doubles ``"`` inside quoted strings (RFC 4180); TVM writes them raw.
* Numbers in ``table()`` follow Python's ``LC_NUMERIC`` locale, not the environment's: no
  thousands separators unless the program called ``locale.setlocale``.
* Group and key order, unspecified in TVM (hash maps), is first-seen order here, and
  sorting by duration is stable.
"""

# SPDX-License-Identifier: Apache-2.0
# Formats derived from apache/tvm src/runtime/profiling.cc (v0.19).

from __future__ import annotations

import json as _json
import locale
import math
import numbers
import operator
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, TypeAlias

from tvmrt.error import (
    ArgumentTypeError,
    InvalidArgumentError,
    ReadOnlyError,
    ReportFormatError,
    TVMError,
)
from tvmrt.runtime.device import MASK2STR, Device, DLDeviceType
from tvmrt.runtime.device_api import find_device_api

__all__ = ["Count", "Duration", "Percent", "Ratio", "Metric", "Report", "Profiler"]


class _Metric:
    """One number with a unit; immutable, compared by value."""

    __slots__ = ()
    _field: ClassVar[str]  # attribute holding the value, as TVM names it
    _type_key: ClassVar[str]

    def _get(self) -> float:
        value: float = getattr(self, self._field)
        return value

    def __setattr__(self, name: str, value: object) -> None:
        raise ReadOnlyError(f"{type(self).__name__} is immutable; cannot set {name!r}")

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _Metric) and type(other) is type(self) and self._get() == other._get()
        )

    def __hash__(self) -> int:
        return hash((type(self), self._get()))

    def __repr__(self) -> str:
        return f"{self._type_key}({self._get()!r})"

    def __reduce__(self) -> tuple[Any, tuple[float]]:
        return (type(self), (self._get(),))


def _real(value: object, cls: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(f"{cls} takes a real number, got {type(value).__name__}")
    return float(value)


class Duration(_Metric):
    """A duration in microseconds (``microseconds``), as ``Duration (us)`` columns hold.

    Parameters
    ----------
    duration
        Microseconds.
    """

    __slots__ = ("microseconds",)
    _field = "microseconds"
    _type_key = "runtime.profiling.Duration"
    microseconds: float

    def __init__(self, duration: float) -> None:
        object.__setattr__(self, "microseconds", _real(duration, "Duration"))


class Count(_Metric):
    """An integer count (``value``), such as the number of calls.

    Parameters
    ----------
    count
        The count; any integer (``operator.index``), not a float or a bool.
    """

    __slots__ = ("value",)
    _field = "value"
    _type_key = "runtime.profiling.Count"
    value: int

    def __init__(self, count: int) -> None:
        if isinstance(count, bool):
            raise ArgumentTypeError("Count takes an integer, got bool")
        try:
            value = operator.index(count)
        except TypeError:
            raise ArgumentTypeError(f"Count takes an integer, got {type(count).__name__}") from None
        object.__setattr__(self, "value", value)


class Percent(_Metric):
    """A percentage (``percent``), 0 to 100 for a share of the total time.

    Parameters
    ----------
    percent
        The percentage.
    """

    __slots__ = ("percent",)
    _field = "percent"
    _type_key = "runtime.profiling.Percent"
    percent: float

    def __init__(self, percent: float) -> None:
        object.__setattr__(self, "percent", _real(percent, "Percent"))


class Ratio(_Metric):
    """A ratio of two quantities (``ratio``); averaged, not summed, when calls are grouped.

    Parameters
    ----------
    ratio
        The ratio.
    """

    __slots__ = ("ratio",)
    _field = "ratio"
    _type_key = "runtime.profiling.Ratio"
    ratio: float

    def __init__(self, ratio: float) -> None:
        object.__setattr__(self, "ratio", _real(ratio, "Ratio"))


Metric: TypeAlias = Duration | Count | Percent | Ratio | str
"""A metric value: one of the four metric classes, or ``str`` for TVM's string metric."""

_METRIC_TYPES = (Duration, Count, Percent, Ratio, str)
_JSON_KINDS = ("microseconds", "percent", "count", "ratio", "string")
_DURATION = "Duration (us)"
_FIXED_COLUMNS = ("Name", _DURATION, "Percent", "Device", "Count", "Argument Shapes")


def _check_metrics(metrics: object, where: str) -> dict[str, Metric]:
    """A copy of ``metrics`` after checking it maps str to metric values."""
    if not isinstance(metrics, Mapping):
        raise ArgumentTypeError(f"{where} must be a dict of metrics, got {type(metrics).__name__}")
    out: dict[str, Metric] = {}
    for name, value in metrics.items():
        if not isinstance(name, str):
            raise ArgumentTypeError(f"{where}: metric name {name!r} must be a str")
        if not isinstance(value, _METRIC_TYPES):
            raise ArgumentTypeError(
                f"{where}[{name!r}] must be a Duration, Count, Percent, Ratio or str, "
                f"got {type(value).__name__}"
            )
        out[name] = value
    return out


# -- text of one metric -------------------------------------------------------------------
def _json_number(x: float) -> str:
    # C++: std::fixed << std::setprecision(max_digits10) -> 17 digits after the point.
    if math.isfinite(x):
        return format(x, ".17f")
    return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")


def _json_string(s: str) -> str:
    return _json.dumps(s, ensure_ascii=False)


def _metric_json(value: Metric) -> str:
    if isinstance(value, str):
        return f'{{"string":{_json_string(value)}}}'
    if isinstance(value, Count):
        return f'{{"count":{value.value}}}'
    if isinstance(value, Duration):
        return f'{{"microseconds":{_json_number(value.microseconds)}}}'
    if isinstance(value, Percent):
        return f'{{"percent":{_json_number(value.percent)}}}'
    return f'{{"ratio":{_json_number(value.ratio)}}}'


def _metrics_json(metrics: Mapping[str, Metric]) -> str:
    items = ",".join(f"{_json_string(k)}:{_metric_json(v)}" for k, v in metrics.items())
    return "{" + items + "}"


def _metric_csv(value: Metric) -> str:
    # C++ default stream formatting: 6 significant digits, like %g.
    if isinstance(value, str):
        return '"' + value.replace('"', '""') + '"'
    if isinstance(value, Count):
        return str(value.value)
    return f"{value._get():g}"


def _metric_cell(value: Metric) -> str:
    # Count, Duration and Ratio use the locale's separators (TVM: std::locale("")), Percent not.
    if isinstance(value, str):
        return value
    if isinstance(value, Count):
        return locale.format_string("%d", value.value, grouping=True)
    if isinstance(value, Duration):
        return locale.format_string("%.2f", value.microseconds, grouping=True)
    if isinstance(value, Percent):
        return f"{value.percent:.2f}"
    return locale.format_string("%.2g", value.ratio, grouping=True)


# -- table steps --------------------------------------------------------------------------
def _string_metric(row: Mapping[str, Metric], name: str, where: str) -> str:
    value = row[name]
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{where}[{name!r}] must be a str to group calls, got {value!r}")
    return value


def _group_key(call: Mapping[str, Metric], i: int) -> str:
    where = f"calls[{i}]"
    if "Hash" in call:
        key = _string_metric(call, "Hash", where)
    elif "Name" in call:
        key = _string_metric(call, "Name", where)
    else:
        raise ReportFormatError(
            f"{where} has neither 'Hash' nor 'Name'; table(aggregate=True) needs one"
        )
    for name in ("Argument Shapes", "Device"):
        if name in call:
            key += _string_metric(call, name, where)
    return key


def _aggregate_metric(name: str, values: list[Metric]) -> Metric:
    """Durations, counts and percents add up, ratios average, equal strings stay."""
    first = values[0]
    if any(type(v) is not type(first) for v in values):
        kinds = sorted({type(v).__name__ for v in values})
        raise ArgumentTypeError(
            f"metric {name!r} mixes {', '.join(kinds)} values; cannot aggregate it"
        )
    if isinstance(first, str):
        return first if all(v == first for v in values) else ""
    if isinstance(first, Count):
        return Count(sum(v.value for v in values if isinstance(v, Count)))
    total = 0.0
    for v in values:
        if isinstance(v, _Metric):
            total += v._get()
    if isinstance(first, Ratio):
        return Ratio(total / len(values))
    return Duration(total) if isinstance(first, Duration) else Percent(total)


def _aggregate(calls: Sequence[Mapping[str, Metric]]) -> list[dict[str, Metric]]:
    groups: dict[str, list[int]] = {}
    for i, call in enumerate(calls):
        groups.setdefault(_group_key(call, i), []).append(i)
    names = list(dict.fromkeys(name for call in calls for name in call))
    rows = []
    for members in groups.values():
        row: dict[str, Metric] = {}
        for name in names:
            values = [calls[i][name] for i in members if name in calls[i]]
            if values:
                row[name] = _aggregate_metric(name, values)
        rows.append(row)
    return rows


def _duration_of(row: Mapping[str, Metric]) -> float:
    value = row.get(_DURATION)
    if not isinstance(value, Duration):
        name = row.get("Name", "?")
        raise ReportFormatError(
            f"row {name!r} has no Duration {_DURATION!r}; table(sort=True) needs one in every row"
        )
    return value.microseconds


def _column_sums(rows: Sequence[Mapping[str, Metric]]) -> dict[str, Metric]:
    sums: dict[str, Metric] = {}
    for row in rows:
        for name, value in row.items():
            if not isinstance(value, (Count, Duration, Percent)):
                continue  # strings and ratios are not summed
            prev = sums.get(name)
            if prev is None:
                sums[name] = value
            elif type(prev) is not type(value):
                raise ArgumentTypeError(
                    f"column {name!r} mixes {type(prev).__name__} and "
                    f"{type(value).__name__} values; cannot sum it"
                )
            elif isinstance(prev, Count) and isinstance(value, Count):
                sums[name] = Count(prev.value + value.value)
            elif isinstance(prev, Duration) and isinstance(value, Duration):
                sums[name] = Duration(prev.microseconds + value.microseconds)
            elif isinstance(prev, Percent) and isinstance(value, Percent):
                sums[name] = Percent(prev.percent + value.percent)
    sums["Name"] = "Sum"
    return sums


def _layout(rows: Sequence[Mapping[str, Metric]]) -> str:
    names = sorted({name for row in rows for name in row})
    headers = [*_FIXED_COLUMNS, *(n for n in names if n not in _FIXED_COLUMNS)]
    cols = [[h, *(_metric_cell(row[h]) if h in row else "" for row in rows)] for h in headers]
    widths = [max(len(cell) for cell in col) for col in cols]
    lines = []
    for r in range(len(rows) + 1):
        cells = [cols[0][r].ljust(widths[0])]
        cells += [col[r].rjust(w) for col, w in zip(cols[1:], widths[1:], strict=True)]
        lines.append("".join(cell + "  " for cell in cells) + "\n")
    return "".join(lines)


class Report:
    """Metrics of a profiling run: per call, per device, and the run's configuration.

    Parameters
    ----------
    calls
        One dict of metrics per call (``Name``, ``Duration (us)``, ``Count``, ...).
    device_metrics
        Device string (``"cpu0"``) → metrics over the whole run on that device.
    configuration
        Settings of the run (``Executor``, ``Number of threads``).

    Raises
    ------
    TypeError
        If a metric name is not a ``str`` or a value is not a metric.

    Examples
    --------
    >>> r = Report([{"Name": "add", "Duration (us)": Duration(2.0), "Count": Count(1)}],
    ...            {}, {"Executor": "Graph"})
    >>> r.calls[0]["Count"]
    runtime.profiling.Count(1)
    """

    calls: list[dict[str, Metric]]
    device_metrics: dict[str, dict[str, Metric]]
    configuration: dict[str, Metric]

    def __init__(
        self,
        calls: Sequence[Mapping[str, Metric]],
        device_metrics: Mapping[str, Mapping[str, Metric]],
        configuration: Mapping[str, Metric],
    ) -> None:
        self.calls = [_check_metrics(call, f"calls[{i}]") for i, call in enumerate(calls)]
        if not isinstance(device_metrics, Mapping):
            raise ArgumentTypeError(
                f"device_metrics must be a dict, got {type(device_metrics).__name__}"
            )
        self.device_metrics = {}
        for dev, metrics in device_metrics.items():
            if not isinstance(dev, str):
                raise ArgumentTypeError(
                    f"device_metrics: device {dev!r} must be a str such as 'cpu0'"
                )
            self.device_metrics[dev] = _check_metrics(metrics, f"device_metrics[{dev!r}]")
        self.configuration = _check_metrics(configuration, "configuration")

    def __repr__(self) -> str:
        return (
            f"runtime.profiling.Report({len(self.calls)} calls, "
            f"devices={list(self.device_metrics)!r})"
        )

    def __str__(self) -> str:
        return self.table()

    def csv(self) -> str:
        """The calls (not the device totals) as CSV, one line per call.

        Returns
        -------
        str
            A header of all metric names in sorted order, then one line per call; numbers
            with 6 significant digits, strings in double quotes, missing metrics empty.
        """
        headers = sorted({name for call in self.calls for name in call})
        lines = [",".join(headers) + "\n"]
        for call in self.calls:
            cells = (_metric_csv(call[h]) if h in call else "" for h in headers)
            lines.append(",".join(cells) + "\n")
        return "".join(lines)

    def json(self) -> str:
        """The report as compact JSON that :meth:`from_json` reads back.

        Returns
        -------
        str
            ``{"calls":[...],"device_metrics":{...},"configuration":{...}}`` where each
            metric is ``{"microseconds":x}``, ``{"percent":x}``, ``{"ratio":x}`` (17 digits
            after the decimal point), ``{"count":n}`` or ``{"string":"..."}``.
        """
        calls = ",".join(_metrics_json(call) for call in self.calls)
        devices = ",".join(
            f"{_json_string(dev)}:{_metrics_json(m)}" for dev, m in self.device_metrics.items()
        )
        return (
            f'{{"calls":[{calls}],"device_metrics":{{{devices}}},'
            f'"configuration":{_metrics_json(self.configuration)}}}'
        )

    @classmethod
    def from_json(cls, s: str) -> Report:
        """Read a report written by :meth:`json` (or by TVM's ``Report.json()``).

        Parameters
        ----------
        s
            The JSON text. Unknown top-level keys are ignored.

        Returns
        -------
        Report
            The report.

        Raises
        ------
        ReportFormatError
            If ``s`` is not JSON, is not shaped like a report, or has a metric of an
            unknown type (valid: microseconds, percent, count, ratio, string).
        """
        try:
            doc = _json.loads(s)
        except ValueError as exc:
            raise ReportFormatError(f"report is not valid JSON: {exc}") from exc
        if not isinstance(doc, dict):
            raise ReportFormatError(f"report JSON must be an object, got {type(doc).__name__}")
        calls = doc.get("calls", [])
        if not isinstance(calls, list):
            raise ReportFormatError(f"report 'calls' must be a list, got {type(calls).__name__}")
        devices = doc.get("device_metrics", {})
        if not isinstance(devices, dict):
            raise ReportFormatError(
                f"report 'device_metrics' must be an object, got {type(devices).__name__}"
            )
        return cls(
            [_parse_metrics(call, f"calls[{i}]") for i, call in enumerate(calls)],
            {dev: _parse_metrics(m, f"device_metrics[{dev!r}]") for dev, m in devices.items()},
            _parse_metrics(doc.get("configuration", {}), "configuration"),
        )

    def table(self, sort: bool = True, aggregate: bool = True, col_sums: bool = True) -> str:
        """A human-readable table of the calls, device totals and configuration.

        Parameters
        ----------
        sort
            Sort rows by ``Duration (us)``, longest first.
        aggregate
            Join calls with the same ``Hash`` (else ``Name``), ``Argument Shapes`` and
            ``Device`` into one row: durations, counts and percents add up, ratios average.
        col_sums
            Add a ``Sum`` row of every Count, Duration and Percent column.

        Returns
        -------
        str
            Columns ``Name, Duration (us), Percent, Device, Count, Argument Shapes``, then the
            other metrics in sorted order; one ``Total`` row per device; then the
            configuration block.

        Raises
        ------
        ValueError
            If ``sort`` and a row has no ``Duration (us)``, or ``aggregate`` and a call has
            neither ``Hash`` nor ``Name``.
        TypeError
            If values to aggregate or sum are of different metric types.
        """
        rows = _aggregate(self.calls) if aggregate else [dict(call) for call in self.calls]
        if sort:
            for row in rows:
                _duration_of(row)
            rows.sort(key=_duration_of, reverse=True)
        if col_sums:
            sums = _column_sums(rows)
            rows += [{"Name": "----------"}, sums]
        rows += [{**metrics, "Name": "Total"} for metrics in self.device_metrics.values()]
        config = "".join(f"{k}: {_metric_cell(v)}\n" for k, v in self.configuration.items())
        return _layout(rows) + "\nConfiguration\n-------------\n" + config


def _parse_metrics(obj: object, where: str) -> dict[str, Metric]:
    if not isinstance(obj, dict):
        raise ReportFormatError(f"report {where} must be an object, got {type(obj).__name__}")
    return {name: _parse_metric(value, f"{where}[{name!r}]") for name, value in obj.items()}


def _parse_metric(obj: object, where: str) -> Metric:
    if not isinstance(obj, dict) or len(obj) != 1:
        raise ReportFormatError(
            f"report metric {where} must be an object with one key such as "
            f'{{"microseconds": 1.5}}, got {obj!r}'
        )
    ((kind, value),) = obj.items()
    if kind not in _JSON_KINDS:
        raise ReportFormatError(
            f"cannot parse metric {where} of type {kind!r}; valid types are "
            f"{', '.join(_JSON_KINDS)}"
        )
    if kind == "string":
        if isinstance(value, str):
            return value
        expected = "a string"
    elif isinstance(value, bool):
        expected = "an integer" if kind == "count" else "a number"
    elif kind == "count":
        if isinstance(value, int):
            return Count(value)
        expected = "an integer"
    elif isinstance(value, (int, float)):
        number: dict[str, Callable[[float], Metric]] = {
            "microseconds": Duration,
            "percent": Percent,
            "ratio": Ratio,
        }
        return number[kind](value)
    else:
        expected = "a number"
    raise ReportFormatError(f"report metric {where}: {kind} must be {expected}, got {value!r}")


# -- the profiler ------------------------------------------------------------------------
def _device_string(dev: Device) -> str:
    """TVM's ``DeviceString``: ``DLDeviceType2Str`` + device id, e.g. ``cpu0``, ``cuda1``."""
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
        self._configuration = _check_metrics(configuration or {}, "configuration")
        self._clock = clock
        self._in_flight: list[_Frame] = []
        self._done: list[_Frame] = []
        self._running = False

    @property
    def is_running(self) -> bool:
        """Whether :meth:`start` was called and :meth:`stop` not yet."""
        return self._running

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
        metrics = _check_metrics(extra_metrics or {}, f"extra_metrics of {name!r}")
        self._sync(device)
        self._in_flight.append(_Frame(name, device, metrics, self._clock()))

    def stop_call(self, extra_metrics: Mapping[str, Metric] | None = None) -> None:
        """Stop timing the most recently started call; ``extra_metrics`` are added to it."""
        if len(self._in_flight) <= len(self._devices):
            raise TVMError("stop_call() has no matching start_call()")
        self._stop_frame(extra_metrics)

    def stop(self) -> None:
        """Stop profiling: close the ``Total`` frames, last device first."""
        if not self._running:
            raise TVMError("profiler is not running; call start() first")
        if len(self._in_flight) > len(self._devices):
            open_calls = [f.name for f in self._in_flight[len(self._devices) :]]
            raise TVMError(f"calls {open_calls!r} are still open; call stop_call() first")
        while self._in_flight:
            self._stop_frame(None)
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
                _DURATION: Duration((frame.stop_ns - frame.start_ns) / 1e3),
                "Count": Count(1),
                "Name": frame.name,
                "Device": _device_string(frame.device),
            }
            row.update(frame.metrics)
            rows.append(row)
        totals = rows[len(rows) - len(self._devices) :][::-1]  # popped from the end, like TVM
        del rows[len(rows) - len(self._devices) :]
        device_metrics = {str(row["Device"]): row for row in totals}
        overall = max(_duration_of(row) for row in totals)
        for row in rows:
            row["Percent"] = Percent(_ratio(_duration_of(row), overall) * 100)
        return Report(rows, device_metrics, self._configuration)

    def _stop_frame(self, extra_metrics: Mapping[str, Metric] | None) -> None:
        frame = self._in_flight[-1]
        self._sync(frame.device)
        frame.stop_ns = self._clock()
        frame.metrics.update(
            _check_metrics(extra_metrics or {}, f"extra_metrics of {frame.name!r}")
        )
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
