"""Compile the graph's kernels and write the artifacts: ``.so``, ``.params``, single file.

* ``deploy.so``: one shared library with every kernel the graph calls, each exported as
  ``__tvm_ffi_<func_name>`` (``tvm.compile`` of just those PrimFuncs, with
  ``global_symbol = func_name``, linked by ``export_library``, which needs g++ or gcc).
* ``deploy.params``: the constants, in TVM's params format, written by tvmrt's own
  :func:`~tvmrt.runtime.params.save_param_dict` (byte-identical to TVM's).
* ``standalone.so``: the same kernels plus an embedded ``__tvm_ffi__library_bin`` that
  holds a ``GraphExecutorFactory`` (graph JSON + params, TVM's ``SaveToBinary`` layout) as
  the root module importing the kernel library, the layout TVM's ``export_library`` writes
  for a module tree. ``load_module`` of it returns the factory, and
  ``lib["default"](dev)`` creates an executor, as with a Relay-built library, once the
  tvm-ffi loader assembles embedded modules that have a ``runtime.module.loadbinary_<kind>``
  loader (it currently skips them and returns the kernel library).

All outputs are deterministic: two builds of one model give byte-identical files.
"""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tvmrt.compiler._tvm import require_tvm
from tvmrt.error import CompileError
from tvmrt.runtime import ndarray as nd
from tvmrt.runtime.graph_executor.factory import GraphExecutorFactory, save_factory_binary

__all__ = [
    "build_kernels",
    "export_library",
    "factory_library_bin",
    "write_factory_library",
    "check_c_compiler",
]

FACTORY_KIND = "GraphExecutorFactory"
EMPTY_KERNEL = "tvmrt_empty"
"""The one kernel of a library for a graph without kernels (outputs copied from inputs)."""


def check_c_compiler() -> str:
    """The C/C++ compiler ``export_library`` will link with.

    Raises
    ------
    CompileError
        If none is found (``$CXX``/``$CC``, or g++, gcc, clang++, clang, c++, cc on PATH).
    """
    require_tvm()
    from tvm.support import cc

    path = cc.get_cc()
    if not path:
        raise CompileError(
            "writing the kernel library needs a C/C++ compiler to link it (TVM's "
            "export_library runs g++), but none was found: install g++ or gcc "
            "(e.g. apt-get install g++), or set $CXX"
        )
    return str(path)


def build_kernels(mod: Any, kernels: Sequence[str], target: Any) -> Any:
    """Compile the PrimFuncs named ``kernels`` of ``mod`` into one host module.

    Each gets ``global_symbol = name``, so the library exports ``__tvm_ffi_<name>``. With
    no kernels, the library gets an empty function :data:`EMPTY_KERNEL`.

    Raises
    ------
    CompileError
        If TVM fails to build a kernel.
    """
    tvm = require_tvm()
    funcs = {name: mod[name].with_attr("global_symbol", name) for name in kernels}
    if not funcs:  # a graph of only copies: the library must still be a loadable TVM module
        empty = tvm.tirx.PrimFunc([], tvm.tirx.Evaluate(tvm.tirx.const(0, "int32")))
        funcs[EMPTY_KERNEL] = empty.with_attr("global_symbol", EMPTY_KERNEL)
    try:
        return tvm.compile(tvm.IRModule(funcs), target=target)
    except Exception as exc:
        from tvmrt.compiler.frontend import one_line

        raise CompileError(f"building the kernels failed: {one_line(exc)}") from exc


def export_library(lib: Any, path: str, addons: Sequence[str] = ()) -> None:
    """Link ``lib`` (and extra objects) into the shared library ``path``.

    Raises
    ------
    CompileError
        If no C compiler is available or linking fails.
    """
    check_c_compiler()
    try:
        lib.export_library(path, addons=list(addons) or None)
    except Exception as exc:
        from tvmrt.compiler.frontend import one_line

        raise CompileError(f"linking {os.path.basename(path)!r} failed: {one_line(exc)}") from exc


def _u64(value: int) -> bytes:
    return struct.pack("<Q", value)


def _str(data: bytes) -> bytes:
    return _u64(len(data)) + data


def factory_library_bin(
    graph_json: str, params: Mapping[str, np.ndarray[Any, Any]], module_name: str = "default"
) -> bytes:
    """The ``__tvm_ffi__library_bin`` of a factory library.

    The layout is tvm-ffi's (``ProcessLibraryBin``): ``u64 nbytes``, then the import
    tree in CSR form (``vec<u64> indptr``, ``vec<u64> children``), then per module its
    kind and, except for the ``_lib`` placeholder, its bytes. Here module 0 is the
    ``GraphExecutorFactory`` (its ``SaveToBinary`` payload, :func:`tvmrt.runtime.
    graph_executor.factory.save_factory_binary`) and
    module 1 is the kernel library, imported by module 0.
    """
    factory = GraphExecutorFactory(
        graph_json, {k: nd.array(v) for k, v in params.items()}, module_name
    )
    payload = b"".join(
        [
            _u64(3) + _u64(0) + _u64(1) + _u64(1),  # indptr [0, 1, 1]
            _u64(1) + _u64(1),  # children [1]: the factory imports the library
            _str(FACTORY_KIND.encode()),
            _str(save_factory_binary(factory)),
            _str(b"_lib"),
        ]
    )
    return _u64(len(payload)) + payload


def write_factory_library(
    lib: Any, path: str, graph_json: str, params: Mapping[str, np.ndarray[Any, Any]], target: Any
) -> None:
    """Write the single-file artifact: kernels plus the embedded factory.

    The blob becomes an object file through TVM's ``codegen.codegen_blob`` (the code path
    ``export_library`` uses for imported modules) and is linked in as an addon.

    Raises
    ------
    CompileError
        If no C compiler is available or linking fails.
    """
    require_tvm()
    import json

    import tvm_ffi

    blob = factory_library_bin(graph_json, params)
    codegen_blob = tvm_ffi.get_global_func("codegen.codegen_blob")
    target_json = json.dumps(
        {k: v for k, v in dict(target.export()).items() if k in ("kind", "mtriple", "mcpu")}
    )
    with tempfile.TemporaryDirectory(prefix="tvmrt-factory-") as tmp:
        obj = os.path.join(tmp, "factory_blob.o")
        codegen_blob(blob, False, target_json, "").write_to_file(obj)
        export_library(lib, path, addons=[obj])
