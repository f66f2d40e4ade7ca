"""``tvmrt profile --html``: one self-contained HTML page of a profile.

Inline SVG only (no script, no server, no network): a bar chart of time by operator
type, a bar chart of the slowest kernels, the memory pools, and the graph drawn top to
bottom with its inputs, kernels (coloured by their output's pool) and params. Hovering
any shape shows its details (SVG ``<title>``).
"""

from __future__ import annotations

import html
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from tvmrt.cli.profile_summary import NodeTiming, OpTypeTiming
from tvmrt.runtime.graph_executor.graph import Graph
from tvmrt.runtime.graph_executor.storage import StoragePlan

__all__ = ["render_html", "COLOURS"]

# Fixed colours (the browser test looks for them in a screenshot).
COLOURS = {
    "type_bar": "#3182ce",
    "kernel_bar": "#805ad5",
    "kernel": "#f6ad55",
    "param": "#68d391",
    "input": "#63b3ed",
    "edge": "#a0aec0",
}
_POOL_PALETTE = ["#e53e3e", "#d69e2e", "#38a169", "#319795", "#3c366b", "#b83280", "#2c5282"]

_KERNEL_W, _KERNEL_H, _PARAM = 230, 34, 12
_ROW_H, _GAP = 64, 18
_MAX_NODES_DRAWN = 3000


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _bar_chart(items: Sequence[tuple[str, float, str]], colour: str, unit: str = "us") -> str:
    """Horizontal bars: (label, value, tooltip) each, longest bar = the largest value."""
    if not items:
        return "<p>no kernels ran</p>"
    label_w, bar_w, row = 380, 520, 22
    top = max(v for _, v, _ in items) or 1.0
    parts = [
        f'<svg class="chart" width="{label_w + bar_w + 120}" height="{row * len(items) + 8}" '
        'xmlns="http://www.w3.org/2000/svg">'
    ]
    for i, (label, value, tip) in enumerate(items):
        y = 4 + i * row
        width = max(2.0, bar_w * value / top)
        shown = label if len(label) <= 52 else label[:49] + "..."
        parts.append(
            f"<g><title>{_esc(tip)}</title>"
            f'<text x="{label_w - 8}" y="{y + 15}" text-anchor="end">{_esc(shown)}</text>'
            f'<rect x="{label_w}" y="{y}" width="{width:.1f}" height="{row - 6}" fill="{colour}"/>'
            f'<text x="{label_w + width + 6:.1f}" y="{y + 15}">{value:,.1f} {unit}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)


@dataclass
class _Box:
    nid: int
    kind: str  # "input", "param" or "kernel"
    x: float = 0.0
    y: float = 0.0
    w: float = 0.0
    h: float = 0.0

    @property
    def bottom(self) -> tuple[float, float]:
        return self.x + self.w / 2, self.y + self.h

    @property
    def top(self) -> tuple[float, float]:
        return self.x + self.w / 2, self.y


def _layout(graph: Graph, params: Collection[str]) -> dict[int, _Box]:
    """Rows by depth (inputs first); each kernel's params sit just left of it."""
    depth: dict[int, int] = {}
    consumers: dict[int, int] = {}
    for nid, node in enumerate(graph.nodes):
        if node.op == "null":
            if node.name not in params:
                depth[nid] = 0
            continue
        above = [depth[e.node_id] for e in node.inputs if e.node_id in depth]
        depth[nid] = 1 + max(above, default=0)
        for e in node.inputs:
            if graph.nodes[e.node_id].op == "null" and graph.nodes[e.node_id].name in params:
                consumers.setdefault(e.node_id, nid)
    rows: dict[int, list[int]] = {}
    for nid in sorted(depth, key=lambda n: (depth[n], n)):
        rows.setdefault(depth[nid], []).append(nid)
    owned: dict[int, list[int]] = {}
    for pid, kid in consumers.items():
        owned.setdefault(kid, []).append(pid)
    boxes: dict[int, _Box] = {}
    for r, members in rows.items():
        x, y = 20.0, 20.0 + r * _ROW_H
        for nid in members:
            for pid in sorted(owned.get(nid, [])):
                boxes[pid] = _Box(pid, "param", x, y + (_KERNEL_H - _PARAM) / 2, _PARAM, _PARAM)
                x += _PARAM + 4
            kind = "input" if graph.nodes[nid].op == "null" else "kernel"
            boxes[nid] = _Box(nid, kind, x, y, _KERNEL_W, _KERNEL_H)
            x += _KERNEL_W + _GAP
    return boxes


def _graph_svg(
    graph: Graph, params: Collection[str], timings: Sequence[NodeTiming], plan: StoragePlan | None
) -> str:
    if len(graph.nodes) > _MAX_NODES_DRAWN:
        return (
            f"<p>the graph has {len(graph.nodes)} nodes; only graphs up to "
            f"{_MAX_NODES_DRAWN} nodes are drawn</p>"
        )
    boxes = _layout(graph, params)
    time_of = {t.node_id: t for t in timings}
    width = max((b.x + b.w for b in boxes.values()), default=0) + 20
    height = max((b.y + b.h for b in boxes.values()), default=0) + 20
    edges, shapes = [], []
    for nid, node in enumerate(graph.nodes):
        if nid not in boxes or node.op == "null":
            continue
        x2, y2 = boxes[nid].top
        for e in node.inputs:
            src = boxes.get(e.node_id)
            if src is None:
                continue
            if src.kind == "param":
                x1, y1 = src.x + src.w, src.y + src.h / 2
                y2m = boxes[nid].y + boxes[nid].h / 2
                edges.append(f"M{x1:.0f},{y1:.0f}L{boxes[nid].x:.0f},{y2m:.0f}")
            else:
                x1, y1 = src.bottom
                mid = (y1 + y2) / 2
                curve = f"C{x1:.0f},{mid:.0f} {x2:.0f},{mid:.0f} {x2:.0f},{y2:.0f}"
                edges.append(f"M{x1:.0f},{y1:.0f}{curve}")
    for nid, box in boxes.items():
        node = graph.nodes[nid]
        eid = graph.entry_id(nid)
        shape, dtype = graph.shapes[eid], graph.dltypes[eid]
        pool = None
        if plan is not None and eid < len(plan.entry_storage):
            pool = plan.entry_storage[eid]
        if box.kind == "param":
            tip = f"param {node.name}: {shape} {dtype}"
            shapes.append(
                f'<rect class="param" x="{box.x:.0f}" y="{box.y:.0f}" width="{box.w:.0f}" '
                f'height="{box.h:.0f}" fill="{COLOURS["param"]}"><title>{_esc(tip)}</title></rect>'
            )
            continue
        if box.kind == "input":
            fill, label = COLOURS["input"], f"input {node.name}"
            tip = f"input {node.name}: {shape} {dtype}"
        else:
            timing = time_of.get(nid)
            fill = COLOURS["kernel"]
            spent = f"{timing.mean_us:,.1f} us" if timing else "not timed"
            label = f"{timing.op_type if timing else node.func_name} · {spent}"
            tip = f"{node.name} ({node.func_name}): {spent}; output {shape} {dtype}"
        if pool is not None:
            tip += f"; pool {pool}"
        shown = label if len(label) <= 36 else label[:33] + "..."
        stripe = ""
        if pool is not None:
            colour = _POOL_PALETTE[pool % len(_POOL_PALETTE)]
            stripe = (
                f'<rect x="{box.x:.0f}" y="{box.y:.0f}" width="6" height="{box.h:.0f}" '
                f'fill="{colour}"/>'
            )
        shapes.append(
            f'<g class="{box.kind}"><title>{_esc(tip)}</title>'
            f'<rect x="{box.x:.0f}" y="{box.y:.0f}" width="{box.w:.0f}" height="{box.h:.0f}" '
            f'rx="4" fill="{fill}"/>{stripe}'
            f'<text x="{box.x + 12:.0f}" y="{box.y + 21:.0f}">{_esc(shown)}</text></g>'
        )
    path = " ".join(edges)
    return (
        f'<svg class="graph" width="{width:.0f}" height="{height:.0f}" '
        'xmlns="http://www.w3.org/2000/svg">'
        f'<path d="{path}" stroke="{COLOURS["edge"]}" stroke-width="1.5" fill="none"/>'
        + "".join(shapes)
        + "</svg>"
    )


def _pools_svg(plan: StoragePlan | None) -> str:
    if plan is None or not plan.pools:
        return "<p>no memory pools</p>"
    items = []
    for pool in plan.pools:
        colour = _POOL_PALETTE[pool.storage_id % len(_POOL_PALETTE)]
        scope = f", scope {pool.scope}" if pool.scope else ""
        items.append(
            f'<li><svg width="14" height="14"><rect width="14" height="14" fill="{colour}"/></svg> '
            f"pool {pool.storage_id}: {pool.alloc_bytes:,} bytes "
            f"(device type {pool.device_type}{scope})</li>"
        )
    total = f"<p>{plan.num_pools} pools, {plan.total_bytes:,} bytes in all</p>"
    return total + '<ul class="pools">' + "".join(items) + "</ul>"


def render_html(
    title: str,
    graph: Graph,
    params: Collection[str],
    timings: Sequence[NodeTiming],
    types: Sequence[OpTypeTiming],
    plan: StoragePlan | None,
    top_kernels: int = 25,
) -> str:
    """The whole report page."""
    total = sum(t.mean_us for t in timings)
    type_items = [
        (
            t.op_type,
            t.total_us,
            f"{t.op_type}: {t.count} calls, {t.total_us:,.1f} us, {t.percent:.1f}%",
        )
        for t in types
    ]
    slowest = sorted(timings, key=lambda t: -t.mean_us)[:top_kernels]
    kernel_items = [
        (t.name, t.mean_us, f"{t.name} ({t.func_name}): {t.mean_us:,.1f} us, output {t.shape}")
        for t in slowest
    ]
    n_inputs = sum(1 for n in graph.nodes if n.op == "null" and n.name not in params)
    legend = "".join(
        f'<span><svg width="14" height="14"><rect width="14" height="14" fill="{COLOURS[k]}"/>'
        f"</svg> {label}</span> "
        for k, label in (("input", "input"), ("kernel", "kernel"), ("param", "param"))
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>tvmrt profile: {_esc(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 16px; color: #1a202c; background: #ffffff; }}
h1 {{ font-size: 20px; }} h2 {{ font-size: 16px; margin-top: 24px; }}
svg text {{ font-size: 11px; font-family: sans-serif; fill: #1a202c; }}
.pools {{ list-style: none; padding: 0; columns: 3; font-size: 12px; }}
.legend span {{ margin-right: 16px; font-size: 12px; }}
</style></head><body>
<h1>tvmrt profile: {_esc(title)}</h1>
<p>{len(timings)} kernel calls, {total:,.1f} us in all (mean per run); {n_inputs} inputs,
{len(params)} params, {len(graph.nodes)} nodes.</p>
<h2>Time by operator type</h2>
{_bar_chart(type_items, COLOURS["type_bar"])}
<h2>Slowest kernels</h2>
{_bar_chart(kernel_items, COLOURS["kernel_bar"])}
<h2>Graph</h2>
<p class="legend">{legend} (a kernel's left stripe is the colour of its output's memory pool;
hover for details)</p>
{_graph_svg(graph, params, timings, plan)}
<h2>Memory pools</h2>
{_pools_svg(plan)}
</body></html>
"""
