"""The Relay-era CUDA fixture: TVM 0.19's own host code for a ``cuda`` target, legacy blob.

Stage 1 runs under TVM 0.19 (``xtc-tvm-python-bindings``, the peers venv
``$TVMRT_PEERS_DIR/tvm019``), stage 2 under any Python with tvmrt and nvcc::

    $TVMRT_PEERS_DIR/tvm019/bin/python scripts/make_cuda_relay_fixture.py stage1 WORK
    PYTHONPATH=src python scripts/make_cuda_relay_fixture.py stage2 WORK OUT

Stage 1: a dense + bias + relu + softmax Relay model; ``relay.build`` for
``Target("cuda -arch=sm_80", host="llvm")`` with ``target.build.cuda`` overridden by a
Python hook returning TVM 0.19's ``target.build.opencl`` module of the same device IRModule
(TVM 0.19 from the index has no CUDA codegen), ``export_library("relay.tar")`` (``lib0.o``:
the host code, ``devc.o``: ``__tvm_dev_mblob``), and the same model compiled by
``relay.vm.compile`` for the same target (``vm.ro`` bytecode + ``vm.tar``); golden: the
same model built for ``llvm`` and run by TVM 0.19's graph executor. Stage 2, for both: the
OpenCL C of the CUDA schedule becomes CUDA C (address-space qualifiers,
``get_group_id``/``get_local_id``, ``barrier``), nvcc makes PTX (``-arch=compute_75``),
the blob's ``opencl`` entry is replaced by a ``cuda`` entry (fmt ``ptx``, the same
FunctionInfo table) and ``lib0.o`` is relinked:
``relay019_ptx.so``, ``relay019_vm_ptx.so`` + ``relay019_vm.ro`` and ``relay019_golden.npz``.
"""

from __future__ import annotations

import re
import struct
import subprocess
import sys
import tarfile
from pathlib import Path


def stage1(work: Path) -> None:
    import os

    os.environ["TOPHUB_LOCATION"] = "NONE"
    import numpy as np
    import tvm
    from tvm import relay
    from tvm.contrib import graph_executor
    from tvm.target import Target

    @tvm.register_func("target.build.cuda", override=True)
    def _build(mod, target):  # type: ignore[no-untyped-def]
        return tvm.get_global_func("target.build.opencl")(mod, Target("opencl", host=target.host))

    rng = np.random.default_rng(0)
    x = relay.var("x", shape=(1, 64), dtype="float32")
    w = relay.const(rng.standard_normal((32, 64)).astype("float32"))
    b = relay.const(rng.standard_normal((32,)).astype("float32"))
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, w), b))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.nn.softmax(y)))
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target=Target("cuda -arch=sm_80", host="llvm"))
        cpu = relay.build(mod, target="llvm")
    lib.export_library(str(work / "relay.tar"))
    (work / "kernels.cl").write_text(lib.get_lib().imported_modules[0].get_source())
    with tvm.transform.PassContext(opt_level=3):  # the same model as a Relay VM executable
        exe = relay.vm.compile(mod, target=Target("cuda -arch=sm_80", host="llvm"))
    code, vm_lib = exe.save()
    vm_lib.export_library(str(work / "vm.tar"))
    (work / "vm.ro").write_bytes(code)
    (work / "vm_kernels.cl").write_text(vm_lib.imported_modules[0].get_source())
    data = rng.standard_normal((1, 64)).astype("float32")
    gm = graph_executor.GraphModule(cpu["default"](tvm.cpu()))
    gm.set_input("x", data)
    gm.run()
    np.savez(work / "golden.npz", x=data, expected=gm.get_output(0).numpy())


