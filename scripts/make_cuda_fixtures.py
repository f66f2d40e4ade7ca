"""Make the CUDA test artifacts without a GPU: TVM 0.27 lowers, nvcc compiles, we relink.

Run with a Python that has TVM 0.27 (apache-tvm) and with ``nvcc`` on PATH::

    PYTHONPATH=src python scripts/make_cuda_fixtures.py build/cuda-fixtures

For each kernel program (``add_one``: an elementwise kernel with a 32-bit scalar;
``dense_relu``: a matmul with a 2-D grid), TVM 0.27 compiles a ``cuda`` target
(``tvm.compile``, dlight's default GPU schedule) and exports the library as a tar:
``lib0.o`` (TVM's own host code, which calls the kernels through the tvm-ffi
environment) and ``devc.o`` (``__tvm_ffi__library_bin``, whose ``cuda`` entry holds CUDA C
source, as TVM 0.27 from the package index cannot compile it). We compile that source with
``nvcc`` (``-ptx -arch=compute_75``: any GPU from sm_75 up JIT-compiles it; ``-cubin
-arch=sm_90``; ``-fatbin`` with sm_75 SASS + compute_75 PTX), rewrite the entry with fmt
``ptx`` / ``cubin`` / ``fatbin`` and the same FunctionInfo table TVM wrote, and link
``lib0.o`` with the new ``devc.o`` into ``<name>_<fmt>.so``. The same TIR built for
``llvm`` gives the golden outputs (``<name>_golden.npz``: inputs and outputs). The PTX
also goes out as separate files (``<name>.ptx`` + ``<name>.tvm_meta.json``).
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import tvm
from tvm import te
from tvm.s_tir import dlight

from tvmrt.binfmt.stream import ByteReader
from tvmrt.error import ModuleLoadError
from tvmrt.runtime.launch import read_function_table

ARCH_PTX, ARCH_CUBIN = "compute_75", "sm_90"


def programs() -> dict[str, tuple[tvm.IRModule, list[tuple[tuple[int, ...], str]]]]:
    n = te.var("n")
    a = te.placeholder((n,), "float32", name="A")
    b = te.compute((n,), lambda i: a[i] + 1.0, name="B")
    add_one = te.create_prim_func([a, b]).with_attr("global_symbol", "add_one")
    x = te.placeholder((8, 64), "float32", name="X")
    w = te.placeholder((32, 64), "float32", name="W")
    k = te.reduce_axis((0, 64), name="k")
    y = te.compute((8, 32), lambda i, j: te.sum(x[i, k] * w[j, k], axis=k), name="Y")
    r = te.compute((8, 32), lambda i, j: te.max(y[i, j], 0.0), name="R")
    dense = te.create_prim_func([x, w, r]).with_attr("global_symbol", "dense_relu")
    return {
        "add_one": (tvm.IRModule({"add_one": add_one}), [((1000,), "float32")]),
        "dense_relu": (
            tvm.IRModule({"dense_relu": dense}),
            [((8, 64), "float32"), ((32, 64), "float32")],
        ),
    }


def _u64(v: int) -> bytes:
    return struct.pack("<Q", v)


def _str(b: bytes) -> bytes:
    return _u64(len(b)) + b


def _read_str(data: bytes, at: int) -> tuple[bytes, int]:
    (n,) = struct.unpack_from("<Q", data, at)
    return data[at + 8 : at + 8 + n], at + 8 + n


def rewrite_library_bin(blob: bytes, fmt: str, image: bytes) -> tuple[bytes, dict[str, Any]]:
    """``__tvm_ffi__library_bin`` with the ``cuda`` entry's fmt and data replaced, and the
    entry's kernel table as a ``tvm_meta.json`` ``func_info``."""
    body = blob[8:]
    at = 0
    parts = []
    for _ in range(2):  # indptr, children
        (n,) = struct.unpack_from("<Q", body, at)
        parts.append(body[at : at + 8 + 8 * n])
        at += 8 + 8 * n
    out = b"".join(parts)
    info: dict[str, Any] = {}
    while at < len(body):
        kind, at = _read_str(body, at)
        out += _str(kind)
        if kind == b"_lib":
            continue
        payload, at = _read_str(body, at)
        if kind == b"cuda":
            reader = ByteReader(payload, "cuda entry", ModuleLoadError)
            assert reader.string() == "cuda"  # TVM 0.27 without CUDA: CUDA C source
            start = reader.offset
            table = read_function_table(reader, extra_tags=True)
            table_bytes = payload[start : reader.offset]
            reader.blob()
            assert not reader.remaining
            payload = _str(fmt.encode()) + table_bytes + _str(image)
            for key, f in table.items():
                info[key] = {"name": f.name, "arg_types": [str(t) for t in f.arg_types],
                             "launch_param_tags": list(f.launch_param_tags),
                             "arg_extra_tags": list(f.arg_extra_tags)}  # fmt: skip
        out += _str(payload)
    return _u64(len(out)) + out, info


