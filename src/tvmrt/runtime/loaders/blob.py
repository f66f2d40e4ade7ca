"""Parse ``__tvm_dev_mblob``: the modules a legacy library imports.

The symbol holds ``u64 nbytes`` then the blob: ``u64 count``, then ``count`` entries of
``string type_key`` + that module's bytes, where the type key ``_lib`` is the library
itself and ``_import_tree`` (TVM >= 0.8) carries the import tree in CSR form
(``u64 vectors row_ptr, child_indices``); TVM's ``ProcessModuleBlob`` in
``src/runtime/library_module.cc`` reads the same layout.

``export_library`` serialises the modules a kernel library imports (the graph executor
factory, GPU kernels, ...) into this symbol. Each entry is a type key followed by the
bytes that module's ``SaveToBinary`` wrote; ``runtime.module.loadbinary_<key>`` reads them
back. The entries carry no length, so a kind without a loader stops the parse.

Parsing runs before the library is loaded: a blob that cannot be used fails before any of
the library's code runs.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from tvmrt.binfmt.stream import ByteReader
from tvmrt.error import ModuleLoadError, TVMError
from tvmrt.runtime.module import Module
from tvmrt.runtime.registry import get_global_func

__all__ = ["ParsedBlob", "parse_module_blob", "assemble_modules"]

_LOADER_PREFIX = "runtime.module.loadbinary_"
_LIB = "_lib"
_IMPORT_TREE = "_import_tree"
MAX_IMPORT_DEPTH = 1024

_GPU_KINDS = {
    "cuda": "CUDA",
    "opencl": "OpenCL",
    "vulkan": "Vulkan",
    "metal": "Metal",
    "rocm": "ROCm",
    "hexagon": "Hexagon",
    "webgpu": "WebGPU",
    "sdaccel": "SDAccel (FPGA)",
    "aocl": "Intel FPGA (AOCL)",
}

# external-codegen (BYOC) runtime modules of TVM v0.19, by type key: each needs its own
# C++ runtime (and usually a vendor library), which tvmrt does not have
_BYOC_KINDS = {
    "dnnl_json": "DNNL/oneDNN JSON runtime (partitioned with -libs/BYOC dnnl)",
    "tensorrt": "NVIDIA TensorRT",
    "msc_tensorrt": "NVIDIA TensorRT (MSC)",
    "arm_compute_lib": "Arm Compute Library",
    "bnns_json": "Apple BNNS",
    "clml": "Qualcomm OpenCL ML (CLML)",
    "coreml": "Apple Core ML",
    "cublas_json": "cuBLAS JSON runtime",
    "cudnn_json": "cuDNN JSON runtime",
    "hipblas_json": "hipBLAS JSON runtime",
    "nnapi": "Android NNAPI",
    "VitisAIRuntime": "AMD/Xilinx Vitis AI",
    "mrvl_hw": "Marvell ML accelerator",
    "mrvl_sim": "Marvell ML accelerator simulator",
    "torch": "LibTorch (PyTorch's C++ runtime)",
    "tflite": "TensorFlow Lite",
    "ethos-n": "Arm Ethos-N NPU",
    "ethos-u": "Arm Ethos-U NPU",
    "verilator": "Verilator hardware simulation",
}


@dataclass
class ParsedBlob:
    """The entries of a module blob, before the library itself is attached.

    Attributes
    ----------
    modules
        One entry per module in blob order; ``None`` marks where the library goes (``_lib``).
    row_ptr, children
        The import tree in CSR form (empty for the old format without ``_import_tree``).
    """

    modules: list[Module | None] = field(default_factory=list)
    row_ptr: list[int] = field(default_factory=list)
    children: list[int] = field(default_factory=list)

    @property
    def has_import_tree(self) -> bool:
        """Whether the blob has an ``_import_tree`` entry (TVM >= 0.7 layout)."""
        return bool(self.row_ptr)


def _missing_loader(kind: str, what: str) -> ModuleLoadError:
    if kind in _GPU_KINDS:
        reason = (
            f"imports a {kind!r} module ({_GPU_KINDS[kind]} GPU kernels); tvmrt has no "
            f"{_GPU_KINDS[kind]} backend, so this model needs TVM's runtime with "
            f"{_GPU_KINDS[kind]} support"
        )
    elif kind in _BYOC_KINDS:
        reason = (
            f"imports a {kind!r} module: an external-codegen (BYOC) part of the model for "
            f"{_BYOC_KINDS[kind]}, which needs that runtime; tvmrt cannot run it. Build the "
            "model without that partitioning to run it with tvmrt"
        )
    elif kind in ("metadata", "const_loader"):
        reason = (
            f"imports a {kind!r} module (constants for external codegen such as DNNL or "
            "TensorRT, BYOC); tvmrt cannot run external-codegen modules, which need their "
            "own C++ runtimes"
        )
    elif kind.startswith("relax."):
        reason = (
            f"imports a {kind!r} module (a Relax virtual machine program); tvmrt runs "
            "graph-executor artifacts only"
        )
    else:
        reason = (
            f"imports a module of kind {kind!r} that tvmrt has no loader for (no global "
            f"function '{_LOADER_PREFIX}{kind}'); legacy blobs cannot skip an unknown kind"
        )
    return ModuleLoadError(f"{what}: the library {reason}")


def parse_module_blob(data: bytes | bytearray | memoryview, what: str) -> ParsedBlob:
    """Parse a ``__tvm_dev_mblob`` (``u64 nbytes`` + payload).

    Parameters
    ----------
    data
        The symbol's bytes (trailing bytes after ``8 + nbytes`` are ignored).
    what
        Name for messages, e.g. ``"__tvm_dev_mblob of 'deploy.so'"``.

    Returns
    -------
    ParsedBlob
        Modules built by their ``runtime.module.loadbinary_<kind>`` loaders.

    Raises
    ------
    ModuleLoadError
        If the blob is truncated or inconsistent, or names a kind without a loader.
    """
    outer = ByteReader(data, what, ModuleLoadError)
    payload = outer.blob("module blob")
    reader = ByteReader(payload, what, ModuleLoadError)
    count = reader.count("number of modules", 8)
    parsed = ParsedBlob()
    seen_lib = False
    for index in range(count):
        at = reader.offset
        kind = reader.string(f"type key of module {index}")
        if kind == _LIB:
            if seen_lib:
                raise reader.fail("the blob holds more than one '_lib' entry", at)
            seen_lib = True
            parsed.modules.append(None)
        elif kind == _IMPORT_TREE:
            if parsed.row_ptr:
                raise reader.fail("the blob holds more than one '_import_tree' entry", at)
            parsed.row_ptr = reader.u64s("import tree row_ptr")
            parsed.children = reader.u64s("import tree child indices")
            if not parsed.row_ptr:
                raise reader.fail("the import tree has an empty row_ptr", at)
        else:
            parsed.modules.append(_load_entry(reader, kind, index, what))
    if reader.remaining:
        raise reader.fail(f"{reader.remaining} bytes are left over after the last module")
    if parsed.has_import_tree:
        _check_import_tree(parsed, what)
    return parsed


def _load_entry(reader: ByteReader, kind: str, index: int, what: str) -> Module:
    if not kind or not kind.isprintable():
        raise reader.fail(f"module {index} has an invalid type key {kind!r}")
    loader = get_global_func(_LOADER_PREFIX + kind, allow_missing=True)
    if loader is None:
        raise _missing_loader(kind, what)
    start = reader.offset
    try:
        module = loader(reader)
    except TVMError:
        raise
    except Exception as exc:  # a loader's own parsing error: report it as a bad blob
        raise ModuleLoadError(
            f"{what}: module {index} ({kind!r}) at byte offset {start} is corrupt: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(module, Module):
        raise ModuleLoadError(
            f"{what}: loader '{_LOADER_PREFIX}{kind}' returned {type(module).__name__}, "
            "not a Module"
        )
    return module


def _check_import_tree(parsed: ParsedBlob, what: str) -> None:
    n = len(parsed.modules)
    row_ptr, children = parsed.row_ptr, parsed.children
    bad = f"{what}: invalid import tree"
    if len(row_ptr) != n + 1:
        raise ModuleLoadError(f"{bad}: row_ptr has {len(row_ptr)} entries for {n} modules")
    if row_ptr[0] != 0 or row_ptr[-1] != len(children):
        raise ModuleLoadError(
            f"{bad}: row_ptr must run from 0 to {len(children)}, got {row_ptr[0]}..{row_ptr[-1]}"
        )
    if any(a > b for a, b in itertools.pairwise(row_ptr)):
        raise ModuleLoadError(f"{bad}: row_ptr {row_ptr} is not non-decreasing")
    if any(c >= n for c in children):
        raise ModuleLoadError(f"{bad}: child index {max(children)} is out of range for {n} modules")
    # a cycle would make function lookup through imports recurse forever; the depth (the
    # longest import chain, in modules) is bounded: TVM writes trees 2 or 3 deep
    state = [0] * n  # 0 new, 1 on the current path, 2 done
    depth = [1] * n
    for root in range(n):
        if state[root]:
            continue
        stack = [(root, iter(children[row_ptr[root] : row_ptr[root + 1]]))]
        state[root] = 1
        while stack:
            node, it = stack[-1]
            child = next(it, None)
            if child is None:
                state[node] = 2
                stack.pop()
                if stack:
                    parent = stack[-1][0]
                    depth[parent] = max(depth[parent], depth[node] + 1)
                    _check_depth(depth[parent], bad)
            elif state[child] == 1:
                raise ModuleLoadError(f"{bad}: module {child} imports itself through a cycle")
            elif state[child] == 0:
                state[child] = 1
                stack.append((child, iter(children[row_ptr[child] : row_ptr[child + 1]])))
            else:
                depth[node] = max(depth[node], depth[child] + 1)
                _check_depth(depth[node], bad)


def _check_depth(depth: int, bad: str) -> None:
    if depth > MAX_IMPORT_DEPTH:
        raise ModuleLoadError(
            f"{bad}: imports are nested more than {MAX_IMPORT_DEPTH} modules deep (TVM "
            "writes two or three levels)"
        )


def assemble_modules(parsed: ParsedBlob, library: Module) -> Module:
    """Put ``library`` in place of ``_lib``, link the imports and return the root module.

    With an import tree the root is ``modules[0]``. The old format (no tree) makes the
    library the root, importing every module of the blob.
    """
    modules = [library if m is None else m for m in parsed.modules]
    if not parsed.has_import_tree:
        for module in modules:
            if module is not library:
                library.import_module(module)
        return library
    for i, module in enumerate(modules):
        for j in parsed.children[parsed.row_ptr[i] : parsed.row_ptr[i + 1]]:
            module.import_module(modules[j])
    return modules[0]
