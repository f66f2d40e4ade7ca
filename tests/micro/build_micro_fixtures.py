"""Build the microTVM fixtures with TVM 0.16 (run by the peer's Python; see conftest.py).

Three models sized for microcontrollers: ``sine`` (TFLite-Micro's "hello world": dense 16,
relu, dense 16, relu, dense 1 on a float32 ``(1, 1)``), ``kws`` (a small DS-CNN-like keyword
spotter on a float32 ``(1, 1, 49, 10)`` spectrogram: conv 3x3/2, depthwise 3x3, pointwise
1x1, global average pool, dense 12, softmax) and ``int8cnn`` (int8 through QNN: qnn.conv2d
with per-channel weight scales, requantize, clip, qnn.dense, requantize). Each is built with
the CRT runtime and exported with ``export_model_library_format`` (microTVM's output), as
the tar and unpacked, in these forms:

- ``<model>_c_usmp``: ``target="c"``, AOT, the C interface with the unpacked API, linked
  params, USMP on (the workspace is one pool the caller hands over);
- ``<model>_c_nousmp``: the same with USMP off (kernels ask TVMBackendAllocWorkspace);
- ``<model>_packed``: ``target="c"``, AOT, the packed API, linked params, USMP off;
- ``<model>_llvm_m3_packed``, ``<model>_llvm_m4f_packed``: object code for Cortex-M3 and
  Cortex-M4F (``codegen/host/lib/*.o``). TVM 0.16's LLVM codegen cannot lower
  ``tir.tvm_check_return``, which the AOT executor wraps around every call with the unpacked
  API, so those builds (``<model>_llvm_m3``, ``<model>_llvm_m4f``) are tried, and recorded
  under ``skipped`` with the reason when they fail; the object-code builds that do work use
  the packed API with a system library (LLVM's C-runtime metadata module requires it) and
  USMP off (with it, ``__tvm_main__`` takes the pools as arguments and no object holds the
  constant pool's bytes). The
  M4F target puts the ``cpu`` key first: under ``arm_cpu`` the int8 dense takes the DSP
  schedule, whose C micro-kernels LLVM drops (undefined ``gemm_*`` in the object);
- ``<model>_graph``: ``target="c"``, the graph executor, ``system-lib``, params apart.

The golden outputs are TVM's own: the same module and params built for
``llvm -mtriple=x86_64-linux-gnu`` (this TVM's default triple is RISC-V) with the C++
runtime and run through ``tvm.contrib.graph_executor.GraphModule``: ``<model>/golden.npz``
(``in_<name>``, ``out_<i>``) and the inputs alone in ``<model>/inputs.npz`` (what
``tvmrt micro run -i`` takes). ``index.json`` lists every package and the skipped builds.

This TVM is built with ``USE_MICRO=OFF``: ``import tvm.micro`` fails after loading
``tvm.micro.model_library_format``, whose exporter is used unchanged except its last step
(adding TVM's standalone CRT sources and the template project to the tar, absent here);
tvmrt never reads those members.

usage: python build_micro_fixtures.py OUT_DIR, with TOPHUB_LOCATION=NONE (TVM is imported
only then: pytest's doctest collection imports this file in tvmrt's environment)
"""

from __future__ import annotations


