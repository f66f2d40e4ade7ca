"""Build MobileNet v1 (TVM's ``relay.testing`` workload, seeded weights) at batch 1 and B.

Run by a Python with TVM (the TVM 0.16 peer the tests use, ``build/peers/tvm016``)::

    build/peers/tvm016/bin/python bench/build_mobilenet_batch.py OUT_DIR [B]

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


def build(out: Path, batch: int) -> None:
    """Compile the workload at ``batch`` into ``out``."""
    import numpy as np
    import tvm
    from tvm import relay
    from tvm.relay import testing

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
    out = Path(sys.argv[1])
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    for b in (1, batch):
        build(out / f"b{b}", b)
        print(f"built {out / f'b{b}'}", flush=True)


if __name__ == "__main__":
    main()
