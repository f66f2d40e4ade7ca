"""Per-node overhead of ``GraphModule.run()`` against calling the same kernel in a Python loop.

A chain of ``--nodes`` trivial kernels (a Python function that does nothing) runs
through the executor; the reference is a plain ``for`` loop calling the same function
with the same two arrays, measured in the same process, interleaved, so machine noise
hits both alike. Reported: microseconds per node for each, and their ratio.

    python bench/dispatch.py [--nodes 1000] [--repeat 200]
"""

from __future__ import annotations

import argparse
import statistics
import time

from tvmrt import runtime
from tvmrt.contrib import graph_executor
from tvmrt.testing import graphs, numpy_op_library


def trivial(a: object, out: object) -> None:
    """The kernel: does nothing, so only dispatch is measured."""


def main() -> None:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    n = args.nodes

    lib = numpy_op_library(trivial=trivial)
    module = graph_executor.create(graphs.chain(n, func_name="trivial"), lib, runtime.cpu())
    a, b = module.executor.entries[0], module.executor.entries[1]
    run = module.run

    def bare() -> None:
        for _ in range(n):
            trivial(a, b)

    for _ in range(20):  # warm up both paths
        run()
        bare()
    executor_times, bare_times = [], []
    for _ in range(args.repeat):
        start = time.perf_counter_ns()
        run()
        executor_times.append(time.perf_counter_ns() - start)
        start = time.perf_counter_ns()
        bare()
        bare_times.append(time.perf_counter_ns() - start)
    ex_us = statistics.median(executor_times) / n / 1e3
    bare_us = statistics.median(bare_times) / n / 1e3
    print(f"{'path':<28}{'us/node':>10}")
    print(f"{'GraphModule.run()':<28}{ex_us:>10.4f}")
    print(f"{'bare Python loop':<28}{bare_us:>10.4f}")
    print(f"ratio executor/bare: {ex_us / bare_us:.3f}  (target <= 1.2)")


if __name__ == "__main__":
    main()
