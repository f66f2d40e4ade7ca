"""``tvmrt profile --html``: one self-contained HTML page of a profile.

No script, no server, no network: bar charts of time by operator type and of the slowest
kernels (full names, wrapped at ``_``; times in us, ms or s), the graph laid out by depth
and coloured by time (``profile_graph.py``), and the memory pools largest first, each in
its own colour, with the nodes whose outputs live in it. Hovering any shape of the graph
shows its details (SVG ``<title>``).
"""

from __future__ import annotations

import colorsys
import html
from collections.abc import Collection, Sequence

from tvmrt.cli.profile_graph import GRAPH_COLOURS, TIME_SCALE, graph_svg, human_time
from tvmrt.cli.profile_summary import NodeTiming, OpTypeTiming
from tvmrt.runtime.device import MASK2STR
from tvmrt.runtime.graph_executor.graph import Graph
from tvmrt.runtime.graph_executor.storage import StoragePlan

__all__ = ["render_html", "COLOURS", "human_bytes", "pool_colours"]

# Fixed colours (the browser test looks for them in a screenshot).
COLOURS = {"type_bar": "#3182ce", "kernel_bar": "#805ad5", **GRAPH_COLOURS}


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def human_bytes(n: int) -> str:
    """``512 B``, ``3.5 KiB``, ``1.2 MiB``, ``2.0 GiB``."""
    size = float(n)
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def pool_colours(plan: StoragePlan | None) -> dict[int, str]:
    """A distinct colour per pool, by rank in size (hues a golden angle apart)."""
    if plan is None:
        return {}
    out = {}
    ranked = sorted(plan.pools, key=lambda p: (-p.alloc_bytes, p.storage_id))
    for rank, pool in enumerate(ranked):
        hue = (rank * 0.381966) % 1.0
        light = (0.45, 0.62, 0.35)[rank % 3]
        r, g, b = colorsys.hls_to_rgb(hue, light, 0.75)
        out[pool.storage_id] = f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"
    return out


def _breakable(name: str) -> str:
    """``name`` escaped, with a line-break opportunity after every ``_``."""
    return "_<wbr>".join(_esc(part) for part in name.split("_"))


def _pct(value: float, whole: float) -> float:
    """``value`` as a percentage of ``whole`` (0 when ``whole`` is 0)."""
    return 100 * value / whole if whole > 0 else 0.0


def _bar_chart(items: Sequence[tuple[str, float, str]], colour: str, css: str) -> str:
    """Rows of full name, bar (longest = the largest value) and value text."""
    if not items:
        return "<p>no kernels ran</p>"
    top = max(v for _, v, _ in items) or 1.0
    rows = [
        f'<div class="name">{_breakable(label)}</div>'
        f'<div class="track"><div class="bar {css}" style="width:{_pct(value, top):.1f}%;'
        f'background:{colour}"></div></div><div class="value">{_esc(text)}</div>'
        for label, value, text in items
    ]
    return '<div class="chart">' + "".join(rows) + "</div>"


