"""Profiling metrics: ``Duration``, ``Count``, ``Percent``, ``Ratio`` (and ``str``), and their text.

Each metric is written as TVM v0.19 writes it: JSON (``{"microseconds": x}``, 17 digits
after the point), CSV (6 significant digits) and table cells (the locale's separators);
:func:`parse_metrics` reads the JSON back.
"""

# SPDX-License-Identifier: Apache-2.0
# Formats derived from apache/tvm src/runtime/profiling.cc (v0.19).

from __future__ import annotations

import json as _json
import locale
import math
import numbers
import operator
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeAlias

from tvmrt.error import ArgumentTypeError, ReadOnlyError, ReportFormatError
from tvmrt.runtime.object_base import Object

__all__ = [
    "NumericMetric",
    "Duration",
    "Count",
    "Percent",
    "Ratio",
    "Metric",
    "METRIC_TYPES",
    "DURATION",
    "check_metrics",
    "json_string",
    "metric_json",
    "metrics_json",
    "metric_csv",
    "metric_cell",
    "parse_metrics",
]


class NumericMetric(Object):
    """One number with a unit (an ``Object``, as TVM's); immutable, compared by value."""

    __slots__ = ()
    _field: ClassVar[str]  # attribute holding the value, as TVM names it
    _type_key: ClassVar[str]

    def number(self) -> float:
        """The value as a float, whatever the metric calls it."""
        value: float = getattr(self, self._field)
        return value

    def __setattr__(self, name: str, value: object) -> None:
        raise ReadOnlyError(f"{type(self).__name__} is immutable; cannot set {name!r}")

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, NumericMetric)
            and type(other) is type(self)
            and self.number() == other.number()
        )

    def __hash__(self) -> int:
        return hash((type(self), self.number()))

    def __repr__(self) -> str:
        return f"{self._type_key}({self.number()!r})"

    def __reduce__(self) -> tuple[Any, tuple[float]]:
        return (type(self), (self.number(),))


def _real(value: object, cls: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(f"{cls} takes a real number, got {type(value).__name__}")
    return float(value)


class Duration(NumericMetric):
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


class Count(NumericMetric):
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


class Percent(NumericMetric):
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


class Ratio(NumericMetric):
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

METRIC_TYPES = (Duration, Count, Percent, Ratio, str)
JSON_KINDS = ("microseconds", "percent", "count", "ratio", "string")
DURATION = "Duration (us)"


def check_metrics(metrics: object, where: str) -> dict[str, Metric]:
    """A copy of ``metrics`` after checking it maps str to metric values."""
    if not isinstance(metrics, Mapping):
        raise ArgumentTypeError(f"{where} must be a dict of metrics, got {type(metrics).__name__}")
    out: dict[str, Metric] = {}
    for name, value in metrics.items():
        if not isinstance(name, str):
            raise ArgumentTypeError(f"{where}: metric name {name!r} must be a str")
        if not isinstance(value, METRIC_TYPES):
            raise ArgumentTypeError(
                f"{where}[{name!r}] must be a Duration, Count, Percent, Ratio or str, "
                f"got {type(value).__name__}"
            )
        out[name] = value
    return out


# -- text of one metric -------------------------------------------------------------------
def json_number(x: float) -> str:
    # C++: std::fixed << std::setprecision(max_digits10) -> 17 digits after the point.
    if math.isfinite(x):
        return format(x, ".17f")
    return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")


def json_string(s: str) -> str:
    return _json.dumps(s, ensure_ascii=False)


def metric_json(value: Metric) -> str:
    if isinstance(value, str):
        return f'{{"string":{json_string(value)}}}'
    if isinstance(value, Count):
        return f'{{"count":{value.value}}}'
    if isinstance(value, Duration):
        return f'{{"microseconds":{json_number(value.microseconds)}}}'
    if isinstance(value, Percent):
        return f'{{"percent":{json_number(value.percent)}}}'
    return f'{{"ratio":{json_number(value.ratio)}}}'


def metrics_json(metrics: Mapping[str, Metric]) -> str:
    items = ",".join(f"{json_string(k)}:{metric_json(v)}" for k, v in metrics.items())
    return "{" + items + "}"


def metric_csv(value: Metric) -> str:
    # C++ default stream formatting: 6 significant digits, like %g.
    if isinstance(value, str):
        return '"' + value.replace('"', '""') + '"'
    if isinstance(value, Count):
        return str(value.value)
    return f"{value.number():g}"


def metric_cell(value: Metric) -> str:
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


def parse_metrics(obj: object, where: str) -> dict[str, Metric]:
    if not isinstance(obj, dict):
        raise ReportFormatError(f"report {where} must be an object, got {type(obj).__name__}")
    return {name: parse_metric(value, f"{where}[{name!r}]") for name, value in obj.items()}


def parse_metric(obj: object, where: str) -> Metric:
    if not isinstance(obj, dict) or len(obj) != 1:
        raise ReportFormatError(
            f"report metric {where} must be an object with one key such as "
            f'{{"microseconds": 1.5}}, got {obj!r}'
        )
    ((kind, value),) = obj.items()
    if kind not in JSON_KINDS:
        raise ReportFormatError(
            f"cannot parse metric {where} of type {kind!r}; valid types are {', '.join(JSON_KINDS)}"
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
