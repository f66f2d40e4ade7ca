"""How executor set-up grows with graph size: create, load_params, share_params, planning, inspect.

Synthetic graphs of N nodes (N/2 weights ``p0, p1, ...`` and N/2 ``add`` kernels, each
adding one weight to a running value, as a deep model does). Every step should cost
about the same per node at every size (linear growth); printed: seconds and
microseconds per node for each step and size. Planning is measured twice: the chain
above without ``storage_id`` (tvmrt's liveness planner) and a "wide" graph (N/2 kernels
read the input, one joins them, a chain follows: many pools freed at once, the case that
was quadratic). ``inspect`` reads a folder with the graph, the params and a real kernel
library (MobileNet's, from ../shared/artifacts; a constant cost of well under a
millisecond per call beside the graph).

Times are CPU seconds of this process; sizes up to 10k nodes take the best of 3
rounds, larger ones one round.
The reference for ``share_params`` is ``load_params`` of the same blob into an executor of
the same graph, measured in the same process: the ratio must stay <= 2.

    python bench/scale.py [--sizes 1000,10000,100000]
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tvmrt import runtime
from tvmrt.artifact import find_artifact, inspect_artifact
from tvmrt.contrib import graph_executor
from tvmrt.runtime.graph_executor import parse_graph, plan_storage
from tvmrt.runtime.params import save_param_dict
from tvmrt.testing import GraphBuilder, numpy_op_library

ARTIFACTS = Path(
    os.environ.get(
        "TVMRT_ARTIFACTS", Path(__file__).resolve().parents[1].parent / "shared" / "artifacts"
    )
)


def chain_graph(n: int, with_storage_ids: bool = True) -> str:
    """``n`` nodes: input ``data``, then n/2 times (weight ``p_i``, ``add``)."""
    b = GraphBuilder()
    ref = b.input("data", (4,))
    for i in range((n - 1) // 2):
        w = b.input(f"p{i}", (4,))
        (ref,) = b.op(f"add{i}", "add", [ref, w], [(4,)])
    b.output(ref)
    return b.to_json(with_storage_ids)


def wide_graph(n: int) -> str:
    """``n`` nodes: n/2 kernels read the input, one joins them all, a chain follows."""
    b = GraphBuilder()
    x = b.input("data", (4,))
    fan = [b.op(f"f{i}", "relu", [x], [(4 + i % 7,)])[0] for i in range(n // 2)]
    (ref,) = b.op("join", "concat", fan, [(4,)])
    for i in range(n - n // 2 - 2):
        (ref,) = b.op(f"c{i}", "relu", [ref], [(4 + i % 5,)])
    b.output(ref)
    return b.to_json(with_storage_ids=False)


CPU = runtime.cpu()


def timed(fn: Callable[[], Any]) -> float:
    """CPU seconds of ``fn`` (every step is single-threaded Python: CPU time is its cost,
    and unlike wall time it does not count the waits of a machine shared with others)."""
    gc.collect()
    start = time.process_time()
    fn()
    return time.process_time() - start


def measure_once(n: int, lib_path: Path) -> dict[str, float]:
    """Seconds of every step for an ``n``-node graph, each step timed once."""
    graph_json = chain_graph(n)
    names = [f"p{i}" for i in range((n - 1) // 2)]
    blob = save_param_dict({k: np.full(4, i, "float32") for i, k in enumerate(names)})
    lib = numpy_op_library()
    out: dict[str, float] = {}
    made: list[graph_executor.GraphModule] = []
    out["create"] = timed(lambda: made.append(graph_executor.create(graph_json, lib, CPU)))
    owner = made[0]
    out["load_params"] = timed(lambda: owner.load_params(blob))
    other = graph_executor.create(graph_json, lib, CPU)
    out["share_params"] = timed(lambda: other.share_params(owner, blob))
    assert other.get_input(names[-1]).data_ptr == owner.get_input(names[-1]).data_ptr
    chain = parse_graph(chain_graph(n, with_storage_ids=False))
    out["plan (chain)"] = timed(lambda: plan_storage(chain, 1))
    wide = parse_graph(wide_graph(n))
    out["plan (wide)"] = timed(lambda: plan_storage(wide, 1))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "deploy_graph.json").write_text(graph_json)
        (folder / "deploy_param.params").write_bytes(blob)
        (folder / "deploy_lib.so").symlink_to(lib_path)
        files = find_artifact(folder)
        out["inspect"] = timed(lambda: inspect_artifact(files))
    return out


def measure(n: int, lib_path: Path, repeat: int) -> dict[str, float]:
    """Best of ``repeat`` rounds per step (the machine is shared: the minimum is the cost)."""
    rounds = [measure_once(n, lib_path) for _ in range(repeat)]
    return {step: min(r[step] for r in rounds) for step in rounds[0]}


def main() -> None:
    """Measure every size and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    lib_path = ARTIFACTS / "mobilenet_v1" / "deploy_lib.so"
    results = {n: measure(n, lib_path, 3 if n <= 10_000 else 1) for n in sizes}
    steps = list(results[sizes[0]])
    print(f"{'step':<14}" + "".join(f"{n:>10} nodes: s, us/node" for n in sizes))
    for step in steps:
        cells = "".join(
            f"{results[n][step]:>17.4f} {results[n][step] / n * 1e6:>8.2f}" for n in sizes
        )
        print(f"{step:<14}{cells}")
    for n in sizes:
        ratio = results[n]["share_params"] / results[n]["load_params"]
        print(f"{n} nodes: share_params / load_params = {ratio:.2f} (target <= 2)")


if __name__ == "__main__":
    main()
