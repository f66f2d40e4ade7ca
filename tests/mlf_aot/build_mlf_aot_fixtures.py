"""Build the MLF AOT fixtures with TVM 0.16 (run by the peer's Python; see conftest.py).

For each model (float32 with two outputs, int8 through QNN) and each interface (``c`` with
the unpacked API, ``packed`` with the packed API) and link-params (on, off): the same
Relay module is built for ``target="c"`` with the CRT runtime and the AOT executor and
exported with ``export_model_library_format`` (as ``tvmc --runtime=crt`` does), both as
the tar and unpacked. The golden outputs are TVM's own: the same module and params built
for TVM's host-driven AOT (``runtime=cpp``, the C++ runtime) and run through
``tvm.runtime.executor.AotModule``.

This TVM is built with ``USE_MICRO=OFF``: ``import tvm.micro`` fails after loading
``tvm.micro.model_library_format``, whose exporter is used unchanged except its last step
(adding TVM's standalone CRT sources and the template project to the tar, absent here);
tvmrt never reads those members.

usage: python build_mlf_aot_fixtures.py OUT_DIR (TVM is imported only then: pytest's doctest
collection imports this file in tvmrt's environment)
"""

from __future__ import annotations


def build() -> None:
    import contextlib
    import json
    import sys
    import tarfile
    from pathlib import Path

    import numpy as np
    import tvm
    from tvm import relay
    from tvm.relay.backend import Executor, Runtime
    from tvm.runtime.executor import AotModule

    with contextlib.suppress(ImportError):  # USE_MICRO=OFF: fails after the MLF module loaded
        import tvm.micro
    mlf = sys.modules["tvm.micro.model_library_format"]

    def _make_tar(source_dir, tar_file_path, modules):
        with tarfile.open(tar_file_path, "w") as tar_f:
            tar_f.add(str(source_dir), arcname=".")

    mlf._make_tar = _make_tar

    def float_model():
        rs = np.random.RandomState(0)
        x = relay.var("input_1", shape=(1, 3, 10, 10), dtype="float32")
        w = relay.var("conv_w", shape=(8, 3, 3, 3), dtype="float32")
        b = relay.var("conv_b", shape=(8,), dtype="float32")
        y = relay.nn.relu(
            relay.nn.bias_add(
                relay.nn.conv2d(x, w, padding=(1, 1), kernel_size=(3, 3), channels=8), b
            )
        )
        z = relay.mean(relay.sigmoid(y), axis=[2, 3])
        params = {
            "conv_w": rs.randn(8, 3, 3, 3).astype("float32"),
            "conv_b": rs.randn(8).astype("float32"),
        }
        inputs = {"input_1": rs.randn(1, 3, 10, 10).astype("float32")}
        return relay.Function([x, w, b], relay.Tuple([y, z])), params, inputs

    def int8_model():
        rs = np.random.RandomState(1)
        x = relay.var("x", shape=(1, 16), dtype="int8")
        w = relay.var("w", shape=(8, 16), dtype="int8")
        acc = relay.qnn.op.dense(
            x, w, relay.const(3), relay.const(0), relay.const(0.05), relay.const(0.02), units=8
        )
        out = relay.qnn.op.requantize(
            acc,
            relay.const(0.001),
            relay.const(0),
            relay.const(0.1),
            relay.const(-4),
            out_dtype="int8",
        )
        params = {"w": rs.randint(-128, 128, size=(8, 16)).astype("int8")}
        inputs = {"x": rs.randint(-128, 128, size=(1, 16)).astype("int8")}
        return relay.Function([x, w], out), params, inputs

    def golden(func, params, inputs, out):
        mod = tvm.IRModule.from_expr(func)
        config = {"tir.disable_vectorize": True}
        with tvm.transform.PassContext(opt_level=3, config=config):
            built = relay.build(
                mod,
                target="c",
                params=params,
                runtime=Runtime("cpp"),
                executor=Executor("aot", {"interface-api": "packed", "unpacked-api": False}),
            )
        built.export_library(str(out / "host_aot.so"))
        lib = tvm.runtime.load_module(str(out / "host_aot.so"))
        module = AotModule(lib["default"](tvm.cpu(0)))
        module.set_input(**inputs)
        module.run()
        outs = [module.get_output(i).numpy() for i in range(module.get_num_outputs())]
        np.savez(
            out / "golden.npz",
            **{f"in_{k}": v for k, v in inputs.items()},
            **{f"out_{i}": v for i, v in enumerate(outs)},
        )

    def _main():
        out = Path(sys.argv[1])
        out.mkdir(parents=True, exist_ok=True)
        index = []
        for model, make in (("float", float_model), ("int8", int8_model)):
            func, params, inputs = make()
            (out / model).mkdir(exist_ok=True)
            golden(func, params, inputs, out / model)
            mod = tvm.IRModule.from_expr(func)
            if model == "float":  # as tvmc's frontends hand it over: typed, so the package's
                mod = relay.transform.InferType()(mod)  # Relay source says main's return type
            for api, unpacked in (("c", True), ("packed", False)):
                for link in (True, False):
                    executor = Executor(
                        "aot", {"interface-api": api, "unpacked-api": unpacked, "link-params": link}
                    )
                    # the packed builds without USMP: their kernels ask TVMBackendAllocWorkspace
                    config = {"tir.disable_vectorize": True, "tir.usmp.enable": api == "c"}
                    with tvm.transform.PassContext(opt_level=3, config=config):
                        built = relay.build(
                            mod,
                            target="c",
                            params=params,
                            runtime=Runtime("crt"),
                            executor=executor,
                            mod_name=f"{model}_net",
                        )
                    name = f"{model}_{api}_{'linked' if link else 'separate'}"
                    tar = out / model / f"{name}.tar"
                    mlf.export_model_library_format(built, str(tar))
                    folder = out / model / name
                    folder.mkdir(exist_ok=True)
                    with tarfile.open(tar) as t:
                        t.extractall(folder)
                    index.append({"model": model, "name": name, "api": api, "link": link})
        (out / "index.json").write_text(json.dumps(index, indent=1))
        (out / "done").write_text("ok")

    _main()


if __name__ == "__main__":
    build()
