"""Paired before/after for the device layer: old tree vs this tree, interleaved, one run.

The device layer changed ``NDArray`` (storage + offset + shape + dtype) and the executor's
parameter and copy paths; the CPU path must stay as fast as before. This driver runs the
same measurements on two source trees in alternating subprocesses (``A B A B ...``), so
machine noise (a shared 2-core box) hits both alike, and reports per-side medians:

* ``legacy``: ``bench/legacy.py`` (MobileNet v1/v2 through the graph executor): ``run``
  latency and ``dispatch`` (run - native replay of the same kernels: the Python share);
* ``ndarray``: host ``NDArray`` operations the executor and users call per inference
  (``empty``, ``array``, ``numpy()``, ``copyto``, ``copyfrom``, ``_create_view``),
  microseconds per call.

Usage::

    python bench/device_paired.py --before OLD_CHECKOUT --after . [--rounds 3] [--repeat 20]

OLD_CHECKOUT is a source tree with its native backend built (e.g. a git worktree of an
earlier commit after `pip wheel`/`build_ext`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

_MICRO = r"""
import json, time
import numpy as np
from tvmrt import runtime as rt
x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype("float32")
small = np.arange(16, dtype="float32")
a = rt.array(x); b = rt.empty(x.shape, "float32"); s = rt.array(small)
cases = {
    "empty(1x3x224x224)": lambda: rt.empty(x.shape, "float32"),
    "array(16 floats)": lambda: rt.array(small),
    "numpy(16 floats)": lambda: s.numpy(),
    "copyto(602 KB)": lambda: a.copyto(b),
    "copyfrom(602 KB numpy)": lambda: b.copyfrom(x),
    "_create_view": lambda: a._create_view((3, 224, 224)),
}
out = {}
for name, fn in cases.items():
    for _ in range(200): fn()
    best = []
    for _ in range(7):
        t = time.perf_counter_ns()
        for _ in range(2000): fn()
        best.append((time.perf_counter_ns() - t) / 2000 / 1e3)
    out[name] = min(best)
print(json.dumps(out))
"""


def _legacy(tree: Path, repeat: int) -> dict[str, tuple[float, float]]:
    proc = subprocess.run(
        [sys.executable, "bench/legacy.py", "--repeat", str(repeat), "--warmup", "5"],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree / "src")},
        capture_output=True,
        text=True,
        check=True,
    )
    rows = {}
    for line in proc.stdout.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) > 4 and cells[0].startswith("mobilenet"):
            rows[cells[0]] = (float(cells[2]), float(cells[4].split()[0]))
    return rows


def _micro(tree: Path) -> dict[str, float]:
    proc = subprocess.run(
        [sys.executable, "-c", _MICRO],
        env={**os.environ, "PYTHONPATH": str(tree / "src")},
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(proc.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="tree with the old code")
    parser.add_argument("--after", type=Path, default=Path("."), help="tree with the new code")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=20, help="legacy.py --repeat")
    parser.add_argument("--micro-only", action="store_true", help="skip legacy.py")
    args = parser.parse_args()
    sides = {"before": args.before.resolve(), "after": args.after.resolve()}
    legacy: dict[str, dict[str, list[tuple[float, float]]]] = {s: {} for s in sides}
    micro: dict[str, dict[str, list[float]]] = {s: {} for s in sides}
    for _ in range(args.rounds):
        for side, tree in sides.items():
            rows = {} if args.micro_only else _legacy(tree, args.repeat)
            for model, value in rows.items():
                legacy[side].setdefault(model, []).append(value)
            for name, us in _micro(tree).items():
                micro[side].setdefault(name, []).append(us)
    print(f"{args.rounds} alternating rounds; medians of per-round medians (legacy) / minima")
    print("| model | run ms before | run ms after | dispatch ms before | dispatch ms after |")
    print("|---|---:|---:|---:|---:|")
    for model in legacy["before"]:
        b, a = legacy["before"][model], legacy["after"][model]
        run_b, run_a = statistics.median(r for r, _ in b), statistics.median(r for r, _ in a)
        dis_b, dis_a = statistics.median(d for _, d in b), statistics.median(d for _, d in a)
        print(f"| {model} | {run_b:.2f} | {run_a:.2f} | {dis_b:.3f} | {dis_a:.3f} |")
    print("\n| NDArray op (host) | us before | us after | after/before |")
    print("|---|---:|---:|---:|")
    for name in micro["before"]:
        b_us, a_us = min(micro["before"][name]), min(micro["after"][name])
        print(f"| {name} | {b_us:.2f} | {a_us:.2f} | {a_us / b_us:.2f} |")


if __name__ == "__main__":
    main()
