"""TVM 0.16's OpenCL builds on pocl: ``GraphModule`` on the C engine (libtvmrt_runtime's graph
executor, the default where the library was read from its file) against ``GraphModule`` on
the Python engine (``TVMRT_GRAPH_ENGINE=python``), paired, in one process.

Method
------
Both engines load the same factory and run on ``opencl(0)``, on the C runtime's OpenCL
(``runtime/opencl.c``: one ICD loader, one context, the same kernels and launch path: the
Python engine's host code calls the C OpenCL module too), so the ratio is the executors'
own cost. One sample is ``--number`` calls of ``run()`` followed by the device's sync,
divided by ``--number``; each round takes one sample per engine in alternating order, and
the ratio C / Python is taken per round. Reported: the median over rounds of each side and
of the ratio. Before timing, each engine's outputs are checked against TVM's golden
(tolerance 1e-5), and the engines are checked to be the ones named.

Until issue 43 item 4 the Python engine ran on pyopencl (its own contexts and launches);
the figures of that comparison are in bench/README.md, "opencl_engines".

Usage::

    .venv/bin/python bench/opencl_engines.py [--rounds 7] [--number 20]
        [--fixtures build/fixtures]   # where tests/fixtures/build_relay016.py put relay016
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

_MODELS = {  # name: (folder, library, golden, input, devices)
    "cnn": ("opencl-factory", "deploy.so", "golden.npz", "data", (4,)),
    "dense": ("opencl-factory", "dense.so", "dense_golden.npz", "x", (4,)),
    "cpu+opencl": ("hetero-opencl-cpu", "deploy.so", "golden.npz", "data", (1, 4)),
}


def _graph(path: Path, devices: tuple[int, ...], engine: str | None) -> object:
    """A GraphModule of the factory at path, on the engine named (None: the default)."""
    from tvmrt import runtime
    from tvmrt.contrib import graph_executor
    from tvmrt.runtime.native_module import NativeModule

    os.environ.pop("TVMRT_GRAPH_ENGINE", None)
    if engine is not None:
        os.environ["TVMRT_GRAPH_ENGINE"] = engine
    try:
        devs = [runtime.cpu(0) if t == 1 else runtime.opencl(0) for t in devices]
        m = graph_executor.GraphModule(runtime.load_module(str(path))["default"](*devs))
    finally:
        os.environ.pop("TVMRT_GRAPH_ENGINE", None)
    on_c = isinstance(m.module, NativeModule)
    assert on_c == (engine != "python"), f"{path}: the {engine or 'default'} engine did not run"
    return m


def _sample(run: object, sync: object, number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        run()  # type: ignore[operator]
    sync()  # type: ignore[operator]
    return (time.perf_counter() - start) / number


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--number", type=int, default=20)
    parser.add_argument("--fixtures", type=Path, default=Path("build/fixtures"))
    args = parser.parse_args()
    from tvmrt import runtime

    folder = args.fixtures / "relay016" / "relay016"
    print(
        f"{'model':<12} {'C engine':>10} {'Python':>10} {'C / Python':>11}   ({args.rounds} rounds)"
    )
    sync = runtime.opencl(0).sync
    for name, (sub, library, golden_file, input_name, devices) in _MODELS.items():
        path = folder / sub / library
        with np.load(folder / sub / golden_file) as golden:
            data, want = golden[input_name], golden["output_0"]
        engines = {"c": _graph(path, devices, None), "py": _graph(path, devices, "python")}
        for m in engines.values():
            m.set_input(input_name, data)  # type: ignore[attr-defined]
            m.run()  # type: ignore[attr-defined]
            got = m.get_output(0).numpy()  # type: ignore[attr-defined]
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        c_times, py_times, ratios = [], [], []
        for r in range(args.rounds):
            order = ["c", "py"] if r % 2 == 0 else ["py", "c"]
            got_s = {side: _sample(engines[side].run, sync, args.number) for side in order}  # type: ignore[attr-defined]
            c_times.append(got_s["c"])
            py_times.append(got_s["py"])
            ratios.append(got_s["c"] / got_s["py"])
        print(
            f"{name:<12} {statistics.median(c_times) * 1e3:>8.3f}ms "
            f"{statistics.median(py_times) * 1e3:>8.3f}ms {statistics.median(ratios):>11.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
