"""Profiling reports (TVM's ``tvm.runtime.profiling``): metrics, ``Report`` and ``Profiler``.

A :class:`Report` (``report``) holds one dict of metrics per call, per-device totals and
the run's configuration, and prints them as a table, CSV or JSON in TVM v0.19's formats
(``src/runtime/profiling.cc``). :class:`Profiler` (``profiler``) builds a report the way
TVM's C++ profiler does; the debug executor drives it. The metric types and their text
are in ``metrics``. :func:`profile_function` runs one function with
:class:`MetricCollector` s around it (``collect``).

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

from __future__ import annotations

from tvmrt.runtime.device import Device
from tvmrt.runtime.object_base import Object
from tvmrt.runtime.profiling.collect import DeviceWrapper, MetricCollector, profile_function
from tvmrt.runtime.profiling.metrics import Count, Duration, Metric, Percent, Ratio
from tvmrt.runtime.profiling.profiler import Profiler, device_string
from tvmrt.runtime.profiling.report import Report

__all__ = [
    "Count",
    "Duration",
    "Percent",
    "Ratio",
    "Metric",
    "Report",
    "Profiler",
    "device_string",
    "profile_function",
    "MetricCollector",
    "DeviceWrapper",
    "Device",
    "Object",
]
