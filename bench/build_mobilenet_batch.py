"""Build MobileNet v1 (TVM's ``relay.testing`` workload, seeded weights) at batch 1 and B.

Run by a Python with TVM (the TVM 0.16 peer the tests use, ``build/peers/tvm016``)::

    build/peers/tvm016/bin/python bench/build_mobilenet_batch.py OUT_DIR [B] [--wide-mlp]

``--wide-mlp`` builds a wide MLP instead (784 -> 4096 -> 4096 -> 4096 -> 10, dense + ReLU,
147 MB of float32 weights): at batch 1 each run streams every weight from memory for one row, at
batch B for B rows, the case where a server gains most from batching.

Writes ``OUT_DIR/b1/`` and ``OUT_DIR/b<B>/`` (``deploy_graph.json``, ``deploy_lib.so``,
``deploy_param.params``), the same network and weights compiled for batch 1 and batch B
(opt_level 3, target ``llvm -mtriple=x86_64-linux-gnu``), so ``bench/serve.py --batched``
compares serving with dynamic batching against the same model run one request at a time.
Benchmark data only: no test reads it.
"""

from __future__ import annotations

import sys
from pathlib import Path

X86 = "llvm -mtriple=x86_64-linux-gnu"  # the peer is a RISC-V-first build: name the target


def _wide_mlp(batch: int) -> tuple[object, dict[str, object]]:
    import tvm
    from tvm import relay

    x = relay.var("data", shape=(batch, 784), dtype="float32")
    params = {}
    h = x
    for i, (n_in, n_out) in enumerate(((784, 4096), (4096, 4096), (4096, 4096), (4096, 10))):
        w = relay.var(f"w{i}", shape=(n_out, n_in), dtype="float32")
        b = relay.var(f"b{i}", shape=(n_out,), dtype="float32")
        params[f"w{i}"], params[f"b{i}"] = w, b
        h = relay.nn.bias_add(relay.nn.dense(h, w), b)
        if n_out != 10:
            h = relay.nn.relu(h)
    mod = tvm.IRModule.from_expr(relay.Function(relay.analysis.free_vars(h), h))
    return mod, {name: var.type_annotation for name, var in params.items()}


def build(out: Path, batch: int, wide_mlp: bool = False) -> None:
    """Compile the workload at ``batch`` into ``out``."""
    import numpy as np
    import tvm
    from tvm import relay
    from tvm.relay import testing

    if wide_mlp:
        mod, types = _wide_mlp(batch)
        params = {name: np.zeros([int(d) for d in t.shape], "float32") for name, t in types.items()}
    else:
        mod, params = testing.mobilenet.get_workload(batch_size=batch, dtype="float32")
    rng = np.random.default_rng(0)  # the same weights at every batch: seeded by name order
    params = {
        name: tvm.nd.array(rng.standard_normal(p.shape).astype("float32") * 0.1)
        for name, p in sorted(params.items())
    }
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target=X86, params=params)
    out.mkdir(parents=True, exist_ok=True)
    lib.export_library(str(out / "deploy_lib.so"))
    (out / "deploy_graph.json").write_text(lib.get_graph_json())
    (out / "deploy_param.params").write_bytes(relay.save_param_dict(lib.get_params()))


def main() -> None:
    """Build batch 1 and batch B (default 4)."""
    args = [a for a in sys.argv[1:] if a != "--wide-mlp"]
    out = Path(args[0])
    batch = int(args[1]) if len(args) > 1 else 4
    for b in (1, batch):
        build(out / f"b{b}", b, "--wide-mlp" in sys.argv)
        print(f"built {out / f'b{b}'}", flush=True)


if __name__ == "__main__":
    main()
