"""The models TVM's two C++ apps run, built by TVM 0.16 (tests/support/built.py).

* ``addone_dll.so`` (``addone``: B = A + 1 over a dynamic length), exported as a library,
  and ``addone_sys.o`` (``addonesys``, the same with the system-lib runtime), saved as an
  object to link into the program: what ``apps/howto_deploy/prepare_test_libs.py`` makes;
* ``relay_add.so``: a Relay graph x + y with y a (2, 2) params tensor of ones, exported as a
  factory library (``prepare_graph_lib``);
* ``bundle/``: a small CNN built with the system-lib runtime for ``apps/bundle_deploy``:
  ``model.o`` (the kernels, registering themselves), ``graph.json``, ``params.bin``, and
  ``data.bin``/``output.bin`` (an input and TVM's own output for it, float32).

usage: python build_tvm_apps.py OUT_DIR (TVM is imported only then)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HOST = "llvm -mtriple=x86_64-linux-gnu"  # hhb-tvm's LLVM defaults to RISC-V


def main(out: Path) -> None:
    import numpy as np
    import tvm
    from tvm import relay, te
    from tvm.contrib import graph_executor
    from tvm.relay.backend import Runtime

    os.environ.setdefault("TOPHUB_LOCATION", "NONE")  # no network: no tuning logs
    out.mkdir(parents=True, exist_ok=True)
    n = te.var("n")
    a = te.placeholder((n,), name="A")
    b = te.compute(a.shape, lambda *i: a(*i) + 1.0, name="B")
    schedule = te.create_schedule(b.op)
    tvm.build(schedule, [a, b], HOST, name="addone").export_library(str(out / "addone_dll.so"))
    system = Runtime("cpp", {"system-lib": True})
    tvm.build(schedule, [a, b], HOST, name="addonesys", runtime=system).save(
        str(out / "addone_sys.o")
    )

    x = relay.var("x", shape=(2, 2), dtype="float32")
    y = relay.var("y", shape=(2, 2), dtype="float32")
    add = tvm.IRModule.from_expr(relay.Function([x, y], x + y))
    ones = {"y": np.ones((2, 2), dtype="float32")}
    relay.build(add, tvm.target.Target(HOST), params=ones).export_library(str(out / "relay_add.so"))

    rs = np.random.RandomState(7)
    data = relay.var("data", shape=(1, 3, 8, 8), dtype="float32")
    weight = relay.var("weight", shape=(4, 3, 3, 3), dtype="float32")
    net = relay.nn.softmax(
        relay.nn.batch_flatten(
            relay.nn.global_avg_pool2d(
                relay.nn.relu(
                    relay.nn.conv2d(data, weight, padding=(1, 1), channels=4, kernel_size=(3, 3))
                )
            )
        )
    )
    cnn = tvm.IRModule.from_expr(relay.Function([data, weight], net))
    params = {"weight": rs.randn(4, 3, 3, 3).astype("float32")}
    bundle = out / "bundle"
    bundle.mkdir(exist_ok=True)
    with tvm.transform.PassContext(opt_level=3):
        built = relay.build(cnn, tvm.target.Target(HOST), runtime=system, params=params)
        plain = relay.build(cnn, tvm.target.Target(HOST), params=params)
    built.get_lib().save(str(bundle / "model.o"))
    (bundle / "graph.json").write_text(built.get_graph_json())
    (bundle / "params.bin").write_bytes(relay.save_param_dict(built.get_params()))
    sample = rs.randn(1, 3, 8, 8).astype("float32")
    module = graph_executor.GraphModule(plain["default"](tvm.cpu()))
    module.set_input("data", sample)
    module.run()
    sample.tofile(bundle / "data.bin")
    module.get_output(0).numpy().astype("float32").tofile(bundle / "output.bin")
    (out / "done").write_text("ok")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
