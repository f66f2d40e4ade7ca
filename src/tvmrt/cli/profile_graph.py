"""The graph of ``tvmrt profile --html``: laid out by depth, kernels coloured by their time.

Every kernel sits on the row of its depth (the longest path from an input), so nodes
that can run in either order share a row. A long chain (MobileNet, ResNet) is folded
into side-by-side columns of consecutive depths, so the page is used in its width and
the graph reads top to bottom, then left to right. A kernel's box carries its full node
name (wrapped at ``_``), its time and share of the run; its fill is the time on a
five-step scale (:data:`TIME_SCALE`), its left stripe the colour of its output's memory
pool, and small squares to its left are the params it reads.
"""

from __future__ import annotations

import html
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from tvmrt.cli.profile_summary import NodeTiming
from tvmrt.runtime.graph_executor.graph import Graph
from tvmrt.runtime.graph_executor.storage import StoragePlan

__all__ = [
    "GRAPH_COLOURS",
    "TIME_SCALE",
    "graph_svg",
    "human_time",
    "time_bin",
    "wrap_name",
]

# Fixed colours (the browser test looks for them in a screenshot).
GRAPH_COLOURS = {"param": "#68d391", "input": "#63b3ed", "edge": "#a0aec0", "untimed": "#e2e8f0"}
# a kernel's fill by its time as a share of the slowest kernel's: (upper bound, fill, text)
TIME_SCALE = (
    (0.05, "#fff5eb", "#1a202c"),
    (0.15, "#fdd0a2", "#1a202c"),
    (0.35, "#fd8d3c", "#1a202c"),
    (0.65, "#d94801", "#ffffff"),
    (math.inf, "#7f2704", "#ffffff"),
)

_BOX_W, _LINE_H, _PARAM = 300, 13, 10
_ROW_GAP, _COL_GAP, _PAGE_W = 22, 48, 1240
_CHARS = 44  # characters of an 11 px sans-serif label that fit a box, with margins
_MAX_NODES_DRAWN = 3000
_FOLD_AFTER = 10  # depths per column before a graph continues in another column


def human_time(us: float) -> str:
    """``12.3 us``, ``4.56 ms``, ``1.23 s``: three significant figures, the fitting unit."""
    for scale, unit in ((1e6, "s"), (1e3, "ms")):
        if us >= scale:
            return f"{us / scale:.3g} {unit}"
    return f"{us:.3g} us"


def time_bin(us: float, slowest: float) -> int:
    """The :data:`TIME_SCALE` step of a kernel taking ``us`` when the slowest takes ``slowest``."""
    share = us / slowest if slowest > 0 else 0.0
    return next(i for i, (bound, _, _) in enumerate(TIME_SCALE) if share < bound)


def wrap_name(name: str, width: int = _CHARS) -> list[str]:
    """``name`` in lines of at most ``width`` characters, broken after ``_`` where it can."""
    lines: list[str] = []
    rest = name
    while len(rest) > width:
        cut = rest.rfind("_", 0, width) + 1 or width
        lines.append(rest[:cut])
        rest = rest[cut:]
    return [*lines, rest] if rest else lines


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


@dataclass
class _Box:
    nid: int
    kind: str  # "input", "param" or "kernel"
    lines: list[str]
    x: float = 0.0
    y: float = 0.0
    w: float = 0.0
    h: float = 0.0


def _depths(graph: Graph, params: Collection[str]) -> tuple[dict[int, int], dict[int, list[int]]]:
    """Depth of every input and kernel, and the params each kernel reads first."""
    depth: dict[int, int] = {}
    owned: dict[int, list[int]] = {}
    seen: set[int] = set()
    for nid, node in enumerate(graph.nodes):
        if node.op == "null":
            if node.name not in params:
                depth[nid] = 0
            continue
        above = [depth[e.node_id] for e in node.inputs if e.node_id in depth]
        depth[nid] = 1 + max(above, default=0)
        for e in node.inputs:
            src = graph.nodes[e.node_id]
            if src.op == "null" and src.name in params and e.node_id not in seen:
                seen.add(e.node_id)
                owned.setdefault(nid, []).append(e.node_id)
    return depth, owned