def to_cuda(source: str) -> str:
    """OpenCL C of TVM's CUDA schedule -> CUDA C (the subset TVM 0.19 emits for it)."""
    out = source.replace("__kernel void", 'extern "C" __global__ void')
    out = out.replace("__global ", "").replace(" restrict ", " __restrict__ ")
    out = out.replace("volatile __local ", "volatile ").replace("__local ", "__shared__ ")
    out = out.replace("barrier(CLK_LOCAL_MEM_FENCE)", "__syncthreads()")
    for fn, var in (("get_group_id", "blockIdx"), ("get_local_id", "threadIdx")):
        for i, axis in enumerate("xyz"):
            out = out.replace(f"convert_int({fn}({i}))", f"((int){var}.{axis})")
            out = out.replace(f"{fn}({i})", f"{var}.{axis}")
    if re.search(r"\b(get_\w+_id|convert_\w+|vload\d|vstore\d)\(", out):
        raise ValueError("OpenCL built-ins left that this conversion does not know")
    return out


def _str(b: bytes) -> bytes:
    return struct.pack("<Q", len(b)) + b


def stage2(work: Path, out: Path) -> None:
    _relink(work / "graph", work / "relay.tar", work / "kernels.cl", out / "relay019_ptx.so")
    _relink(work / "vm", work / "vm.tar", work / "vm_kernels.cl", out / "relay019_vm_ptx.so")
    (out / "relay019_vm.ro").write_bytes((work / "vm.ro").read_bytes())
    (out / "relay019_golden.npz").write_bytes((work / "golden.npz").read_bytes())


def _relink(work: Path, tar: Path, kernels: Path, out: Path) -> None:
    """TVM 0.19's exported library ``tar`` with its ``opencl`` entry replaced by a ``cuda``
    entry holding the PTX of ``kernels`` (the OpenCL C of the CUDA schedule), as ``out``."""
    from tvmrt.binfmt.stream import ByteReader
    from tvmrt.error import ModuleLoadError
    from tvmrt.runtime.graph_executor.factory import load_factory_binary
    from tvmrt.runtime.launch import read_function_table

    work.mkdir(exist_ok=True)
    with tarfile.open(tar) as archive:
        archive.extractall(work, filter="data")
    (work / "k.cu").write_text(to_cuda(kernels.read_text()))
    subprocess.run(["nvcc", "-w", "-ptx", "-arch=compute_75", "-o", str(work / "k.ptx"),
                    str(work / "k.cu")], check=True)  # fmt: skip
    rodata = subprocess.check_output(
        ["objcopy", "-O", "binary", "-j", ".rodata", str(work / "devc.o"), "/dev/stdout"]
    )
    for line in subprocess.check_output(["nm", "-S", str(work / "devc.o")]).decode().splitlines():
        if line.split()[-1] == "__tvm_dev_mblob":
            start, size = (int(v, 16) for v in line.split()[:2])
    blob = rodata[start : start + size]
    payload = blob[8 : 8 + struct.unpack_from("<Q", blob)[0]]
    r = ByteReader(payload, "blob", ModuleLoadError)
    parts = [payload[:8]]
    for _ in range(r.u64()):
        at = r.offset
        kind = r.string()
        if kind == "_import_tree":
            r.u64s()
            r.u64s()
        elif kind == "GraphExecutorFactory":
            load_factory_binary(r)
        elif kind == "opencl":
            assert r.string() == "cl"
            t0 = r.offset
            read_function_table(r)
            table = payload[t0 : r.offset]
            r.blob()
            ptx = (work / "k.ptx").read_bytes()
            parts.append(_str(b"cuda") + _str(b"ptx") + table + _str(ptx))
            continue
        parts.append(payload[at : r.offset])
    assert not r.remaining
    new = b"".join(parts)
    new = struct.pack("<Q", len(new)) + new
    body = ",".join(str(v) for v in new)
    (work / "devc.c").write_text(f"const unsigned char __tvm_dev_mblob[{len(new)}] = {{{body}}};\n")
    subprocess.run(["cc", "-c", "-fPIC", "-o", str(work / "d.o"), str(work / "devc.c")], check=True)
    subprocess.run(["cc", "-shared", "-o", str(out), str(work / "lib0.o"), str(work / "d.o"),
                    "-lm"], check=True)  # fmt: skip


if __name__ == "__main__":
    if sys.argv[1] == "stage1":
        stage1(Path(sys.argv[2]))
    else:
        stage2(Path(sys.argv[2]), Path(sys.argv[3]))
