"""TVM's debug executor face (``GraphModuleDebug``) over the two graph engines on the CPU:
the C runtime's debug executor (``graph_debug.c``, its time evaluator in ``timing.c``)
against the Python engine's (``tvmrt.runtime.graph_executor.debug``), paired, in one
process, through the same face.

Method
------
The models, thread setting and golden checks are ``graph_engines.py``'s (MobileNet v1 from
``$TVMRT_ARTIFACTS``, the small CNN the tests build). Each engine's debug executor comes from
``debug_executor.create`` with ``TVMRT_GRAPH_ENGINE`` choosing it. Per round, each engine
takes one sample of each measurement, in alternating order; the ratio C / Python is taken
per round and its median over the rounds is reported, with each side's median.

* ``run_individual``: the wall time of ``run_individual(number=10, repeat=1)`` (one run,
  then every node timed by the engine's time evaluator);
* ``node sum``: the sum over the nodes of the seconds per call that ``run_individual``
  reports, what a user reads off the table: the kernels' time plus the engine's per-call
  cost inside the timed loop (lower is closer to the kernels' own);
* ``profile``: the wall time of ``profile()`` (3 runs, then one timed node by node);
* ``debug_get_output``: ``debug_get_output(last node)``, which runs every node.

Usage::

    .venv/bin/python bench/debug_engines.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import graph_engines  # the models, the thread setting

_ENGINES = {"c": "native", "python": "python"}


def _face(model: graph_engines.Model, engine: str, root: str) -> object:
    import numpy as np

    from tvmrt import runtime
    from tvmrt.contrib.debugger import debug_executor
    from tvmrt.runtime.native_module import NativeModule

    os.environ["TVMRT_GRAPH_ENGINE"] = _ENGINES[engine]
    lib = runtime.load_module(model.lib)
    graph = Path(model.graph).read_text() if model.graph else lib["get_graph_json"]()
    face = debug_executor.create(graph, lib, runtime.cpu(), os.path.join(root, engine))
    del os.environ["TVMRT_GRAPH_ENGINE"]
    if isinstance(face.module, NativeModule) != (engine == "c"):
        sys.exit(f"{model.name}: the {engine} engine was not the one used")
    if model.params:
        face.load_params(Path(model.params).read_bytes())
    face.set_input(model.input_name, model.x)
    face._run()
    if not np.array_equal(face.get_output(0).numpy(), model.want):
        sys.exit(f"{model.name} on the {engine} engine differs from TVM's golden")
    return face


def _wall(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3  # ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    models = graph_engines.benchmark_models()
    print(f"TVM_NUM_THREADS={os.environ['TVM_NUM_THREADS']}, medians of {args.rounds} rounds")
    print("| model | measure | C engine | Python engine | C / Python |")
    print("|---|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as root:
        for model in models:
            faces: dict[str, Any] = {e: _face(model, e, root) for e in ("c", "python")}
            last = len(faces["c"].graph.nodes) - 1
            sides: dict[str, dict[str, list[float]]] = {}
            ratios: dict[str, list[float]] = {}
            for r in range(args.rounds):
                order = ("c", "python") if r % 2 == 0 else ("python", "c")
                sample: dict[str, dict[str, float]] = {e: {} for e in order}
                for e in order:
                    face = faces[e]
                    times: list[list[float]] = []
                    sample[e]["run_individual"] = _wall(
                        lambda f=face, t=times: t.extend(f.run_individual(10, 1))
                    )
                    sample[e]["node sum"] = sum(t[0] for t in times) * 1e6
                    sample[e]["profile"] = _wall(face.profile)
                    sample[e]["debug_get_output"] = _wall(
                        lambda f=face, n=last: f.debug_get_output(n)
                    )
                for label in sample["c"]:
                    for e in order:
                        sides.setdefault(label, {"c": [], "python": []})[e].append(sample[e][label])
                    ratios.setdefault(label, []).append(
                        sample["c"][label] / sample["python"][label]
                    )
            for label, side in sides.items():
                unit = "us" if label == "node sum" else "ms"
                c, py = statistics.median(side["c"]), statistics.median(side["python"])
                print(
                    f"| {model.name} | {label} | {c:,.3f} {unit} | {py:,.3f} {unit} | "
                    f"{statistics.median(ratios[label]):.2f} |"
                )


if __name__ == "__main__":
    main()
