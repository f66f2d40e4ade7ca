"""TVM's ``GraphModule`` face over the two graph engines on the CPU: the C runtime's graph
executor (libtvmrt_runtime, reached through ``native_module``) against the Python engine
(``tvmrt.runtime.graph_executor``), paired, in one process, through the same face.

Method
------
Both engines run the same library with the same params on ``cpu(0)``, with one kernel
thread (``TVM_NUM_THREADS=1`` unless set: the figures are of the engines, not of the
kernels' parallel speed-up). Before timing, each engine's output is checked byte for byte
against TVM 0.16's golden. Per round, each engine takes one sample of each measurement, in
alternating order; the ratio C / Python is taken per round and its median over the rounds
is reported, with each side's median.

* ``run``: ``GraphModule.run()`` (the graph's kernels plus the engine's per-node work),
  averaged over ``--number`` calls;
* ``set/get``: ``set_input(name, numpy array)`` followed by ``get_output(0).numpy()``, the
  round trip an application does around ``run`` (no run), averaged over ``--number``;
* ``first load``: a fresh interpreter (``python -c``) that imports tvmrt, loads the library
  and makes the executor (a factory's ``default(cpu())``, or ``create`` and
  ``load_params``), timed inside it (import excluded, reported on its own).

Models: MobileNet v1 (TVM's model, ``$TVMRT_ARTIFACTS/mobilenet_v1``: graph JSON, library,
params; 87 nodes) and the small CNN factory TVM 0.16 builds for the tests
(``relay016/systemlib-so``: 15 nodes, 6 kernels, microseconds each: the engines' overhead
shows).

Usage::

    .venv/bin/python bench/graph_engines.py [--rounds 7] [--number 50] [--loads 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("TVM_NUM_THREADS", "1")

import numpy as np

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(os.environ.get("TVMRT_ARTIFACTS", REPO.parent / "shared" / "artifacts"))
FIXTURES = Path(os.environ.get("TVMRT_FIXTURES_DIR", REPO / "build" / "fixtures"))

# the code a fresh interpreter runs to load a model on one engine (first-load time)
_LOAD = """
import sys, time
t0 = time.perf_counter()
from tvmrt import runtime
from tvmrt.contrib import graph_executor
from tvmrt.runtime import native_module
t1 = time.perf_counter()
engine, lib, graph, params = sys.argv[1:5]
if engine == "c":
    mod = native_module.load_file(lib)
    if graph:
        create = native_module.c_global("tvm.graph_executor.create")
        m = graph_executor.GraphModule(create(open(graph).read(), mod, 1, 0))
    else:
        m = graph_executor.GraphModule(mod["default"](runtime.cpu()))
else:
    mod = runtime.load_module(lib)
    if graph:
        m = graph_executor.create(open(graph).read(), mod, runtime.cpu())
    else:
        m = graph_executor.GraphModule(mod["default"](runtime.cpu()))
if params:
    m.load_params(open(params, "rb").read())
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""


class Model:
    """A model's files: (library, graph JSON or "" for a factory, params or "")."""

    def __init__(self, name: str, folder: Path, lib: str, graph: str = "", params: str = ""):
        self.name, self.folder = name, folder
        self.lib = str(folder / lib)
        self.graph = str(folder / graph) if graph else ""
        self.params = str(folder / params) if params else ""
        golden = np.load(folder / "golden.npz")
        self.x, self.want = golden["data"], golden["output_0"]

    def module(self, engine: str) -> object:
        from tvmrt import runtime
        from tvmrt.contrib import graph_executor
        from tvmrt.runtime import native_module

        if engine == "c":
            lib = native_module.load_file(self.lib)
            if self.graph:
                create = native_module.c_global("tvm.graph_executor.create")
                mod = graph_executor.GraphModule(create(Path(self.graph).read_text(), lib, 1, 0))
            else:
                mod = graph_executor.GraphModule(lib["default"](runtime.cpu()))
        else:
            pylib = runtime.load_module(self.lib)
            if self.graph:
                mod = graph_executor.create(Path(self.graph).read_text(), pylib, runtime.cpu())
            else:
                mod = graph_executor.GraphModule(pylib["default"](runtime.cpu()))
        if self.params:
            mod.load_params(Path(self.params).read_bytes())
        mod.set_input("data", self.x)
        mod.run()
        got = mod.get_output(0).numpy()
        if not np.array_equal(got, self.want):
            sys.exit(f"{self.name} on the {engine} engine differs from TVM's golden")
        return mod


def _timed(fn: Callable[[], None], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number * 1e6  # us per call


def _first_load(model: Model, engine: str) -> tuple[float, float]:
    out = subprocess.run(
        [sys.executable, "-c", _LOAD, engine, model.lib, model.graph, model.params],
        capture_output=True,
        text=True,
        check=True,
        env=os.environ,
    ).stdout.split()
    return float(out[0]) * 1e3, float(out[1]) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--number", type=int, default=50)
    parser.add_argument("--loads", type=int, default=5, help="fresh interpreters per engine")
    args = parser.parse_args()
    models = [
        Model(
            "mobilenet_v1",
            ARTIFACTS / "mobilenet_v1",
            "deploy_lib.so",
            "deploy_graph.json",
            "deploy_param.params",
        ),
        Model("small CNN", FIXTURES / "relay016" / "relay016" / "systemlib-so", "deploy.so"),
    ]
    print(f"TVM_NUM_THREADS={os.environ['TVM_NUM_THREADS']}, medians of {args.rounds} rounds")
    print("| model | measure | C engine | Python engine | C / Python |")
    print("|---|---|---:|---:|---:|")
    for model in models:
        mods = {engine: model.module(engine) for engine in ("c", "python")}
        x = model.x
        number = max(1, args.number // 10) if model.name == "mobilenet_v1" else args.number
        measures: dict[str, dict[str, Callable[[], None]]] = {
            "run": {e: m.run for e, m in mods.items()},  # type: ignore[attr-defined]
            "set/get": {
                e: (lambda m=m, x=x: (m.set_input("data", x), m.get_output(0).numpy()))  # type: ignore[misc]
                for e, m in mods.items()
            },
        }
        for label, fns in measures.items():
            sides: dict[str, list[float]] = {"c": [], "python": []}
            ratios = []
            for r in range(args.rounds):
                order = ("c", "python") if r % 2 == 0 else ("python", "c")
                sample = {e: _timed(fns[e], number) for e in order}
                for e in order:
                    sides[e].append(sample[e])
                ratios.append(sample["c"] / sample["python"])
            c, py = statistics.median(sides["c"]), statistics.median(sides["python"])
            print(
                f"| {model.name} | {label} | {c:,.1f} us | {py:,.1f} us | "
                f"{statistics.median(ratios):.2f} |"
            )
        loads: dict[str, list[float]] = {"c": [], "python": []}
        imports: list[float] = []
        load_ratios = []
        for r in range(args.loads):
            order = ("c", "python") if r % 2 == 0 else ("python", "c")
            sample = {}
            for e in order:
                imported, loaded = _first_load(model, e)
                imports.append(imported)
                sample[e] = loaded
                loads[e].append(loaded)
            load_ratios.append(sample["c"] / sample["python"])
        c, py = statistics.median(loads["c"]), statistics.median(loads["python"])
        print(
            f"| {model.name} | first load | {c:,.2f} ms | {py:,.2f} ms | "
            f"{statistics.median(load_ratios):.2f} |"
        )
    print(f"(import of tvmrt in those interpreters: {statistics.median(imports):.1f} ms median)")


if __name__ == "__main__":
    main()
