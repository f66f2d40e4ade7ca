"""``Report``: the metrics of a profiling run, as TVM's table, CSV or JSON."""

# SPDX-License-Identifier: Apache-2.0
# Formats derived from apache/tvm src/runtime/profiling.cc (v0.19).

from __future__ import annotations

import json as _json
from collections.abc import Mapping, Sequence

from tvmrt.error import ArgumentTypeError, ReportFormatError
from tvmrt.runtime.object_base import Object
from tvmrt.runtime.profiling.metrics import (
    DURATION,
    Count,
    Duration,
    Metric,
    NumericMetric,
    Percent,
    Ratio,
    check_metrics,
    json_string,
    metric_cell,
    metric_csv,
    metrics_json,
    parse_metrics,
)

__all__ = ["Report", "duration_of"]

FIXED_COLUMNS = ("Name", DURATION, "Percent", "Device", "Count", "Argument Shapes")


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
        if isinstance(v, NumericMetric):
            total += v.number()
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


def duration_of(row: Mapping[str, Metric]) -> float:
    value = row.get(DURATION)
    if not isinstance(value, Duration):
        name = row.get("Name", "?")
        raise ReportFormatError(
            f"row {name!r} has no Duration {DURATION!r}; table(sort=True) needs one in every row"
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
    headers = [*FIXED_COLUMNS, *(n for n in names if n not in FIXED_COLUMNS)]
    cols = [[h, *(metric_cell(row[h]) if h in row else "" for row in rows)] for h in headers]
    widths = [max(len(cell) for cell in col) for col in cols]
    lines = []
    for r in range(len(rows) + 1):
        cells = [cols[0][r].ljust(widths[0])]
        cells += [col[r].rjust(w) for col, w in zip(cols[1:], widths[1:], strict=True)]
        lines.append("".join(cell + "  " for cell in cells) + "\n")
    return "".join(lines)


class Report(Object):
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
        self.calls = [check_metrics(call, f"calls[{i}]") for i, call in enumerate(calls)]
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
            self.device_metrics[dev] = check_metrics(metrics, f"device_metrics[{dev!r}]")
        self.configuration = check_metrics(configuration, "configuration")

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
            cells = (metric_csv(call[h]) if h in call else "" for h in headers)
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
        calls = ",".join(metrics_json(call) for call in self.calls)
        devices = ",".join(
            f"{json_string(dev)}:{metrics_json(m)}" for dev, m in self.device_metrics.items()
        )
        return (
            f'{{"calls":[{calls}],"device_metrics":{{{devices}}},'
            f'"configuration":{metrics_json(self.configuration)}}}'
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
            [parse_metrics(call, f"calls[{i}]") for i, call in enumerate(calls)],
            {dev: parse_metrics(m, f"device_metrics[{dev!r}]") for dev, m in devices.items()},
            parse_metrics(doc.get("configuration", {}), "configuration"),
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
                duration_of(row)
            rows.sort(key=duration_of, reverse=True)
        if col_sums:
            sums = _column_sums(rows)
            rows += [{"Name": "----------"}, sums]
        rows += [{**metrics, "Name": "Total"} for metrics in self.device_metrics.values()]
        config = "".join(f"{k}: {metric_cell(v)}\n" for k, v in self.configuration.items())
        return _layout(rows) + "\nConfiguration\n-------------\n" + config
