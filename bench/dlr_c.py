"""A Neo model from DLR's C API (libdlr.so) against the same model from DLR's Python API
(tvmrt.dlr): cold start, process spawn to exit, paired.

Method
------
``examples/cpp/dlr_model.c`` (a DLR program: CreateDLRModel, SetDLRInput, RunDLRModel,
GetDLROutput, outputs written to files) is built against ``libdlr.so`` from ``make native``
into a temporary folder. The Python side is a DLR script's flow through ``tvmrt.dlr``
(``DLRModel(folder).run({...})``, outputs written to files). Each round runs both once, in
an order rotated per round, with the page cache warm; the ratio Python / C is taken per
round and the median over rounds reported. Both programs' outputs are checked byte for
byte against the golden outputs TVM 0.16 gave (``neo-cpu.npz``).

Usage::

    .venv/bin/python bench/dlr_c.py [--rounds 9] [--neo build/dlr/<hash>]

The Neo folders are the ones ``tests/dlr`` and ``tests/native/test_dlr_c.py`` build
(``build/dlr/<hash>/``: run one of them once first).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
PYTHON_DLR = """
import sys, numpy as np
from tvmrt import dlr
folder, out = sys.argv[1], sys.argv[2]
golden = np.load(folder + ".npz")
outputs = dlr.DLRModel(folder + "/neo-cpu").run({"data": golden["data"], "mask": golden["mask"]})
for i, o in enumerate(outputs):
    o.tofile(f"{out}/output_{i}.bin")
"""


def _wall(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = (time.perf_counter() - start) * 1e3
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return wall


def _neo_root(given: Path | None) -> Path:
    if given is not None:
        return given
    found = sorted((REPO / "build" / "dlr").glob("*/done"), key=lambda p: p.stat().st_mtime)
    if not found:
        sys.exit("no Neo folders in build/dlr: run pytest tests/dlr once, or pass --neo")
    return found[-1].parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--neo", type=Path, default=None, help="build/dlr/<hash>")
    args = parser.parse_args()
    root = _neo_root(args.neo)
    golden = np.load(root / "neo-cpu.npz")
    with tempfile.TemporaryDirectory(prefix="tvmrt-dlr-c-") as tmp:
        work = Path(tmp)
        native = work / "native"
        subprocess.run(["make", "-s", "native", f"NATIVE_DIR={native}"], cwd=REPO, check=True)
        exe = work / "dlr_model"
        subprocess.run(
            ["cc", "-std=c11", "-O2", str(REPO / "examples" / "cpp" / "dlr_model.c"),
             f"-I{REPO / 'src' / 'tvmrt' / 'include'}", f"-L{native}", "-ldlr",
             f"-Wl,-rpath,{native}", "-o", str(exe)],
            check=True,
        )  # fmt: skip
        shutil.copytree(root / "neo-cpu", work / "model" / "neo-cpu")
        shutil.copy(root / "neo-cpu.npz", work / "model.npz")
        golden["data"].tofile(work / "data.bin")
        golden["mask"].tofile(work / "mask.bin")
        env = dict(os.environ, TVM_NUM_THREADS="1", PYTHONPATH=str(REPO / "src"))
        env.pop("LD_LIBRARY_PATH", None)
        outs = {"C (libdlr.so)": work / "out-c", "Python (tvmrt.dlr)": work / "out-py"}
        for out in outs.values():
            out.mkdir()
        commands = {
            "C (libdlr.so)": [str(exe), str(work / "model" / "neo-cpu"), str(outs["C (libdlr.so)"]),
                              f"data={work / 'data.bin'}", f"mask={work / 'mask.bin'}"],
            "Python (tvmrt.dlr)": [sys.executable, "-c", PYTHON_DLR, str(work / "model"),
                                   str(outs["Python (tvmrt.dlr)"])],
        }  # fmt: skip
        names = list(commands)
        walls: dict[str, list[float]] = {n: [] for n in names}
        for r in range(args.rounds):
            for name in names[r % 2 :] + names[: r % 2]:
                walls[name].append(_wall(commands[name], env))
                for i in range(2):
                    produced = (outs[name] / f"output_{i}.bin").read_bytes()
                    if produced != golden[f"out_{i}"].tobytes():
                        sys.exit(f"{name}: output {i} differs from TVM 0.16's")
    c, py = walls["C (libdlr.so)"], walls["Python (tvmrt.dlr)"]
    ratio = statistics.median(p / q for p, q in zip(py, c, strict=True))
    print(f"Neo CPU model (tests/dlr's neo-cpu), 1 thread, {args.rounds} rounds")
    print("| program | cold start ms (median) |")
    print("|---|---:|")
    for name in names:
        print(f"| {name} | {statistics.median(walls[name]):.1f} |")
    print(f"Python / C, median of the per-round ratios: {ratio:.1f}x")
    print("both programs' outputs equal TVM 0.16's byte for byte")


if __name__ == "__main__":
    main()