def build() -> None:
    import contextlib
    import json
    import os

    # the arm_cpu schedules look up TVM's tuning logs online unless told not to (no network)
    os.environ.setdefault("TOPHUB_LOCATION", "NONE")
    import sys
    import tarfile
    from pathlib import Path

    import numpy as np
    import tvm
    from tvm import relay
    from tvm.contrib import graph_executor
    from tvm.relay.backend import Executor, Runtime

    with contextlib.suppress(ImportError):  # USE_MICRO=OFF: fails after the MLF module loaded
        import tvm.micro
    mlf = sys.modules["tvm.micro.model_library_format"]

    def _make_tar(source_dir, tar_file_path, modules):
        with tarfile.open(tar_file_path, "w") as tar_f:
            tar_f.add(str(source_dir), arcname=".")

    mlf._make_tar = _make_tar

    llvm_targets = {
        "llvm_m3": "llvm -mtriple=thumbv7m-none-eabi -mcpu=cortex-m3",
        # keys "cpu" first: with "arm_cpu" first, the int8 dense takes the Cortex-M DSP schedule,
        # whose micro-kernels are C source (pragma_import_c) that LLVM drops, leaving the
        # object with undefined gemm_* symbols
        "llvm_m4f": "llvm -keys=cpu -mtriple=thumbv7em-none-eabihf -mcpu=cortex-m4"
        " -mfloat-abi=hard",
    }

    def sine_model():
        rs = np.random.RandomState(0)
        x = relay.var("input_1", shape=(1, 1), dtype="float32")
        shapes = {"d1_w": (16, 1), "d1_b": (16,), "d2_w": (16, 16), "d2_b": (16,)}
        shapes |= {"d3_w": (1, 16), "d3_b": (1,)}
        v = {k: relay.var(k, shape=s, dtype="float32") for k, s in shapes.items()}
        y = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, v["d1_w"]), v["d1_b"]))
        y = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(y, v["d2_w"]), v["d2_b"]))
        y = relay.nn.bias_add(relay.nn.dense(y, v["d3_w"]), v["d3_b"])
        params = {k: rs.uniform(-1, 1, size=s).astype("float32") for k, s in shapes.items()}
        inputs = {"input_1": np.array([[1.25]], dtype="float32")}
        return relay.Function([x, *v.values()], y), params, inputs

    def kws_model():
        rs = np.random.RandomState(1)
        x = relay.var("input_1", shape=(1, 1, 49, 10), dtype="float32")
        shapes = {"conv_w": (8, 1, 3, 3), "conv_b": (8,), "dw_w": (8, 1, 3, 3), "dw_b": (8,)}
        shapes |= {"pw_w": (16, 8, 1, 1), "pw_b": (16,), "fc_w": (12, 16), "fc_b": (12,)}
        v = {k: relay.var(k, shape=s, dtype="float32") for k, s in shapes.items()}
        conv = relay.nn.conv2d
        y = conv(x, v["conv_w"], (2, 2), (1, 1), channels=8, kernel_size=(3, 3))
        y = relay.nn.relu(relay.nn.bias_add(y, v["conv_b"]))
        y = conv(y, v["dw_w"], padding=(1, 1), groups=8, channels=8, kernel_size=(3, 3))
        y = relay.nn.relu(relay.nn.bias_add(y, v["dw_b"]))
        y = conv(y, v["pw_w"], channels=16, kernel_size=(1, 1))
        y = relay.nn.relu(relay.nn.bias_add(y, v["pw_b"]))
        y = relay.nn.batch_flatten(relay.nn.global_avg_pool2d(y))
        y = relay.nn.softmax(relay.nn.bias_add(relay.nn.dense(y, v["fc_w"]), v["fc_b"]))
        params = {k: (rs.randn(*s) * 0.5).astype("float32") for k, s in shapes.items()}
        inputs = {"input_1": rs.randn(1, 1, 49, 10).astype("float32")}
        return relay.Function([x, *v.values()], y), params, inputs

    def int8cnn_model():
        rs = np.random.RandomState(2)
        x = relay.var("input_1", shape=(1, 1, 8, 8), dtype="int8")
        conv_w = relay.var("conv_w", shape=(4, 1, 3, 3), dtype="int8")
        conv_b = relay.var("conv_b", shape=(4,), dtype="int32")
        fc_w = relay.var("fc_w", shape=(10, 256), dtype="int8")
        in_scale, in_zp, act_scale, act_zp = 0.05, -3, 0.1, -128
        w_scales = np.array([0.01, 0.02, 0.015, 0.03], dtype="float32")
        acc = relay.qnn.op.conv2d(
            x,
            conv_w,
            relay.const(in_zp),
            relay.const(0),
            relay.const(in_scale),
            relay.const(w_scales),
            kernel_size=(3, 3),
            channels=4,
            padding=(1, 1),
            out_dtype="int32",
        )
        acc = relay.nn.bias_add(acc, conv_b)
        y = relay.qnn.op.requantize(
            acc,
            relay.const(w_scales * in_scale),
            relay.const(0),
            relay.const(act_scale),
            relay.const(act_zp),
            axis=1,
            out_dtype="int8",
        )
        y = relay.reshape(relay.clip(y, act_zp, 127), (1, 256))  # relu on the int8 scale
        acc = relay.qnn.op.dense(
            y,
            fc_w,
            relay.const(act_zp),
            relay.const(0),
            relay.const(act_scale),
            relay.const(0.02),
            units=10,
        )
        out = relay.qnn.op.requantize(
            acc,
            relay.const(act_scale * 0.02),
            relay.const(0),
            relay.const(2.5),  # the dense sums span about +-300
            relay.const(5),
            out_dtype="int8",
        )
        params = {
            "conv_w": rs.randint(-128, 128, size=(4, 1, 3, 3)).astype("int8"),
            "conv_b": rs.randint(-500, 500, size=(4,)).astype("int32"),
            "fc_w": rs.randint(-128, 128, size=(10, 256)).astype("int8"),
        }
        inputs = {"input_1": rs.randint(-128, 128, size=(1, 1, 8, 8)).astype("int8")}
        return relay.Function([x, conv_w, conv_b, fc_w], out), params, inputs

    def golden(mod, params, inputs, out):
        with tvm.transform.PassContext(opt_level=3):
            built = relay.build(
                mod,
                target="llvm -mtriple=x86_64-linux-gnu",
                params=params,
                runtime=Runtime("cpp"),
                executor=Executor("graph"),
            )
        module = graph_executor.GraphModule(built["default"](tvm.cpu(0)))
        module.set_input(**inputs)
        module.run()
        outs = [module.get_output(i).numpy() for i in range(module.get_num_outputs())]
        np.savez(
            out / "golden.npz",
            **{f"in_{k}": v for k, v in inputs.items()},
            **{f"out_{i}": v for i, v in enumerate(outs)},
        )
        np.savez(out / "inputs.npz", **inputs)

    def tiny_build(target):  # does this LLVM have the backend at all (with the packed API)?
        x = relay.var("x", shape=(1, 4), dtype="float32")
        mod = tvm.IRModule.from_expr(relay.Function([x], relay.nn.relu(x)))
        with tvm.transform.PassContext(opt_level=3, config={"tir.disable_vectorize": True}):
            relay.build(
                mod,
                target=tvm.target.Target(target),
                runtime=Runtime("crt", {"system-lib": True}),
                executor=Executor("aot", {"interface-api": "packed", "unpacked-api": False}),
                mod_name="probe",
            )

    index: list[dict] = []
    skipped: list[dict] = []

    def export(built, folder, name, entry):
        tar = folder / f"{name}.tar"
        mlf.export_model_library_format(built, str(tar))
        (folder / name).mkdir(exist_ok=True)
        with tarfile.open(tar) as t:
            t.extractall(folder / name)
        index.append({"name": name, **entry})

    def why_failed(err):
        last = str(err).strip().splitlines()[-1]
        if "tvm_check_return" in last:
            return (
                "the AOT executor wraps each call of the unpacked API in tir.tvm_check_return, "
                f"which TVM 0.16's LLVM codegen has no lowering for ({last})"
            )
        return last

    def build_aot(mod, params, model, target, api, usmp, system_lib=False):
        options = {"interface-api": api, "unpacked-api": api == "c", "link-params": True}
        config = {"tir.disable_vectorize": True, "tir.usmp.enable": usmp}
        with tvm.transform.PassContext(opt_level=3, config=config):
            return relay.build(
                mod,
                target=tvm.target.Target(target),
                params=params,
                runtime=Runtime("crt", {"system-lib": True} if system_lib else {}),
                executor=Executor("aot", options),
                mod_name=model,
            )

    def build_graph(mod, params, model):
        with tvm.transform.PassContext(opt_level=3, config={"tir.disable_vectorize": True}):
            return relay.build(
                mod,
                target="c",
                params=params,
                runtime=Runtime("crt", {"system-lib": True}),
                executor=Executor("graph"),
                mod_name=model,
            )

    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    llvm_ok = {}
    for tname, target in llvm_targets.items():
        try:
            tiny_build(target)
            llvm_ok[tname] = True
        except tvm.TVMError as err:
            llvm_ok[tname] = False
            why = f"this TVM's LLVM cannot build for {target!r}: {why_failed(err)}"
            skipped.append({"name": f"*_{tname}", "why": why})

    c_builds = (("c_usmp", "c", True), ("c_nousmp", "c", False), ("packed", "packed", False))
    models = (("sine", sine_model), ("kws", kws_model), ("int8cnn", int8cnn_model))
    for model, make in models:
        func, params, inputs = make()
        mod = relay.transform.InferType()(tvm.IRModule.from_expr(func))
        folder = out / model
        folder.mkdir(exist_ok=True)
        golden(mod, params, inputs, folder)
        for suffix, api, usmp in c_builds:
            built = build_aot(mod, params, model, "c", api, usmp)
            entry = {"model": model, "kind": "aot", "target": "c", "api": api, "usmp": usmp}
            export(built, folder, f"{model}_{suffix}", entry | {"target_str": "c"})
        for tname, target in (t for t in llvm_targets.items() if llvm_ok[t[0]]):
            entry = {"model": model, "kind": "aot", "target": tname, "target_str": target}
            try:
                built = build_aot(mod, params, model, target, "c", True)
            except tvm.TVMError as err:
                skipped.append({"name": f"{model}_{tname}", "why": why_failed(err)})
            else:
                export(built, folder, f"{model}_{tname}", entry | {"api": "c", "usmp": True})
            # what does build: the packed API, whose LLVM metadata module needs a system lib;
            # USMP off, so the objects hold everything (with USMP their __tvm_main__ takes
            # the pools as arguments, and the constant pool's bytes are in no object)
            built = build_aot(mod, params, model, target, "packed", False, system_lib=True)
            entry |= {"api": "packed", "usmp": False, "system_lib": True}
            export(built, folder, f"{model}_{tname}_packed", entry)
        entry = {"model": model, "kind": "graph", "target": "c", "api": "packed", "usmp": False}
        entry |= {"system_lib": True, "target_str": "c"}
        export(build_graph(mod, params, model), folder, f"{model}_graph", entry)
    (out / "index.json").write_text(json.dumps({"packages": index, "skipped": skipped}, indent=1))
    (out / "done").write_text("ok")


if __name__ == "__main__":
    build()
