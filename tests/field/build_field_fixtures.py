"""Artifacts as users have them from the field, rebuilt with TVM 0.16 (issue 33 item 3).

* ``tvmc-aarch64/module.tar``: a tvmc package whose library is a nested ``mod.tar``
  (``export_library`` tar of an aarch64 ``lib0.o``), as ``tvmc compile --target
  "llvm -mtriple=aarch64-linux-gnu"`` writes it;
* ``opencl-host-o/``: ``deploy.o`` holding only the host part of an OpenCL build
  (``lib.save("deploy.o")``: the OpenCL kernels are not in it), with the graph and params;
* ``tar-so-pair/``: ``deploy.tar`` and the ``deploy.tar.so`` TVM's ``load_module`` leaves
  beside it, with the graph and params; ``golden.npz`` is TVM's output of that library.

usage: python build_field_fixtures.py OUT_DIR (TVM is imported only then: pytest's doctest
collection imports this file in tvmrt's environment)
"""

from __future__ import annotations


def build() -> None:
    import sys
    import tarfile
    from pathlib import Path

    import numpy as np
    import tvm
    from tvm import relay
    from tvm.contrib import graph_executor

    out = Path(sys.argv[1])
    rs = np.random.RandomState(7)
    x = relay.var("data", shape=(1, 16), dtype="float32")
    w = relay.var("w", shape=(8, 16), dtype="float32")
    func = relay.Function([x, w], relay.nn.relu(relay.nn.dense(x, w)))
    params = {"w": rs.randn(8, 16).astype("float32")}
    mod = tvm.IRModule.from_expr(func)

    def build_for(target, host=None):
        with tvm.transform.PassContext(opt_level=3):
            return relay.build(mod, target=tvm.target.Target(target, host=host), params=params)

    # tvmc package over a nested aarch64 export tar
    arm = build_for("llvm -mtriple=aarch64-linux-gnu")
    work = out / "tvmc-aarch64" / "work"
    work.mkdir(parents=True, exist_ok=True)
    arm.get_lib().export_library(str(work / "mod.tar"))
    (work / "mod.json").write_text(arm.get_graph_json())
    (work / "mod.params").write_bytes(relay.save_param_dict(arm.get_params()))
    with tarfile.open(out / "tvmc-aarch64" / "module.tar", "w") as tar:
        for name in ("mod.tar", "mod.json", "mod.params"):
            tar.add(work / name, arcname=name)

    # the host part of an OpenCL build, saved alone
    cl = build_for("opencl", "llvm -mtriple=x86_64-linux-gnu")
    folder = out / "opencl-host-o"
    folder.mkdir(parents=True, exist_ok=True)
    cl.get_lib().save(str(folder / "deploy.o"))
    (folder / "deploy.json").write_text(cl.get_graph_json())
    (folder / "deploy.params").write_bytes(relay.save_param_dict(cl.get_params()))

    # an export tar and the .tar.so TVM's load_module leaves beside it
    host = build_for("llvm -mtriple=x86_64-linux-gnu")
    folder = out / "tar-so-pair"
    folder.mkdir(parents=True, exist_ok=True)
    host.get_lib().export_library(str(folder / "deploy.tar"))
    (folder / "deploy.json").write_text(host.get_graph_json())
    (folder / "deploy.params").write_bytes(relay.save_param_dict(host.get_params()))
    lib = tvm.runtime.load_module(str(folder / "deploy.tar"))  # writes deploy.tar.so
    module = graph_executor.create(host.get_graph_json(), lib, tvm.cpu(0))
    module.load_params(relay.save_param_dict(host.get_params()))
    data = rs.randn(1, 16).astype("float32")
    module.set_input("data", data)
    module.run()
    np.savez(folder / "golden.npz", data=data, output_0=module.get_output(0).numpy())
    (out / "done").write_text("ok")


if __name__ == "__main__":
    build()