def _symbol_bytes(obj: Path, symbol: str) -> bytes:
    out = subprocess.check_output(
        ["objcopy", "-O", "binary", "-j", ".rodata", str(obj), "/dev/stdout"]
    )
    syms = subprocess.check_output(["nm", "-S", str(obj)]).decode()
    for line in syms.splitlines():
        parts = line.split()
        if parts[-1] == symbol:
            start, size = int(parts[0], 16), int(parts[1], 16)
            return out[start : start + size]
    raise ValueError(f"{symbol} not in {obj}")


def _c_array(name: str, data: bytes) -> str:
    body = ",".join(str(b) for b in data)
    return f"const unsigned char {name}[{len(data)}] = {{{body}}};\n"


def build(
    name: str, mod: tvm.IRModule, shapes: list[tuple[tuple[int, ...], str]], out: Path
) -> None:
    target = tvm.target.Target({"kind": "cuda", "arch": "sm_75"}, host={"kind": "llvm"})
    with target:
        gpu = dlight.ApplyDefaultSchedule(dlight.gpu.Matmul(), dlight.gpu.Fallback())(mod)
    lib = tvm.compile(gpu, target=target)
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        lib.export_library(str(t / "x.tar"))
        with tarfile.open(t / "x.tar") as tar:
            tar.extractall(t, filter="data")
        source = lib.mod.imports[0].inspect_source()
        (t / "k.cu").write_text(source)
        nvcc = ["nvcc", "-w", "-O3"]
        subprocess.run(
            [*nvcc, "-ptx", f"-arch={ARCH_PTX}", "-o", str(t / "k.ptx"), str(t / "k.cu")],
            check=True,
        )
        subprocess.run(
            [*nvcc, "-cubin", f"-arch={ARCH_CUBIN}", "-o", str(t / "k.cubin"), str(t / "k.cu")],
            check=True,
        )
        gencode = [
            "-gencode",
            "arch=compute_75,code=sm_75",
            "-gencode",
            "arch=compute_75,code=compute_75",
        ]
        subprocess.run(
            [*nvcc, "-fatbin", *gencode, "-o", str(t / "k.fatbin"), str(t / "k.cu")], check=True
        )
        blob = _symbol_bytes(t / "devc.o", "__tvm_ffi__library_bin")
        for fmt in ("ptx", "cubin", "fatbin"):
            image = (t / f"k.{fmt}").read_bytes()
            new, info = rewrite_library_bin(blob, fmt, image)
            (t / "devc.c").write_text(_c_array("__tvm_ffi__library_bin", new))
            subprocess.run(
                ["cc", "-c", "-fPIC", "-o", str(t / "devc2.o"), str(t / "devc.c")], check=True
            )
            subprocess.run(["cc", "-shared", "-o", str(out / f"{name}_{fmt}.so"), str(t / "lib0.o"),
                            str(t / "devc2.o")], check=True)  # fmt: skip
        (out / f"{name}.ptx").write_bytes((t / "k.ptx").read_bytes())
        (out / f"{name}.cu").write_text(source)
    meta = {"tvm_version": "0.1.0", "func_info": info}
    (out / f"{name}.tvm_meta.json").write_text(json.dumps(meta))
    fresh = programs()[name][0]  # the schedule above rewrote the functions in place
    cpu = tvm.compile(fresh, target=tvm.target.Target({"kind": "llvm"}))
    rng = np.random.default_rng(0)
    inputs = [rng.uniform(-1, 1, s).astype(d) for s, d in shapes]
    out_shape = (8, 32) if name == "dense_relu" else shapes[0][0]
    args = [tvm.runtime.tensor(x) for x in inputs] + [tvm.runtime.empty(out_shape, "float32")]
    cpu[name](*args)
    np.savez(out / f"{name}_golden.npz", *inputs, expected=args[-1].numpy())


