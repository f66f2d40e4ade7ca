"""TVM's ``AotModule`` face over the two AOT engines on the CPU: the C runtime's AOT executor
(``runtime/executor/_aot_native.py``) against the Python engine (``executor/_aot.py``),
paired, in one process, through the same face.

Method
------
One interpreter loads TVM 0.16's AOT factory (``relay016/aot-so``: a small CNN, weights
linked into the library) twice and makes one executor per engine (``TVMRT_AOT_ENGINE``
set around each ``default(cpu(0))``), with one kernel thread. Both outputs are checked
byte for byte against TVM's golden first. Per round each engine takes one sample of each
measure, in alternating order; each sample is the mean of ``--number`` calls; the ratio
C / Python is taken per round and its median over ``--rounds`` reported, with each side's
median.

* ``run``: ``AotModule.run()``;
* ``set/get``: ``set_input("data", numpy array)`` then ``get_output(0).numpy()``.

Usage::

    .venv/bin/python bench/aot_engines.py [--rounds 15] [--number 2000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("TVM_NUM_THREADS", "1")

import numpy as np

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("TVMRT_FIXTURES_DIR", REPO / "build" / "fixtures"))


def _sample(func: Callable[[], object], number: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(number):
        func()
    return (time.perf_counter_ns() - start) / number / 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--number", type=int, default=2000)
    args = parser.parse_args()

    from tvmrt import runtime
    from tvmrt.runtime.executor.aot_executor import AotModule
    from tvmrt.runtime.native_module import NativeModule

    folder = FIXTURES / "relay016" / "relay016" / "aot-so"
    if not folder.is_dir():
        raise SystemExit(f"no {folder}: run `make test` once (it builds the fixtures)")
    with np.load(folder / "golden.npz") as npz:
        data, want = npz["data"], npz["output_0"]
    mods = {}
    for engine in ("native", "python"):
        os.environ["TVMRT_AOT_ENGINE"] = engine
        executor = runtime.load_module(str(folder / "deploy.so"))["default"](runtime.cpu(0))
        assert isinstance(executor, NativeModule) == (engine == "native"), engine
        m = mods[engine] = AotModule(executor)
        m.set_input("data", data)
        m.run()
        assert m.get_output(0).numpy().tobytes() == want.tobytes(), engine
    del os.environ["TVMRT_AOT_ENGINE"]

    def set_get(m: AotModule) -> Callable[[], object]:
        return lambda: (m.set_input("data", data), m.get_output(0).numpy())

    measures = {
        "run": {e: m.run for e, m in mods.items()},
        "set/get": {e: set_get(m) for e, m in mods.items()},
    }
    times: dict[tuple[str, str], list[float]] = {}
    ratios: dict[str, list[float]] = {}
    for r in range(args.rounds):
        order = ("native", "python") if r % 2 == 0 else ("python", "native")
        for name, funcs in measures.items():
            got = {e: _sample(funcs[e], args.number) for e in order}
            for e, t in got.items():
                times.setdefault((name, e), []).append(t)
            ratios.setdefault(name, []).append(got["native"] / got["python"])
    print(f"TVM_NUM_THREADS={os.environ['TVM_NUM_THREADS']}, medians of {args.rounds} rounds")
    print("| measure | C engine | Python engine | C / Python |")
    print("|---|---:|---:|---:|")
    for name in measures:
        c = statistics.median(times[(name, "native")])
        py = statistics.median(times[(name, "python")])
        print(f"| {name} | {c:.2f} us | {py:.2f} us | {statistics.median(ratios[name]):.2f} |")


if __name__ == "__main__":
    main()
