"""``tvmrt compile --target cuda``: the graph's kernels for an NVIDIA GPU (tvm-ffi era).

TVM 0.27 (from the package index) lowers the model as for the CPU, gives each kernel
dlight's default GPU schedule and builds it for ``{"kind": "cuda", "arch": ...}`` with an
LLVM host; its ``cuda`` module then holds CUDA C source (that TVM has no CUDA toolkit),
which ``nvcc`` compiles to PTX for the target's compute capability (``-arch=compute_XY``:
any GPU from ``sm_XY`` up JIT-compiles it). The module's ``cuda`` entry in
``__tvm_ffi__library_bin`` is rewritten with fmt ``ptx``, the same FunctionInfo table and
the PTX, and TVM's host code (``lib0.o``) is relinked with it: ``deploy.so`` (``_lib``
importing ``cuda``) and ``standalone.so`` (the graph executor factory importing both).
Needs TVM 0.27, ``nvcc``, a C compiler and binutils (``objcopy``, ``nm``) at compile time;
nothing of them at run time.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tvmrt.binfmt.stream import ByteReader
from tvmrt.compiler._tvm import require_tvm
from tvmrt.compiler.build import FACTORY_KIND
from tvmrt.error import CompileError, InvalidArgumentError, ModuleLoadError
from tvmrt.runtime import ndarray as nd
from tvmrt.runtime.graph_executor.factory import GraphExecutorFactory, save_factory_binary
from tvmrt.runtime.launch import read_function_table

__all__ = ["DEFAULT_ARCH", "cuda_target", "build_cuda_libraries"]

DEFAULT_ARCH = "sm_75"
_BIN = "__tvm_ffi__library_bin"


def cuda_target(target: Mapping[str, Any]) -> Any:
    """The TVM target for a ``{"kind": "cuda"[, "arch": "sm_XY"]}`` dict, with an LLVM host.

    Raises
    ------
    InvalidArgumentError
        If ``arch`` is not of the form ``sm_XY``.
    """
    arch = str(target.get("arch", DEFAULT_ARCH))
    if not arch.startswith("sm_") or not arch[3:].isdigit():
        raise InvalidArgumentError(f"CUDA target arch {arch!r}: expected sm_XY, e.g. 'sm_75'")
    tvm = require_tvm()
    return tvm.target.Target({"kind": "cuda", "arch": arch}, host={"kind": "llvm"})


def _u64(value: int) -> bytes:
    return struct.pack("<Q", value)


def _str(data: bytes) -> bytes:
    return _u64(len(data)) + data


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise CompileError(
            f"compiling for CUDA needs {name!r} on PATH ("
            + ("the nvidia-cuda-nvcc package" if name == "nvcc" else "a C toolchain")
            + ")"
        )
    return path


def _run(cmd: Sequence[str]) -> None:
    done = subprocess.run(list(cmd), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise CompileError(f"{Path(cmd[0]).name} failed: {done.stderr.strip()[-2000:]}")


def _symbol_bytes(obj: Path, symbol: str) -> bytes:
    """The bytes of a data symbol of an object file (its .rodata section)."""
    data = subprocess.check_output(
        [_tool("objcopy"), "-O", "binary", "-j", ".rodata", str(obj), "/dev/stdout"]
    )
    for line in subprocess.check_output([_tool("nm"), "-S", str(obj)]).decode().splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[3] == symbol:
            start, size = int(parts[0], 16), int(parts[1], 16)
            return data[start : start + size]
    raise CompileError(f"TVM's export has no {symbol} in {obj.name}")


def _ptx_entry(blob: bytes, ptx: bytes) -> bytes:
    """The ``cuda`` entry's payload of TVM's library binary with fmt ``ptx`` and ``ptx``."""
    reader = ByteReader(blob, "TVM's library binary", ModuleLoadError)
    reader.u64("size")
    reader.u64s("import tree indptr")
    reader.u64s("import tree children")
    while reader.remaining:
        kind = reader.string("module kind")
        if kind == "_lib":
            continue
        payload = bytes(reader.blob("module bytes"))
        if kind != "cuda":
            continue
        entry = ByteReader(payload, "cuda entry", ModuleLoadError)
        fmt = entry.string("format")
        start = entry.offset
        read_function_table(entry, extra_tags=True)
        table = payload[start : entry.offset]
        if fmt not in ("cuda", "cu", "ptx"):
            raise CompileError(f"TVM wrote its CUDA module as {fmt!r}, not CUDA C source")
        return _str(b"ptx") + table + _str(ptx)
    raise CompileError("TVM's library binary has no cuda module")


def _link(out: Path, lib0: Path, blob: bytes, tmp: Path) -> None:
    """``lib0.o`` + ``blob`` as ``__tvm_ffi__library_bin`` -> the shared library ``out``."""
    body = ",".join(str(b) for b in blob)
    src = tmp / f"{out.stem}_bin.c"
    src.write_text(f"const unsigned char {_BIN}[{len(blob)}] = {{{body}}};\n")
    cc = _tool("cc")
    _run([cc, "-c", "-fPIC", "-o", str(src.with_suffix(".o")), str(src)])
    _run([cc, "-shared", "-o", str(out), str(lib0), str(src.with_suffix(".o"))])


def build_cuda_libraries(
    mod: Any,
    kernels: Sequence[str],
    target: Any,
    graph_json: str,
    params: Mapping[str, np.ndarray[Any, Any]],
    lib_path: str,
    standalone_path: str,
) -> None:
    """Schedule and build ``kernels`` for ``target`` (:func:`cuda_target`), compile them to
    PTX with nvcc and write ``lib_path`` and the single-file factory ``standalone_path``.

    Raises
    ------
    CompileError
        If scheduling, building, nvcc or linking fails.
    """
    tvm = require_tvm()
    from tvm.s_tir import dlight

    nvcc = _tool("nvcc")
    funcs = {n: mod[n].with_attr("global_symbol", n) for n in kernels}
    rules = [dlight.gpu.Matmul(), dlight.gpu.GEMV(), dlight.gpu.Reduction(),
             dlight.gpu.GeneralReduction(), dlight.gpu.Fallback()]  # fmt: skip
    try:
        with target:
            gpu = dlight.ApplyDefaultSchedule(*rules)(tvm.IRModule(funcs))
        lib = tvm.compile(gpu, target=target)
    except Exception as exc:
        from tvmrt.compiler.frontend import one_line

        raise CompileError(f"building the CUDA kernels failed: {one_line(exc)}") from exc
    arch = str(target.attrs["arch"]).replace("sm_", "compute_")
    with tempfile.TemporaryDirectory(prefix="tvmrt-cuda-") as name:
        tmp = Path(name)
        lib.export_library(str(tmp / "x.tar"))
        with tarfile.open(tmp / "x.tar") as tar:
            tar.extractall(tmp, filter="data")
        (tmp / "k.cu").write_text(lib.mod.imports[0].inspect_source())
        _run([nvcc, "-w", "-O3", "-ptx", f"-arch={arch}", "-o", str(tmp / "k.ptx"),
              str(tmp / "k.cu")])  # fmt: skip
        entry = _ptx_entry(_symbol_bytes(tmp / "devc.o", _BIN), (tmp / "k.ptx").read_bytes())
        kernels_only = b"".join([
            _u64(3) + _u64(0) + _u64(1) + _u64(1),  # indptr [0, 1, 1]
            _u64(1) + _u64(1),  # _lib imports cuda
            _str(b"_lib"), _str(b"cuda"), _str(entry),
        ])  # fmt: skip
        _link(Path(lib_path), tmp / "lib0.o", _u64(len(kernels_only)) + kernels_only, tmp)
        factory = GraphExecutorFactory(graph_json, {k: nd.array(v) for k, v in params.items()})
        with_factory = b"".join([
            _u64(4) + _u64(0) + _u64(1) + _u64(2) + _u64(2),  # indptr [0, 1, 2, 2]
            _u64(2) + _u64(1) + _u64(2),  # the factory imports _lib, _lib imports cuda
            _str(FACTORY_KIND.encode()), _str(save_factory_binary(factory)),
            _str(b"_lib"), _str(b"cuda"), _str(entry),
        ])  # fmt: skip
        _link(Path(standalone_path), tmp / "lib0.o", _u64(len(with_factory)) + with_factory, tmp)