def cnn_model() -> Any:
    """A small CNN as ONNX (Conv, Relu, Reshape, Gemm, Softmax), weights from a fixed seed."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    inits = [
        numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype("float32"), "w1"),
        numpy_helper.from_array(
            (rng.standard_normal((10, 8 * 14 * 14)) * 0.05).astype("float32"), "w2"
        ),
        numpy_helper.from_array(rng.standard_normal(10).astype("float32"), "b2"),
        numpy_helper.from_array(np.array([1, -1], "int64"), "shape"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c"]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Reshape", ["r", "shape"], ["f"]),
        helper.make_node("Gemm", ["f", "w2", "b2"], ["y"], transB=1),
        helper.make_node("Softmax", ["y"], ["p"], axis=1),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])
    p = helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, 10])
    graph = helper.make_graph(nodes, "cnn", [x], [p], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def build_graph(out: Path) -> None:
    """``cnn_ptx.so``: a graph-executor factory (tvm-ffi layout) whose kernels are CUDA.

    tvmrt's compile bridge lowers and emits the graph (``frontend.lower``,
    ``emitter.emit_graph``, as ``tvmrt compile``); the kernels get dlight's default GPU
    schedules and TVM 0.27 builds them for ``cuda``; the library binary holds the
    factory (importing the library), ``_lib`` and the ``cuda`` entry with nvcc's PTX.
    Golden: ``tvmrt compile`` of the same ONNX for the CPU, run by tvmrt on the CPU.
    """
    from tvmrt.compiler import compile as tvmrt_compile
    from tvmrt.compiler import emitter, frontend
    from tvmrt.compiler.build import FACTORY_KIND
    from tvmrt.runtime import cpu, load_module
    from tvmrt.runtime import ndarray as nd
    from tvmrt.runtime.graph_executor.factory import GraphExecutorFactory, save_factory_binary

    proto = cnn_model()
    cuda = tvm.target.Target({"kind": "cuda", "arch": "sm_75"}, host={"kind": "llvm"})
    mod = frontend.lower(frontend.import_onnx(proto, {"x": (1, 3, 16, 16)}), cuda)
    art = emitter.emit_graph(mod, ["x"], ["p"])
    funcs = {n: mod[n].with_attr("global_symbol", n) for n in art.kernels}
    rules = [dlight.gpu.Matmul(), dlight.gpu.GEMV(), dlight.gpu.Reduction(),
             dlight.gpu.GeneralReduction(), dlight.gpu.Fallback()]  # fmt: skip
    with cuda:
        gpu = dlight.ApplyDefaultSchedule(*rules)(tvm.IRModule(funcs))
    lib = tvm.compile(gpu, target=cuda)
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        lib.export_library(str(t / "x.tar"))
        with tarfile.open(t / "x.tar") as tar:
            tar.extractall(t, filter="data")
        (t / "k.cu").write_text(lib.mod.imports[0].inspect_source())
        cmd = ["nvcc", "-w", "-O3", "-ptx", f"-arch={ARCH_PTX}", "-o", str(t / "k.ptx")]
        subprocess.run([*cmd, str(t / "k.cu")], check=True)
        blob, _ = rewrite_library_bin(
            _symbol_bytes(t / "devc.o", "__tvm_ffi__library_bin"), "ptx",
            (t / "k.ptx").read_bytes(),
        )  # fmt: skip
        cuda_entry = blob.split(_str(b"cuda"), 1)[1]  # str payload of the cuda module
        factory = GraphExecutorFactory(art.json, {k: nd.array(v) for k, v in art.params.items()})
        payload = b"".join([
            _u64(4) + _u64(0) + _u64(1) + _u64(2) + _u64(2),  # indptr [0, 1, 2, 2]
            _u64(2) + _u64(1) + _u64(2),  # factory imports _lib, _lib imports cuda
            _str(FACTORY_KIND.encode()), _str(save_factory_binary(factory)),
            _str(b"_lib"), _str(b"cuda"), cuda_entry,
        ])  # fmt: skip
        new = _u64(len(payload)) + payload
        (t / "devc.c").write_text(_c_array("__tvm_ffi__library_bin", new))
        subprocess.run(["cc", "-c", "-fPIC", "-o", str(t / "d.o"), str(t / "devc.c")], check=True)
        subprocess.run(["cc", "-shared", "-o", str(out / "cnn_ptx.so"), str(t / "lib0.o"),
                        str(t / "d.o")], check=True)  # fmt: skip
        cpu_dir = t / "cpu"
        import onnx

        onnx.save(proto, str(t / "cnn.onnx"))
        onnx.save(proto, str(out / "cnn.onnx"))
        tvmrt_compile(str(t / "cnn.onnx"), "x86-64", output_dir=str(cpu_dir), progress=None)
        golden_lib = load_module(str(cpu_dir / "standalone.so"))
        from tvmrt.contrib import graph_executor

        gm = graph_executor.GraphModule(golden_lib["default"](cpu()))
        x = np.random.default_rng(2).standard_normal((1, 3, 16, 16)).astype("float32")
        gm.set_input("x", x)
        gm.run()
        np.savez(out / "cnn_golden.npz", x=x, expected=gm.get_output(0).numpy())


def mobilenet_model() -> Any:
    """A MobileNet v1 (width 0.5) as ONNX: a strided 3x3 conv, 13 depthwise-separable
    blocks (depthwise 3x3 + pointwise 1x1, each Conv with bias + Clip(0, 6)), global
    average pooling, a 1000-way Gemm and Softmax, on 1x3x224x224; weights from a fixed seed
    (He-scaled, so activations neither vanish nor explode through 28 layers)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    inits, nodes = [], []
    relu6 = [numpy_helper.from_array(np.array(v, "float32"), n) for v, n in ((0, "lo"), (6, "hi"))]
    inits.extend(relu6)

    def conv(src: str, cin: int, cout: int, k: int, stride: int, group: int) -> str:
        i = len(nodes)
        fan_in = cin // group * k * k
        w = (rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2 / fan_in)).astype(
            "float32"
        )
        b = (rng.standard_normal(cout) * 0.05).astype("float32")
        inits.extend([numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")])
        nodes.append(helper.make_node("Conv", [src, f"w{i}", f"b{i}"], [f"c{i}"], group=group,
                                      kernel_shape=[k, k], strides=[stride, stride],
                                      pads=[k // 2] * 4))  # fmt: skip
        nodes.append(helper.make_node("Clip", [f"c{i}", "lo", "hi"], [f"r{i}"]))
        return f"r{i}"

    x = conv("x", 3, 16, 3, 2, 1)
    cin = 16
    for cout, stride in ((32, 1), (64, 2), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1),
                         (256, 1), (256, 1), (256, 1), (256, 1), (512, 2), (512, 1)):  # fmt: skip
        x = conv(conv(x, cin, cin, 3, stride, cin), cin, cout, 1, 1, 1)
        cin = cout
    fc = (rng.standard_normal((1000, cin)) * np.sqrt(1 / cin)).astype("float32")
    inits.extend([numpy_helper.from_array(fc, "fc"),
                  numpy_helper.from_array(np.zeros(1000, "float32"), "fcb"),
                  numpy_helper.from_array(np.array([1, -1], "int64"), "flat")])  # fmt: skip
    nodes += [
        helper.make_node("GlobalAveragePool", [x], ["gap"]),
        helper.make_node("Reshape", ["gap", "flat"], ["f"]),
        helper.make_node("Gemm", ["f", "fc", "fcb"], ["y"], transB=1),
        helper.make_node("Softmax", ["y"], ["p"], axis=1),
    ]
    graph = helper.make_graph(
        nodes, "mobilenet_v1_050",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 224, 224])],
        [helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, 1000])], inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def build_mobilenet(out: Path) -> None:
    """``mobilenet_cuda/``: ``tvmrt compile --target cuda`` of :func:`mobilenet_model`
    (TVM 0.27 + nvcc PTX for sm_75; a tvm-ffi era folder with ``standalone.so``). Golden:
    ``tvmrt compile`` of the same ONNX for the CPU, run by tvmrt on the CPU."""
    import onnx

    from tvmrt.artifact import find_artifact, load_artifact
    from tvmrt.compiler import compile as tvmrt_compile
    from tvmrt.runtime import cpu

    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "mobilenet.onnx"
        onnx.save(mobilenet_model(), str(model))
        target = out / "mobilenet_cuda"
        shutil.rmtree(target, ignore_errors=True)
        tvmrt_compile(str(model), "cuda", output_dir=str(target), progress=None)
        tvmrt_compile(str(model), "x86-64", output_dir=f"{tmp}/cpu", progress=None)
        golden = load_artifact(find_artifact(Path(f"{tmp}/cpu/standalone.so")), cpu())
        x = np.random.default_rng(4).uniform(0, 1, (1, 3, 224, 224)).astype("float32")
        golden.executor.set_input("x", x)
        golden.executor.run()
        np.savez(out / "mobilenet_golden.npz", x=x, expected=golden.executor.get_output(0).numpy())


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "build/cuda-fixtures")
    out.mkdir(parents=True, exist_ok=True)
    for name, (mod, shapes) in programs().items():
        build(name, mod, shapes, out)
        print("made", name)
    build_graph(out)
    print("made cnn (graph executor factory)")
    build_mobilenet(out)
    print("made mobilenet_cuda (tvmrt compile --target cuda)")
    build_relay019(out)


def build_relay019(out: Path) -> None:
    """The Relay-era fixture (scripts/make_cuda_relay_fixture.py), where TVM 0.19 is at hand."""
    import os

    peers = Path(os.environ.get("TVMRT_PEERS_DIR", Path(__file__).parents[1] / "build" / "peers"))
    python = peers / "tvm019" / "bin" / "python"
    if not python.exists():
        print(f"skipped relay019: no TVM 0.19 venv at {python.parent.parent}")
        return
    script = Path(__file__).with_name("make_cuda_relay_fixture.py")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([str(python), str(script), "stage1", tmp], check=True)
        subprocess.run([sys.executable, str(script), "stage2", tmp, str(out)], check=True)
    print("made relay019 (TVM 0.19 host code, legacy blob)")


if __name__ == "__main__":
    main()
