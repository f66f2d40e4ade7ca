"""Build the ARM test fixtures with TVM 0.16 (hhb-tvm), run by the peer's Python 3.10.

    python build_fixtures.py OUT_DIR

For each ARM target (aarch64, armv7hf) it cross-compiles, with Debian's cross compilers:

- ``cnn``: a small float CNN as a factory ``deploy.so``, a triple (``deploy_graph.json`` +
  ``deploy_lib.so`` + ``deploy_param.params``), a system-lib ``systemlib.so`` and a
  ``deploy.tar`` export (objects a board's compiler links);
- ``int8``: a QNN model (quantize, int8 conv2d, requantize, int8 dense) as a factory;
- ``parallel``: wide convolutions whose kernels split their outer loops over TVM's thread
  pool (``TVMBackendParallelLaunch``), as a factory.

Each model is also built for x86-64 and run by TVM's own graph executor here: its outputs
are ``golden_x86_tvm016.npz`` (with the inputs), the reference the ARM builds must match.
``meta.json`` records the facts the tests check (parallel launches in the ARM code).
Nothing here runs at import: pytest's doctest collection imports this file.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

TARGETS = {
    "aarch64": ("llvm -mtriple=aarch64-linux-gnu", "aarch64-linux-gnu-gcc"),
    "armv7hf": (
        "llvm -mtriple=armv7l-linux-gnueabihf -mattr=+neon -mfloat-abi=hard",
        "arm-linux-gnueabihf-gcc",
    ),
}
X86 = "llvm -mtriple=x86_64-linux-gnu"


def _cnn(relay: Any, np: Any) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    rng = np.random.default_rng(21)
    data = relay.var("data", shape=(1, 3, 32, 32), dtype="float32")
    w = relay.var("conv_w", shape=(8, 3, 3, 3), dtype="float32")
    b = relay.var("conv_b", shape=(8,), dtype="float32")
    dw = relay.var("dense_w", shape=(10, 8 * 16 * 16), dtype="float32")
    db = relay.var("dense_b", shape=(10,), dtype="float32")
    x = relay.nn.relu(
        relay.nn.bias_add(
            relay.nn.conv2d(data, w, padding=(1, 1), kernel_size=(3, 3), channels=8), b
        )
    )
    x = relay.nn.batch_flatten(relay.nn.max_pool2d(x, pool_size=(2, 2), strides=(2, 2)))
    x = relay.nn.softmax(relay.nn.bias_add(relay.nn.dense(x, dw), db))
    params = {
        "conv_w": rng.normal(0, 0.3, (8, 3, 3, 3)).astype("float32"),
        "conv_b": rng.normal(0, 0.1, (8,)).astype("float32"),
        "dense_w": rng.normal(0, 0.05, (10, 2048)).astype("float32"),
        "dense_b": rng.normal(0, 0.1, (10,)).astype("float32"),
    }
    inputs = {"data": rng.normal(0, 1, (1, 3, 32, 32)).astype("float32")}
    return relay.Function(relay.analysis.free_vars(x), x), params, inputs


def _int8(relay: Any, np: Any) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    rng = np.random.default_rng(8)
    qnn = relay.qnn.op
    c = relay.const
    data = relay.var("data", shape=(1, 4, 16, 16), dtype="float32")
    q = qnn.quantize(data, c(0.05), c(0, "int32"), out_dtype="int8")
    w = relay.var("w", shape=(8, 4, 3, 3), dtype="int8")
    conv = qnn.conv2d(
        q, w, c(0, "int32"), c(0, "int32"), c(0.05), c(0.02),
        kernel_size=(3, 3), channels=8, padding=(1, 1),
    )  # fmt: skip
    r = qnn.requantize(conv, c(0.001), c(0, "int32"), c(0.1), c(0, "int32"), out_dtype="int8")
    r = relay.nn.batch_flatten(relay.clip(r, 0, 127))
    dw = relay.var("dw", shape=(10, 8 * 16 * 16), dtype="int8")
    dense = qnn.dense(r, dw, c(0, "int32"), c(0, "int32"), c(0.1), c(0.01), units=10)
    out = qnn.dequantize(dense, c(0.001), c(0, "int32"))
    params = {
        "w": rng.integers(-64, 64, (8, 4, 3, 3)).astype("int8"),
        "dw": rng.integers(-16, 16, (10, 2048)).astype("int8"),
    }
    inputs = {"data": rng.normal(0, 1, (1, 4, 16, 16)).astype("float32")}
    return relay.Function(relay.analysis.free_vars(out), out), params, inputs


def _parallel(relay: Any, np: Any) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    rng = np.random.default_rng(7)
    data = relay.var("data", shape=(1, 16, 24, 24), dtype="float32")
    w1 = relay.var("w1", shape=(32, 16, 3, 3), dtype="float32")
    w2 = relay.var("w2", shape=(32, 32, 3, 3), dtype="float32")
    x = relay.nn.relu(relay.nn.conv2d(data, w1, padding=(1, 1), kernel_size=(3, 3), channels=32))
    x = relay.nn.conv2d(x, w2, padding=(1, 1), kernel_size=(3, 3), channels=32)
    x = relay.nn.global_avg_pool2d(x)
    params = {
        "w1": rng.normal(0, 0.2, (32, 16, 3, 3)).astype("float32"),
        "w2": rng.normal(0, 0.1, (32, 32, 3, 3)).astype("float32"),
    }
    inputs = {"data": rng.normal(0, 1, (1, 16, 24, 24)).astype("float32")}
    return relay.Function(relay.analysis.free_vars(x), x), params, inputs


def _x86_reference(tvm: Any, relay: Any, func: Any, params: Any, inputs: Any) -> dict[str, Any]:
    from tvm.contrib import graph_executor

    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(tvm.IRModule.from_expr(func), target=X86, params=params)
    module = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    module.set_input(**inputs)
    module.run()
    return {f"output_{i}": module.get_output(i).numpy() for i in range(module.get_num_outputs())}


def build(out: Path) -> None:
    import numpy as np
    import tvm
    from tvm import relay
    from tvm.contrib import cc

    os.environ.setdefault("TOPHUB_LOCATION", "NONE")
    models = {"cnn": _cnn, "int8": _int8, "parallel": _parallel}
    for name, make in models.items():
        func, params, inputs = make(relay, np)
        golden = {**inputs, **_x86_reference(tvm, relay, func, params, inputs)}
        for arch, (target, compiler) in TARGETS.items():
            folder = out / arch / name
            folder.mkdir(parents=True, exist_ok=True)
            fcompile = cc.cross_compiler(compiler)
            mod = tvm.IRModule.from_expr(func)
            with tvm.transform.PassContext(opt_level=3):
                lib = relay.build(mod, target=target, params=params)
            lib.export_library(str(folder / "deploy.so"), fcompile=fcompile)
            source = lib.get_lib().get_source("ll")
            meta = {"target": target, "parallel_launch": "TVMBackendParallelLaunch" in source}
            if name == "cnn":
                (folder / "deploy_graph.json").write_text(lib.get_graph_json())
                lib.get_lib().export_library(str(folder / "deploy_lib.so"), fcompile=fcompile)
                (folder / "deploy_param.params").write_bytes(
                    relay.save_param_dict(lib.get_params())
                )
                lib.export_library(str(folder / "deploy.tar"))
                runtime = relay.backend.Runtime("cpp", {"system-lib": True})
                with tvm.transform.PassContext(opt_level=3):
                    syslib = relay.build(mod, target=target, params=params, runtime=runtime)
                syslib.export_library(str(folder / "systemlib.so"), fcompile=fcompile)
            np.savez(folder / "golden_x86_tvm016.npz", **golden)
            (folder / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
            print(f"{arch}/{name}: {sorted(p.name for p in folder.iterdir())}", flush=True)


if __name__ == "__main__":
    build(Path(sys.argv[1]))
