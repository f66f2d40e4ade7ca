"""Build Neo-layout model folders with TVM 0.16 (run by the peer's Python; see conftest.py).

SageMaker Neo's output for a TVM model is the Relay-era triple under other names plus a
``compiled.meta`` (DLR 1.10's Neo folder format): this builds a model with ``relay.build`` and
writes ``compiled.so`` (``export_library``), ``compiled_model.json`` (the graph JSON),
``compiled.params`` (``relay.save_param_dict``) and ``compiled.meta`` as Neo writes it,
plus ``model-shapes.json`` (SageMaker's, which DLR skips). A Relay VM model is
``code.ro`` + ``compiled.so`` (``relay.vm.compile`` then ``Executable.save``) + the
mandatory meta. The goldens are TVM's own: ``graph_executor`` and ``VirtualMachine`` runs
of the same builds. Neo folders also carry ``libdlr.so`` and ``dlr.h`` (DLR itself); the
tests add a ``libdlr.so`` of their own that must never be loaded.

usage: python build_neo_fixtures.py OUT_DIR (TVM is imported only then: pytest's doctest
collection imports this file in tvmrt's environment)
"""

from __future__ import annotations


def build() -> None:
    import json
    import sys
    from pathlib import Path

    import numpy as np
    import tvm
    from tvm import relay
    from tvm.contrib import graph_executor
    from tvm.runtime import vm as vm_rt

    out = Path(sys.argv[1])
    target = tvm.target.Target("llvm -mtriple=x86_64-linux-gnu")
    rs = np.random.RandomState(33)

    def meta(inputs, outputs, device="cpu", **model):
        return {
            "Requirements": {"TargetDevice": "ML_C5", "TargetDeviceType": device},
            "Model": {"Inputs": inputs, "Outputs": outputs, **model},
        }

    # -- a graph (TVM backend) model: a float input, an int32 input, two outputs ----------
    data = relay.var("data", shape=(1, 3, 8, 8), dtype="float32")
    mask = relay.var("mask", shape=(1, 10), dtype="int32")
    w = relay.var("conv_w", shape=(4, 3, 3, 3), dtype="float32")
    d = relay.var("dense_w", shape=(10, 256), dtype="float32")
    y = relay.nn.relu(relay.nn.conv2d(data, w, padding=(1, 1), kernel_size=(3, 3), channels=4))
    logits = relay.nn.dense(relay.reshape(y, (1, 256)), d) + relay.cast(mask, "float32")
    func = relay.Function(
        [data, mask, w, d], relay.Tuple([relay.nn.softmax(logits), relay.argmax(logits, axis=1)])
    )
    params = {
        "conv_w": rs.randn(4, 3, 3, 3).astype("float32"),
        "dense_w": (rs.randn(10, 256) * 0.1).astype("float32"),
    }
    with tvm.transform.PassContext(opt_level=3):
        built = relay.build(tvm.IRModule.from_expr(func), target=target, params=params)
    cpu = out / "neo-cpu"
    cpu.mkdir(parents=True, exist_ok=True)
    built.get_lib().export_library(str(cpu / "compiled.so"))
    (cpu / "compiled_model.json").write_text(built.get_graph_json())
    (cpu / "compiled.params").write_bytes(relay.save_param_dict(built.get_params()))
    (cpu / "model-shapes.json").write_text(json.dumps([{"name": "data", "shape": [1, 3, 8, 8]}]))
    cpu_meta = meta(
        [
            {"name": "data", "shape": [1, 3, 8, 8], "dtype": "float32"},
            {"name": "mask", "shape": [1, 10], "dtype": "int32"},
        ],
        [
            {"name": "probabilities", "dtype": "float32", "shape": [1, 10]},
            {"name": "class_id", "dtype": "int32", "shape": [1]},
        ],
    )
    (cpu / "compiled.meta").write_text(json.dumps(cpu_meta, indent=2))
    x = rs.randn(1, 3, 8, 8).astype("float32")
    m = rs.randint(-2, 3, size=(1, 10)).astype("int32")
    lib = tvm.runtime.load_module(str(cpu / "compiled.so"))
    module = graph_executor.create(built.get_graph_json(), lib, tvm.cpu(0))
    module.load_params(relay.save_param_dict(built.get_params()))
    module.set_input("data", x)
    module.set_input("mask", m)
    module.run()
    np.savez(
        out / "neo-cpu.npz",
        data=x,
        mask=m,
        out_0=module.get_output(0).numpy(),
        out_1=module.get_output(1).numpy(),
    )

    # -- a Relay VM model: dynamic batch ----------------------------------------------------
    xv = relay.var("x", shape=(relay.Any(), 4), dtype="float32")
    wv = relay.const(rs.randn(3, 4).astype("float32"))
    yv = relay.nn.relu(relay.nn.dense(xv, wv))
    mod = tvm.IRModule.from_expr(relay.Function([xv], relay.Tuple([yv, relay.sum(yv, axis=1)])))
    with tvm.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, target=target)
    code, vlib = exe.save()
    vm_dir = out / "neo-relayvm"
    vm_dir.mkdir(parents=True, exist_ok=True)
    (vm_dir / "code.ro").write_bytes(code)
    vlib.export_library(str(vm_dir / "compiled.so"))
    vm_meta = meta(
        [{"name": "x", "shape": [-1, 4], "dtype": "float32"}],
        [
            {"name": "features", "dtype": "float32", "shape": [-1, 3]},
            {"name": "total", "dtype": "float32", "shape": [-1]},
        ],
        RelayVMAllocator="naive",
    )
    (vm_dir / "compiled.meta").write_text(json.dumps(vm_meta, indent=2))
    machine = vm_rt.VirtualMachine(exe, tvm.cpu())
    res = {}
    for batch in (1, 5):
        xb = rs.randn(batch, 4).astype("float32")
        r = machine.invoke("main", xb)
        res[f"x_{batch}"], res[f"features_{batch}"], res[f"total_{batch}"] = (
            xb,
            r[0].numpy(),
            r[1].numpy(),
        )
    np.savez(out / "neo-relayvm.npz", **res)
    (out / "done").write_text("ok")


if __name__ == "__main__":
    build()
