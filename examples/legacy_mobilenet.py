"""Run real TVM artifacts with no TVM installed.

1. A hand-made graph (a small MLP) over numpy kernels, with its weights saved and
   loaded in TVM's params format, checked against plain numpy.
2. MobileNet v1 as TVM compiled it in 2019, checked against the outputs TVM v0.19
   produced, timed, and profiled node by node with the debug executor. That build is not
   in this repository (17 MB): point ``TVMRT_ARTIFACTS``
   at a folder holding ``mobilenet_v1/`` with TVM's ``deploy_lib.so``,
   ``deploy_graph.json``, ``deploy_param.params`` and a ``golden.npz`` (``data``, the
   input, and ``output_0``, TVM v0.19's output). Without it, part 2 says so and is skipped;
   part 1 needs nothing but tvmrt and numpy.

Run with ``python examples/legacy_mobilenet.py`` (in the venv ``make demo`` creates).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from tvmrt import runtime
from tvmrt.contrib import graph_executor
from tvmrt.testing import GraphBuilder, numpy_op_library

ARTIFACTS = Path(
    os.environ.get("TVMRT_ARTIFACTS", Path(__file__).resolve().parents[2] / "shared" / "artifacts")
)


def mlp_demo() -> None:
    """A 4 → 16 → 3 MLP as a graph JSON over numpy kernels."""
    print("== 1. hand-made graph over numpy kernels ==")
    b = GraphBuilder()
    x = b.input("x", (1, 4))
    w1, b1 = b.input("w1", (4, 16)), b.input("b1", (1, 16))
    w2, b2 = b.input("w2", (16, 3)), b.input("b2", (1, 3))
    (h,) = b.op("dense1", "matmul", [x, w1], [(1, 16)])
    (h,) = b.op("bias1", "add", [h, b1], [(1, 16)])
    (h,) = b.op("relu1", "relu", [h], [(1, 16)])
    (y,) = b.op("dense2", "matmul", [h, w2], [(1, 3)])
    (y,) = b.op("bias2", "add", [y, b2], [(1, 3)])
    b.output(y)

    rng = np.random.default_rng(0)
    weights = {
        "w1": rng.normal(size=(4, 16)).astype("float32"),
        "b1": rng.normal(size=(1, 16)).astype("float32"),
        "w2": rng.normal(size=(16, 3)).astype("float32"),
        "b2": rng.normal(size=(1, 3)).astype("float32"),
    }
    blob = runtime.save_param_dict(weights)
    module = graph_executor.create(b.to_json(), numpy_op_library(), runtime.cpu())
    module.load_params(blob)
    sample = rng.normal(size=(1, 4)).astype("float32")
    module.run(x=sample)
    got = module.get_output(0).numpy()
    want = np.maximum(sample @ weights["w1"] + weights["b1"], 0) @ weights["w2"] + weights["b2"]
    print(f"params blob: {len(blob)} bytes, {len(weights)} tensors (TVM's format)")
    print(f"output {got.round(4).tolist()}  max |diff| vs numpy {np.abs(got - want).max():.2e}")
    plan = module.storage_plan
    print(f"storage plan: {plan.num_pools} pools, {plan.total_bytes} bytes")


def mobilenet_demo() -> None:
    """MobileNet v1 from a 2019 TVM build, checked against TVM v0.19's own outputs."""
    folder = ARTIFACTS / "mobilenet_v1"
    print("\n== 2. MobileNet v1, compiled by TVM in 2019 ==")
    if not folder.is_dir():
        print(
            f"skipped: no MobileNet v1 build at {folder}. Set TVMRT_ARTIFACTS to a folder "
            "holding mobilenet_v1/ (deploy_lib.so, deploy_graph.json, deploy_param.params, "
            "golden.npz) to run this part."
        )
        return
    start = time.perf_counter()
    lib = runtime.load_module(folder / "deploy_lib.so")
    module = graph_executor.create((folder / "deploy_graph.json").read_text(), lib, runtime.cpu())
    module.load_params((folder / "deploy_param.params").read_bytes())
    print(
        f"loaded in {(time.perf_counter() - start) * 1e3:.0f} ms ({runtime.num_threads()} threads)"
    )
    golden = np.load(folder / "golden.npz")
    module.run(data=golden["data"])
    out = module.get_output(0).numpy()
    diff = np.abs(out - golden["output_0"]).max()
    top5 = np.argsort(out[0])[::-1][:5]
    print(f"max |diff| vs TVM v0.19: {diff:.2e}   top-5 classes: {top5.tolist()}")
    print(module.benchmark(runtime.cpu(), repeat=10, number=5))

    from tvmrt.contrib.debugger import debug_executor

    with tempfile.TemporaryDirectory() as dump:
        debug = debug_executor.create(
            (folder / "deploy_graph.json").read_text(), lib, runtime.cpu(), dump_root=dump
        )
        debug.load_params((folder / "deploy_param.params").read_bytes())
        report = debug.profile(data=golden["data"])
    slowest = sorted(report.calls, key=lambda c: -c["Duration (us)"].microseconds)[:5]
    print(f"\nper-node profile: {len(report.calls)} kernels timed; the 5 slowest:")
    for call in slowest:
        print(
            f"  {call['Duration (us)'].microseconds:9.1f} us  {call['Percent'].percent:5.1f} %  "
            f"{call['Name']}"
        )


def main() -> int:
    """Run both demos."""
    mlp_demo()
    try:
        mobilenet_demo()
    except Exception as exc:  # the demo reports, it does not hide: show and fail
        print(f"mobilenet demo failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