def _pools_html(graph: Graph, plan: StoragePlan | None, colours: dict[int, str]) -> str:
    if plan is None or not plan.pools:
        return "<p>no memory pools</p>"
    users: dict[int, list[str]] = {}
    for nid, node in enumerate(graph.nodes):
        for i in range(node.num_outputs):
            eid = graph.entry_id(nid, i)
            if eid < len(plan.entry_storage):
                users.setdefault(plan.entry_storage[eid], []).append(node.name)
    ranked = sorted(plan.pools, key=lambda p: (-p.alloc_bytes, p.storage_id))
    top = ranked[0].alloc_bytes or 1
    rows = []
    for pool in ranked:
        names = users.get(pool.storage_id, [])
        shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        scope = f", {pool.scope}" if pool.scope else ""
        width = max(0.4, 100 * pool.alloc_bytes / top)
        rows.append(
            f'<tr><td><span class="swatch" style="background:{colours[pool.storage_id]}"></span>'
            f'pool {pool.storage_id}</td><td class="num">{human_bytes(pool.alloc_bytes)}</td>'
            f'<td class="poolbar"><div style="width:{width:.1f}%;'
            f'background:{colours[pool.storage_id]}"></div></td>'
            f"<td>{_esc(MASK2STR.get(pool.device_type, pool.device_type))}{_esc(scope)}</td>"
            f'<td class="users">{_esc(shown)}</td></tr>'
        )
    total = f"<p>{plan.num_pools} pools, {human_bytes(plan.total_bytes)} in all, largest first</p>"
    head = "<tr><th>pool</th><th>size</th><th></th><th>device</th><th>outputs held</th></tr>"
    return total + '<table class="pools">' + head + "".join(rows) + "</table>"


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
        (t.op_type, t.total_us, f"{human_time(t.total_us)} · {t.percent:.1f}% · {t.count}x")
        for t in types
    ]
    slowest = sorted(timings, key=lambda t: -t.mean_us)[:top_kernels]
    kernel_items = [
        (t.name, t.mean_us, f"{human_time(t.mean_us)} · {_pct(t.mean_us, total):.1f}%")
        for t in slowest
    ]
    n_inputs = sum(1 for n in graph.nodes if n.op == "null" and n.name not in params)
    colours = pool_colours(plan)
    slowest_us = max((t.mean_us for t in timings), default=0.0)
    legend = "".join(
        f'<span><span class="swatch" style="background:{COLOURS[k]}"></span>{label}</span>'
        for k, label in (("input", "input"), ("param", "param"))
    )
    lower = 0.0
    for bound, fill, _ in TIME_SCALE:
        upper = min(bound, 1.0) * slowest_us
        span = (
            f"under {human_time(upper)}"
            if lower == 0
            else f"{human_time(lower)}-{human_time(upper)}"
        )
        legend += f'<span><span class="swatch" style="background:{fill}"></span>{span}</span>'
        lower = upper
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>tvmrt profile: {_esc(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 16px; color: #1a202c; background: #ffffff; }}
h1 {{ font-size: 20px; }} h2 {{ font-size: 16px; margin-top: 24px; }}
svg text {{ font-size: 11px; font-family: sans-serif; fill: #1a202c; }}
.chart {{ display: grid; grid-template-columns: minmax(200px, 420px) minmax(200px, 1fr) auto;
  gap: 3px 10px; align-items: center; font-size: 12px; max-width: 1240px; }}
.chart .name {{ text-align: right; overflow-wrap: anywhere; }}
.chart .track {{ height: 14px; }} .chart .bar {{ height: 14px; }}
.chart .value {{ white-space: nowrap; font-variant-numeric: tabular-nums; }}
.swatch {{ display: inline-block; width: 12px; height: 12px; margin-right: 4px;
  vertical-align: -1px; border: 1px solid #cbd5e0; }}
.note {{ font-size: 12px; color: #4a5568; max-width: 1000px; }}
.legend span {{ margin-right: 14px; font-size: 12px; white-space: nowrap; }}
table.pools {{ border-collapse: collapse; font-size: 12px; }}
.pools td, .pools th {{ padding: 2px 8px; text-align: left; vertical-align: top; }}
.pools td.num {{ text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }}
.pools td.poolbar {{ width: 240px; }} .pools td.poolbar div {{ height: 12px; }}
.pools td.users {{ color: #4a5568; max-width: 520px; overflow-wrap: anywhere; }}
</style></head><body>
<h1>tvmrt profile: {_esc(title)}</h1>
<p>{human_time(total)} per run in {len(timings)} kernel calls (mean of each kernel's
timings); {n_inputs} inputs, {len(params)} params, {len(graph.nodes)} nodes;
{human_bytes(plan.total_bytes) if plan else "no"} of planned memory.</p>
<h2>Time by operator type</h2>
{_bar_chart(type_items, COLOURS["type_bar"], "type")}
<h2>Slowest kernels</h2>
{_bar_chart(kernel_items, COLOURS["kernel_bar"], "kernel")}
<h2>Graph</h2>
<p class="legend">{legend}</p>
<p class="note">Kernels are coloured by time (the ranges above, up to the slowest kernel);
a kernel's left stripe is the colour of its output's memory pool; rows are depths from the
inputs, and long graphs continue in the next column. Hover for details.</p>
{graph_svg(graph, params, timings, plan, colours)}
<h2>Memory pools</h2>
{_pools_html(graph, plan, colours)}
</body></html>
"""
