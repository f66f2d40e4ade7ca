"""``tvmrt profile``: the by-type summary, the trace and the HTML report (rendered in Chromium).

The HTML test opens the report in a real headless Chromium (Debian's ``chromium``),
takes a screenshot and checks, pixel by pixel, that the charts and the graph were
drawn: each of the report's fixed colours covers an area, in the page's order. It is
skipped where no Chromium is installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tvmrt.cli.profile_graph import TIME_SCALE, human_time, wrap_name
from tvmrt.cli.profile_html import COLOURS, human_bytes

CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser")) if p), None)


@pytest.fixture(scope="module")
def profiled(artifacts: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("profile")
    folder = artifacts / "mobilenet_v1"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tvmrt",
            "profile",
            str(folder),
            "--number",
            "1",
            "--html",
            str(out / "report.html"),
            "--trace",
            str(out / "trace.json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    graph = json.loads((folder / "deploy_graph.json").read_text())
    return {"out": out, "stdout": done.stdout, "graph": graph}


def _kernels_and_nulls(graph: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    kernels = [n for n in graph["nodes"] if n["op"] == "tvm_op"]
    nulls = [n["name"] for n in graph["nodes"] if n["op"] == "null"]
    return kernels, nulls


def test_summary_by_operator_type_counts_every_kernel(profiled):
    kernels, _ = _kernels_and_nulls(profiled["graph"])
    text = profiled["stdout"].split("Summary by operator type", 1)[1]
    rows = [line.split() for line in text.strip().splitlines()[3:] if line.strip()]
    rows = [r for r in rows if len(r) == 5]
    assert sum(int(r[1]) for r in rows) == len(kernels)
    assert abs(sum(float(r[3]) for r in rows) - 100.0) < 0.1
    times = [float(r[2]) for r in rows]
    assert times == sorted(times, reverse=True)  # slowest type first
    # TVM's fused names, without prefix and index: conv2d types are there
    assert any(r[0].startswith("nn_contrib_conv2d_NCHWc") for r in rows)


def test_trace_has_one_event_per_kernel_and_none_for_params(profiled):
    kernels, nulls = _kernels_and_nulls(profiled["graph"])
    events = json.loads((profiled["out"] / "trace.json").read_text())["traceEvents"]
    assert [e["name"] for e in events] == [n["name"] for n in kernels]
    assert not {e["name"] for e in events} & set(nulls)
    assert all(e["ph"] == "X" and e["dur"] > 0 for e in events)
    ends = [e["ts"] + e["dur"] for e in events]
    assert all(abs(e["ts"] - end) < 1e-2 for e, end in zip(events[1:], ends, strict=False))


def test_html_report_is_self_contained_and_draws_every_node(profiled):
    page = (profiled["out"] / "report.html").read_text()
    kernels, nulls = _kernels_and_nulls(profiled["graph"])
    for fetch in ("<script", "src=", "href=", "url(", "@import", "<link"):
        assert fetch not in page, fetch
    assert page.replace('xmlns="http://www.w3.org/2000/svg"', "").count("http") == 0
    assert page.count('<g class="kernel">') == len(kernels)
    assert page.count('<g class="input">') == 1  # mobilenet_v1's "data"
    assert page.count('<rect class="param"') == len(nulls) - 1
    assert "Time by operator type" in page
    assert "Memory pools" in page


def test_html_report_names_are_whole_units_human_pools_sorted_and_distinct(profiled):
    page = (profiled["out"] / "report.html").read_text()
    plain = page.replace("<wbr>", "")
    kernels, _ = _kernels_and_nulls(profiled["graph"])
    charts = plain.split("<h2>Graph</h2>", 1)[0]
    # the slowest-kernel chart lists 25 names, each whole and each once
    listed = re.findall(r'<div class="name">([^<]+)</div>', charts.split("Slowest kernels")[1])
    assert len(listed) == 25
    assert len(set(listed)) == 25
    assert set(listed) <= {n["name"] for n in kernels}
    # graph boxes carry the full node name, wrapped at "_" into lines of tspans
    graph = page.split("<h2>Graph</h2>", 1)[1].split("<h2>Memory pools</h2>")[0]
    lines = re.findall(r"<tspan[^>]*>([^<]*)</tspan>", graph)
    for node in kernels:
        assert all(part in lines for part in wrap_name(node["name"])), node["name"]
    # human units: no "331,041.6 us"
    assert not re.search(r"\d,\d{3}(\.\d+)? us", page)
    assert re.search(r"<p>[\d.]+ (us|ms|s) per run in 45 kernel calls", page)
    # pools: largest first, each its own colour
    rows = re.findall(
        r'background:(#[0-9a-f]{6})"></span>pool (\d+)</td><td class="num">([^<]+)<', page
    )
    assert len(rows) == 110
    units = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
    sizes = [float(t.split()[0]) * units[t.split()[1]] for _, _, t in rows]
    assert sizes == sorted(sizes, reverse=True)
    assert len({colour for colour, _, _ in rows}) == len(rows)
    assert len({pool for _, pool, _ in rows}) == len(rows)


def test_human_units():
    assert human_time(0.869) == "0.869 us"
    assert human_time(331041.6) == "331 ms"
    assert human_time(2.5e6) == "2.5 s"
    assert human_bytes(512) == "512 B"
    assert human_bytes(4 * 1024**2) == "4.0 MiB"
    assert wrap_name("fused_nn_contrib_conv2d_NCHWc_add_multiply_add_nn_relu_3", 30) == [
        "fused_nn_contrib_conv2d_NCHWc_",
        "add_multiply_add_nn_relu_3",
    ]
    assert wrap_name("x" * 70, 30) == ["x" * 30, "x" * 30, "x" * 10]  # no "_": cut hard


def _read_png(path: Path) -> np.ndarray[Any, Any]:
    """RGB pixels of an 8-bit, non-interlaced PNG (what Chromium writes)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, [], None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
    assert header is not None
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8
    assert interlace == 0
    assert colour in (2, 6)
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    out = np.zeros((height, stride), np.uint8)
    prev = [0] * stride
    for y in range(height):
        kind = raw[y * (stride + 1)]
        cur = list(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride) if kind else ():
            a = cur[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                pred = a
            elif kind == 2:
                pred = b
            elif kind == 3:
                pred = (a + b) >> 1
            else:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            cur[i] = (cur[i] + pred) & 255
        out[y] = cur
        prev = cur
    return out.reshape(height, width, bpp)[:, :, :3]


def _rows_of(image: np.ndarray[Any, Any], hex_colour: str) -> np.ndarray[Any, Any]:
    rgb = [int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)]
    mask = np.all(np.abs(image.astype(int) - rgb) <= 2, axis=2)
    return np.nonzero(mask)[0]


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium (apt-get install chromium)")
def test_html_report_renders_charts_and_graph_in_headless_chromium(profiled, tmp_path):
    shot = profiled["out"] / "report.png"
    done = subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'chromium-profile'}",
            "--hide-scrollbars",
            "--force-color-profile=srgb",
            "--window-size=1280,1600",
            f"--screenshot={shot}",
            (profiled["out"] / "report.html").as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    keep = os.environ.get("TVMRT_SCREENSHOT_DIR")
    if keep:
        shutil.copy(shot, Path(keep) / "profile_report.png")
    image = _read_png(shot)
    assert image.shape == (1600, 1280, 3)
    rows = {name: _rows_of(image, COLOURS[name]) for name in ("type_bar", "kernel_bar", "input")}
    rows["param"] = _rows_of(image, COLOURS["param"])
    by_time = [_rows_of(image, fill) for _, fill, _ in TIME_SCALE]
    rows["kernel"] = np.concatenate(by_time)
    # every part was painted over an area, not a stray pixel
    assert len(rows["type_bar"]) > 3000, "the by-type bar chart did not render"
    assert len(rows["kernel_bar"]) > 5000, "the slowest-kernel chart did not render"
    assert len(rows["kernel"]) > 20000, "no kernel boxes in the graph"
    # coloured by time: at least three steps of the scale fill boxes
    assert sum(len(r) > 2000 for r in by_time) >= 3
    assert len(rows["input"]) > 2000, "the graph's input is missing"
    assert len(rows["param"]) > 500, "the graph's params are missing"
    # in the page's order: type chart, kernel chart, then the graph (input above kernels)
    assert rows["type_bar"].max() < rows["kernel_bar"].min()
    assert rows["kernel_bar"].max() < np.median(rows["kernel"])
    assert np.median(rows["input"]) < np.median(rows["kernel"])
    # the legend shows the colours too; the graph's own input box is wider than 100 px
    assert int(np.bincount(rows["input"]).max()) > 100
