"""TVM's ``VirtualMachineProfiler.profile`` on the two Relay VM engines: the C VM, which calls
back into Python around each kernel call and timed instruction and reports the C side's own
times, against the Python interpreter, whose hooks time each call from Python. Paired, in
one process, through the same face.

Method
------
Both profile the same executable (``relayvm/<case>/vm.so``) with its first golden run's
inputs on ``cpu(0)``, one kernel thread (``TVM_NUM_THREADS=1`` unless set). Per round each
engine makes one report, in alternating order, and gives three figures:

* ``profile()``: the wall time of the call (3 warm-up invokes and the timed one);
* ``rows``: the sum of the report's kernel rows (``Duration (us)`` of the rows not named
  ``VM::``): what the profile says the kernels took;
* ``total``: the report's ``Total`` row, the timed invoke.

The C / Python ratio is taken per round; medians over the rounds are reported. The rows'
sum is the figure a user reads: a Python engine's row holds the kernel and the Python around
it, the C engine's the kernel alone.

Usage::

    .venv/bin/python bench/vm_profiler.py [--rounds 9] [--case cnn-static]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

os.environ.setdefault("TVM_NUM_THREADS", "1")

import numpy as np

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(os.environ.get("TVMRT_ARTIFACTS", REPO.parent / "shared" / "artifacts"))
_ENGINES = ("native", "python")


def _inputs(folder: Path, params: list[str]) -> list[np.ndarray]:
    """``main``'s inputs of the case's first golden run (a case of plain tensor inputs)."""
    with np.load(folder / "golden.npz") as g:
        runs = sorted({k.split("__", 1)[1] for k in g.files if "__" in k})
        suffix = f"__{runs[0]}" if runs else ""
        return [g[p + suffix] for p in params]


def _sample(prof: object, inputs: list[np.ndarray]) -> tuple[float, float, float]:
    start = time.perf_counter()
    report = prof.profile(*inputs)  # type: ignore[attr-defined]
    wall = (time.perf_counter() - start) * 1e6
    rows = sum(
        c["Duration (us)"].microseconds for c in report.calls if not c["Name"].startswith("VM::")
    )
    total = report.device_metrics["cpu0"]["Duration (us)"].microseconds
    return wall, rows, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--case", default="cnn-static")
    args = parser.parse_args()
    from tvmrt import runtime
    from tvmrt.runtime import vm
    from tvmrt.runtime.profiler_vm import VirtualMachineProfiler

    folder = ARTIFACTS / "relayvm" / args.case
    exe = vm.Executable(runtime.load_module(str(folder / "vm.so")))
    inputs = _inputs(folder, exe.get_function_params("main"))
    profs = {e: VirtualMachineProfiler(exe, runtime.cpu(), engine=e) for e in _ENGINES}
    for e, prof in profs.items():
        if prof.engine != e:
            raise SystemExit(f"the {e} engine was not the one used: {prof.engine_reason}")
        _sample(prof, inputs)  # warm
    samples: dict[str, list[tuple[float, float, float]]] = {e: [] for e in _ENGINES}
    ratios: list[tuple[float, float, float]] = []
    for r in range(args.rounds):
        order = _ENGINES if r % 2 == 0 else _ENGINES[::-1]
        got = {e: _sample(profs[e], inputs) for e in order}
        for e in _ENGINES:
            samples[e].append(got[e])
        ratios.append(tuple(c / p for c, p in zip(got["native"], got["python"], strict=True)))  # type: ignore[arg-type]
    print(f"{args.case}, TVM_NUM_THREADS={os.environ['TVM_NUM_THREADS']}, medians of {args.rounds}")
    print("| measure | C engine | Python engine | C / Python |")
    print("|---|---:|---:|---:|")
    for i, label in enumerate(("profile()", "rows (kernels)", "total (timed invoke)")):
        c = statistics.median(s[i] for s in samples["native"])
        py = statistics.median(s[i] for s in samples["python"])
        ratio = statistics.median(x[i] for x in ratios)
        print(f"| {label} | {c:,.1f} us | {py:,.1f} us | {ratio:.2f} |")


if __name__ == "__main__":
    main()
