"""What ``tvmrt profile`` derives from a debug run: per-node times, the by-type summary, a trace.

:func:`collect` turns the debug executor's state into :class:`NodeTiming` rows (kernels
only: inputs and params take no time); :func:`by_op_type` groups them the way TFLite's
benchmark tool reports "by node type"; :func:`chrome_trace` writes the run as a Chrome
trace without the zero-length events TVM's own dump has for every param.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tvmrt.runtime.graph_executor.graph import Graph

__all__ = ["NodeTiming", "OpTypeTiming", "by_op_type", "chrome_trace", "collect", "op_type"]

_PREFIX = re.compile(r"^(tvmgen_[A-Za-z0-9]+_)?(fused_)?")
_SUFFIX = re.compile(r"_\d+$")


def op_type(func_name: str) -> str:
    """A kernel's operator type: its function name without TVM's prefixes and index.

    >>> op_type("tvmgen_default_fused_nn_conv2d_add_nn_relu_3")
    'nn_conv2d_add_nn_relu'
    >>> op_type("fused_nn_softmax")
    'nn_softmax'
    """
    name = _PREFIX.sub("", func_name)
    return _SUFFIX.sub("", name) or func_name


@dataclass(frozen=True)
class NodeTiming:
    """One kernel call of the graph: node id and name, function, mean time, output shape."""

    node_id: int
    name: str
    func_name: str
    op_type: str
    mean_us: float
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class OpTypeTiming:
    """All kernel calls of one operator type: count, total and share of the run."""

    op_type: str
    count: int
    total_us: float
    percent: float

    @property
    def mean_us(self) -> float:
        """Mean time of one call of this type."""
        return self.total_us / self.count if self.count else 0.0


def collect(graph: Graph, time_list: Sequence[Sequence[float]]) -> list[NodeTiming]:
    """Kernel rows, in graph order, from the debug run's per-node times (seconds)."""
    rows = []
    for nid, node in enumerate(graph.nodes):
        if node.op == "null":
            continue
        times = time_list[nid] if nid < len(time_list) else []
        mean_us = sum(times) / len(times) * 1e6 if times else 0.0
        eid = graph.entry_id(nid)
        func = node.func_name or node.name
        rows.append(
            NodeTiming(
                nid, node.name, func, op_type(func), mean_us, graph.shapes[eid], graph.dltypes[eid]
            )
        )
    return rows


def by_op_type(rows: Sequence[NodeTiming]) -> list[OpTypeTiming]:
    """Rows grouped by operator type, slowest type first."""
    total = sum(r.mean_us for r in rows)
    groups: dict[str, list[NodeTiming]] = {}
    for row in rows:
        groups.setdefault(row.op_type, []).append(row)
    out = []
    for kind, members in groups.items():
        spent = sum(r.mean_us for r in members)
        out.append(OpTypeTiming(kind, len(members), spent, 100.0 * spent / total if total else 0.0))
    return sorted(out, key=lambda t: (-t.total_us, t.op_type))


def format_by_op_type(types: Sequence[OpTypeTiming]) -> str:
    """The by-type table as text (TFLite's "Summary by node type")."""
    header = ("Operator type", "Count", "Time(us)", "Time(%)", "Avg(us)")
    lines = [
        (t.op_type, str(t.count), f"{t.total_us:.3f}", f"{t.percent:.2f}", f"{t.mean_us:.3f}")
        for t in types
    ]
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header))]

    def fmt(row: Sequence[str]) -> str:
        rest = [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        cells = [row[0].ljust(widths[0]), *rest]
        return "  ".join(cells).rstrip()

    return "\n".join([fmt(header), fmt(["-" * w for w in widths]), *map(fmt, lines)])


def chrome_trace(rows: Sequence[NodeTiming], path: str | Path) -> None:
    """Write the kernels back to back as a Chrome trace (Perfetto, ``chrome://tracing``).

    One complete (``"X"``) event per kernel call, with its operator type and output
    shape as arguments; inputs and params, which take no time, have no events.
    """
    events: list[dict[str, Any]] = []
    start = 0.0
    for row in rows:
        events.append(
            {
                "name": row.name,
                "cat": row.op_type,
                "ph": "X",
                "ts": round(start, 3),
                "dur": round(row.mean_us, 3),
                "pid": 1,
                "tid": 1,
                "args": {"func": row.func_name, "shape": list(row.shape), "dtype": row.dtype},
            }
        )
        start += row.mean_us
    Path(path).write_text(json.dumps({"displayTimeUnit": "ns", "traceEvents": events}))
