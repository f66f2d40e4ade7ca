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
* ``set/get, page-aligned input``: the same with the input copied to an array that starts
  on a page (see :func:`_page_aligned`);
* ``first load``: a fresh interpreter (``python -c``) that imports tvmrt, calls
  ``load_module`` and makes the executor (a factory's ``default(cpu())``, or ``create`` and
  ``load_params``), timed inside it (import excluded, reported on its own), with tvmrt's
  bytecode compiled once beforehand into a cache of the bench's own, as a wheel installs it.

Models: MobileNet v1 (TVM's model, ``$TVMRT_ARTIFACTS/mobilenet_v1``: graph JSON, library,
params; ``graph_executor.create`` and ``load_params``) and the small CNN factory TVM 0.16
builds for the tests (``batched/cnn-b1``: conv2d + bias + relu, max-pool, dense + softmax
on an 8x8 image; 11 nodes, 6 kernels of microseconds, ``default``: the engines' per-node
overhead shows). Each engine is chosen with ``TVMRT_GRAPH_ENGINE``
(``native``, ``python``), the way an application's ``load_module`` gets it.

Usage::

    .venv/bin/python bench/graph_engines.py [--rounds 7] [--number 50] [--loads 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("TVM_NUM_THREADS", "1")

import numpy as np

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(os.environ.get("TVMRT_ARTIFACTS", REPO.parent / "shared" / "artifacts"))
FIXTURES = Path(os.environ.get("TVMRT_FIXTURES_DIR", REPO / "build" / "fixtures"))

# the code a fresh interpreter runs to load a model on one engine (first-load time): what
# an application does, with TVMRT_GRAPH_ENGINE choosing the engine
_LOAD = """
import sys, time
t0 = time.perf_counter()
from tvmrt import runtime
from tvmrt.contrib import graph_executor
t1 = time.perf_counter()
lib, graph, params = sys.argv[1:4]
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
_ENGINES = {"c": "native", "python": "python"}  # TVMRT_GRAPH_ENGINE of each side


class Model:
    """A model's files: (library, graph JSON or "" for a factory, params or ""), its input's
    name and TVM's input and output for it."""

    def __init__(
        self,
        name: str,
        folder: Path,
        lib: str,
        golden: tuple[np.ndarray, np.ndarray],
        graph: str = "",
        params: str = "",
        input_name: str = "data",
    ) -> None:
        self.name, self.folder, self.input_name = name, folder, input_name
        self.lib = str(folder / lib)
        self.graph = str(folder / graph) if graph else ""
        self.params = str(folder / params) if params else ""
        self.x, self.want = golden

    def module(self, engine: str) -> object:
        from tvmrt import runtime
        from tvmrt.contrib import graph_executor
        from tvmrt.runtime.native_module import NativeModule

        os.environ["TVMRT_GRAPH_ENGINE"] = _ENGINES[engine]
        lib = runtime.load_module(self.lib)
        if self.graph:
            mod = graph_executor.create(Path(self.graph).read_text(), lib, runtime.cpu())
        else:
            mod = graph_executor.GraphModule(lib["default"](runtime.cpu()))
        del os.environ["TVMRT_GRAPH_ENGINE"]
        if isinstance(mod.module, NativeModule) != (engine == "c"):
            sys.exit(f"{self.name}: the {engine} engine was not the one used")
        if self.params:
            mod.load_params(Path(self.params).read_bytes())
        mod.set_input(self.input_name, self.x)
        mod.run()
        got = mod.get_output(0).numpy()
        if not np.array_equal(got, self.want):
            sys.exit(f"{self.name} on the {engine} engine differs from TVM's golden")
        return mod


def _page_aligned(x: np.ndarray) -> np.ndarray:
    """A copy of ``x`` that starts on a 4 KiB boundary. ``np.load`` gives MobileNet's input
    16 bytes past one, and the speed of a 600 KB copy depends on where the source and the
    destination sit in their pages: from that input, ``set_input`` alone into the C
    executor's storage (64-byte aligned, TVM's) took 9.45 us against 8.75 us into the Python
    engine's numpy array; from a page-aligned copy, 8.26 against 8.25 (2026-12-04). So
    set/get is timed both ways."""
    buf = np.empty(x.nbytes + 4096, np.uint8)
    start = -buf.ctypes.data % 4096
    out = buf[start : start + x.nbytes].view(x.dtype).reshape(x.shape)
    out[...] = x
    return out


def _timed(fn: Callable[[], None], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number * 1e6  # us per call


# the fresh interpreters read tvmrt's bytecode from a cache of their own (compiled by the
# first of them), as an installed wheel's is, even where PYTHONDONTWRITEBYTECODE is set:
# else every first load would time Python compiling the loaders' sources
_PYCACHE = tempfile.mkdtemp(prefix="tvmrt-bench-pycache-")


def _first_load(model: Model, engine: str) -> tuple[float, float]:
    env = {**os.environ, "TVMRT_GRAPH_ENGINE": _ENGINES[engine], "PYTHONPYCACHEPREFIX": _PYCACHE}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    out = subprocess.run(
        [sys.executable, "-c", _LOAD, model.lib, model.graph, model.params],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout.split()
    return float(out[0]) * 1e3, float(out[1]) * 1e3


def benchmark_models() -> list[Model]:
    """MobileNet v1 (TVM's, ``$TVMRT_ARTIFACTS``) and the tests' small CNN factory, with
    TVM 0.16's inputs and outputs (``debug_engines.py`` times the same two)."""
    mobilenet = ARTIFACTS / "mobilenet_v1"
    golden = np.load(mobilenet / "golden.npz")
    batched = np.load(FIXTURES / "batched" / "batched" / "golden.npz")
    return [
        Model(
            "mobilenet_v1",
            mobilenet,
            "deploy_lib.so",
            (golden["data"], golden["output_0"]),
            "deploy_graph.json",
            "deploy_param.params",
        ),
        Model(
            "small CNN",
            FIXTURES / "batched" / "batched" / "cnn-b1",
            "deploy_lib.so",
            (batched["x"][:1], batched["y"][:1]),
            input_name="x",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--number", type=int, default=50)
    parser.add_argument("--loads", type=int, default=5, help="fresh interpreters per engine")
    args = parser.parse_args()
    models = benchmark_models()
    print(f"TVM_NUM_THREADS={os.environ['TVM_NUM_THREADS']}, medians of {args.rounds} rounds")
    print("| model | measure | C engine | Python engine | C / Python |")
    print("|---|---|---:|---:|---:|")
    for model in models:
        mods = {engine: model.module(engine) for engine in ("c", "python")}
        x, key = model.x, model.input_name
        number = max(1, args.number // 10) if model.name == "mobilenet_v1" else args.number
        aligned = _page_aligned(x)
        measures: dict[str, dict[str, Callable[[], None]]] = {
            "run": {e: m.run for e, m in mods.items()},  # type: ignore[attr-defined]
            "set/get": {
                e: (lambda m=m, x=x, k=key: (m.set_input(k, x), m.get_output(0).numpy()))  # type: ignore[misc]
                for e, m in mods.items()
            },
            "set/get, page-aligned input": {
                e: (lambda m=m, x=aligned, k=key: (m.set_input(k, x), m.get_output(0).numpy()))  # type: ignore[misc]
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
        _first_load(model, "c")  # untimed: fills the bytecode cache (both engines' modules)
        _first_load(model, "python")
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