def _layout(
    graph: Graph, params: Collection[str], labels: Mapping[int, list[str]]
) -> dict[int, _Box]:
    depth, owned = _depths(graph, params)
    rows: dict[int, list[int]] = {}
    for nid in sorted(depth, key=lambda n: (depth[n], n)):
        rows.setdefault(depth[nid], []).append(nid)

    def width(nid: int) -> float:
        return len(owned.get(nid, ())) * (_PARAM + 3) + _BOX_W

    row_w = {r: sum(width(n) + 12 for n in members) for r, members in rows.items()}
    col_w = max(row_w.values(), default=_BOX_W)
    fit = int((_PAGE_W + _COL_GAP) // (col_w + _COL_GAP))
    columns = max(1, min(fit, math.ceil(len(rows) / _FOLD_AFTER)))
    per_col = math.ceil(len(rows) / columns) if rows else 1
    boxes: dict[int, _Box] = {}
    y_of_col = [20.0] * columns
    for r in sorted(rows):
        col = r // per_col
        x, y = 20.0 + col * (col_w + _COL_GAP), y_of_col[col]
        height = max(len(labels[n]) for n in rows[r]) * _LINE_H + 10
        for nid in rows[r]:
            for pid in owned.get(nid, ()):
                py = y + (height - _PARAM) / 2
                boxes[pid] = _Box(pid, "param", [], x, py, _PARAM, _PARAM)
                x += _PARAM + 3
            kind = "input" if graph.nodes[nid].op == "null" else "kernel"
            boxes[nid] = _Box(nid, kind, labels[nid], x, y, _BOX_W, height)
            x += _BOX_W + 12
        y_of_col[col] = y + height + _ROW_GAP
    return boxes


def graph_svg(
    graph: Graph,
    params: Collection[str],
    timings: Sequence[NodeTiming],
    plan: StoragePlan | None,
    pool_colours: Mapping[int, str],
) -> str:
    """The whole graph as one inline SVG (or a note when it is too large to draw)."""
    if len(graph.nodes) > _MAX_NODES_DRAWN:
        return (
            f"<p>the graph has {len(graph.nodes)} nodes; only graphs up to "
            f"{_MAX_NODES_DRAWN} nodes are drawn</p>"
        )
    time_of = {t.node_id: t for t in timings}
    total = sum(t.mean_us for t in timings)
    slowest = max((t.mean_us for t in timings), default=0.0)
    labels: dict[int, list[str]] = {}
    for nid, node in enumerate(graph.nodes):
        if node.op == "null":
            labels[nid] = wrap_name(f"input {node.name}")
            continue
        timing = time_of.get(nid)
        spent = "not timed"
        if timing is not None:
            share = 100 * timing.mean_us / total if total else 0.0
            spent = f"{human_time(timing.mean_us)} · {share:.1f}%"
        labels[nid] = [*wrap_name(node.name), spent]
    boxes = _layout(graph, params, labels)
    edges = []
    for nid, node in enumerate(graph.nodes):
        if nid not in boxes or node.op == "null":
            continue
        dst = boxes[nid]
        for e in node.inputs:
            src = boxes.get(e.node_id)
            if src is None:
                continue
            if src.kind == "param":
                y = src.y + src.h / 2
                edges.append(f"M{src.x + src.w:.0f},{y:.0f}L{dst.x:.0f},{y:.0f}")
                continue
            x1, y1 = src.x + src.w / 2, src.y + src.h
            x2, y2 = dst.x + dst.w / 2, dst.y
            mid = (y1 + y2) / 2 if y2 > y1 else y1 + 20
            top = (y1 + y2) / 2 if y2 > y1 else y2 - 20  # into the next column: from above
            curve = f"C{x1:.0f},{mid:.0f} {x2:.0f},{top:.0f} {x2:.0f},{y2:.0f}"
            edges.append(f"M{x1:.0f},{y1:.0f}{curve}")
    shapes = [_shape(graph, box, time_of, slowest, plan, pool_colours) for box in boxes.values()]
    width = max((b.x + b.w for b in boxes.values()), default=0) + 20
    height = max((b.y + b.h for b in boxes.values()), default=0) + 20
    return (
        f'<svg class="graph" width="{width:.0f}" height="{height:.0f}" '
        'xmlns="http://www.w3.org/2000/svg">'
        f'<path d="{" ".join(edges)}" stroke="{GRAPH_COLOURS["edge"]}" stroke-width="1.2" '
        'fill="none"/>' + "".join(shapes) + "</svg>"
    )


def _shape(
    graph: Graph,
    box: _Box,
    time_of: Mapping[int, NodeTiming],
    slowest: float,
    plan: StoragePlan | None,
    pool_colours: Mapping[int, str],
) -> str:
    node = graph.nodes[box.nid]
    eid = graph.entry_id(box.nid)
    out = f"{graph.shapes[eid]} {graph.dltypes[eid]}"
    pool = None
    if plan is not None and eid < len(plan.entry_storage):
        pool = plan.entry_storage[eid]
    if box.kind == "param":
        return (
            f'<rect class="param" x="{box.x:.0f}" y="{box.y:.0f}" width="{box.w:.0f}" '
            f'height="{box.h:.0f}" fill="{GRAPH_COLOURS["param"]}">'
            f"<title>param {_esc(node.name)}: {_esc(out)}</title></rect>"
        )
    ink = "#1a202c"
    if box.kind == "input":
        fill, tip = GRAPH_COLOURS["input"], f"input {node.name}: {out}"
    else:
        timing = time_of.get(box.nid)
        if timing is None:
            fill, spent = GRAPH_COLOURS["untimed"], "not timed"
        else:
            _, fill, ink = TIME_SCALE[time_bin(timing.mean_us, slowest)]
            spent = human_time(timing.mean_us)
        tip = f"{node.name} ({node.func_name}): {spent}; output {out}"
    stripe = ""
    if pool is not None:
        tip += f"; pool {pool}"
        stripe = (
            f'<rect x="{box.x:.0f}" y="{box.y:.0f}" width="6" height="{box.h:.0f}" '
            f'fill="{pool_colours.get(pool, GRAPH_COLOURS["edge"])}"/>'
        )
    text = "".join(
        f'<tspan x="{box.x + 12:.0f}" dy="{_LINE_H if i else 0}">{_esc(line)}</tspan>'
        for i, line in enumerate(box.lines)
    )
    return (
        f'<g class="{box.kind}"><title>{_esc(tip)}</title>'
        f'<rect x="{box.x:.0f}" y="{box.y:.0f}" width="{box.w:.0f}" height="{box.h:.0f}" '
        f'rx="4" fill="{fill}" stroke="#cbd5e0"/>{stripe}'
        f'<text y="{box.y + 15:.0f}" style="fill:{ink}">{text}</text></g>'
    )
