"""Per-invoke time of the Relay VM from Python, TVM's face on both sides: tvmrt's
``VirtualMachine`` on the C VM (``engine="native"``) and on the Python interpreter
(``engine="python"``), against TVM 0.16's own C++ VM from TVM 0.16's Python (the hhb-tvm
peer venv), on relayvm/cnn-static and relayvm/dyn-batch-mlp at batch 1 and 64.

Method
------
Each side is a separate process running the same child code: load ``vm.so``
(``load_module``), ``VirtualMachine(exe, cpu())``, the input as a runtime NDArray, then
``vm.invoke("main", x)`` (TVM's face: set_input, invoke, an NDArray back; with ``--numpy``
its ``.numpy()`` too) timed in a loop;
it prints the median of 5 batches of ``--repeat`` calls. One round runs every side once per
case, in an order that alternates between rounds; ratios are taken per round and the median
over ``--rounds`` is reported. One kernel thread (``TVM_NUM_THREADS=1``).

    python bench/vm_face.py [--rounds 5] [--repeat 200]
        [--tvm016 PEER_VENV]   # default: $TVMRT_PEERS_DIR/tvm016 or build/peers/tvm016
        [--numpy]              # time invoke(...).numpy(), the result read
        [--before SRC]         # a side more: the C VM from another checkout's src/ (a
                               # worktree of an older commit, its native libraries built)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(os.environ.get("TVMRT_ARTIFACTS", REPO.parent / "shared" / "artifacts"))

CHILD = r"""
import statistics, sys, time
import numpy as np
side, folder, shape, repeat = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
read = sys.argv[5] == "1"  # each result's numpy() too
side = "native" if side == "before" else side
if side == "tvm016":
    import tvm
    from tvm.runtime import vm as vm_rt
    rt = tvm.runtime
    vm = vm_rt.VirtualMachine(rt.load_module(folder + "/vm.so"), tvm.cpu())
    make = tvm.nd.array
else:
    import tvmrt.runtime as rt
    from tvmrt.runtime import vm as vm_rt
    vm = vm_rt.VirtualMachine(rt.load_module(folder + "/vm.so"), rt.cpu(), engine=side)
    assert vm.engine == side, vm.engine_reason
    make = rt.array
if shape == "golden":
    data = np.load(folder + "/golden.npz")["data"]
else:
    dims = tuple(int(d) for d in shape.split("x"))
    data = np.random.default_rng(0).standard_normal(dims).astype("float32")
x = make(data)
for _ in range(20):
    vm.invoke("main", x)
per = []
for _ in range(5):
    start = time.perf_counter_ns()
    if read:
        for _ in range(repeat):
            vm.invoke("main", x).numpy()
    else:
        for _ in range(repeat):
            vm.invoke("main", x)
    per.append((time.perf_counter_ns() - start) / repeat)
print(statistics.median(per))
"""

CASES = {
    "cnn-static": ("cnn-static", "golden"),
    "dyn-batch-mlp b1": ("dyn-batch-mlp", "1x16"),
    "dyn-batch-mlp b64": ("dyn-batch-mlp", "64x16"),
}
SIDES = ("native", "tvm016", "python")


def _python(venv: Path) -> Path:
    exe = venv / "bin" / "python"
    if not exe.exists():
        sys.exit(f"no peer venv at {venv} (run the peer tests once, or pass --tvm016)")
    return exe


def _time(
    side: str, tvm016: Path, case: str, repeat: int, before: Path | None, read: bool
) -> float:
    folder, shape = CASES[case]
    env = dict(os.environ, TVM_NUM_THREADS="1")
    if side == "tvm016":
        cmd = [str(_python(tvm016))]
        env.pop("PYTHONPATH", None)
    else:
        cmd = [sys.executable]
        env["PYTHONPATH"] = str(before if side == "before" else REPO / "src")
    out = subprocess.run(
        [
            *cmd,
            "-c",
            CHILD,
            side,
            str(ARTIFACTS / "relayvm" / folder),
            shape,
            str(repeat),
            str(int(read)),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        sys.exit(f"{side} on {case} failed:\n{out.stderr[-3000:]}")
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    peers = Path(os.environ.get("TVMRT_PEERS_DIR", REPO / "build" / "peers"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--tvm016", type=Path, default=peers / "tvm016")
    parser.add_argument("--before", type=Path, default=None)
    parser.add_argument("--numpy", action="store_true", help="time invoke(...).numpy()")
    args = parser.parse_args()
    sides = SIDES + (("before",) if args.before else ())
    times: dict[tuple[str, str], list[float]] = {}
    ratios: dict[tuple[str, str], list[float]] = {}
    for r in range(args.rounds):
        order = sides if r % 2 == 0 else sides[::-1]
        for case in CASES:
            got = {
                side: _time(side, args.tvm016, case, args.repeat, args.before, args.numpy)
                for side in order
            }
            for side, t in got.items():
                times.setdefault((case, side), []).append(t)
                ratios.setdefault((case, side), []).append(t / got["tvm016"])
            if args.before:  # this change against the checkout before it, paired per round
                ratios.setdefault((case, "after"), []).append(got["native"] / got["before"])
    call = 'vm.invoke("main", x)' + (".numpy()" if args.numpy else "")
    print(f"{args.rounds} rounds, {args.repeat} x 5 batches of {call} per process, 1 thread")
    head = "| executable | TVM 0.16 VM | tvmrt, C VM | ratio | tvmrt, Python VM | ratio |"
    print(head + (" C VM, --before | ratio | C VM / --before |" if args.before else ""))
    print("|---|---:|---:|---:|---:|---:|" + ("---:|---:|---:|" if args.before else ""))
    for case in CASES:
        cells = [f"{statistics.median(times[(case, 'tvm016')]) / 1e3:.1f} us"]
        for side in ("native", "python", "before")[: len(sides) - 1]:
            cells.append(f"{statistics.median(times[(case, side)]) / 1e3:.1f} us")
            cells.append(f"{statistics.median(ratios[(case, side)]):.2f}x")
        if args.before:
            cells.append(f"{statistics.median(ratios[(case, 'after')]):.2f}x")
        print(f"| {case} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
