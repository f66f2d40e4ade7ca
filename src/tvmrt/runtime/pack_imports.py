"""The module blob of an export as C source: TVM's ``ModulePackImportsToC``.

``__tvm_dev_mblob`` = ``u64 nbytes`` + the module blob (a ``GraphExecutorFactory`` entry,
``_lib``, ``_import_tree``), laid out as TVM v0.19's ``codegen.cc`` writes it: hex bytes, 20
a row, inside ``extern "C"``. For a system-lib build the blob registers itself with
``TVMBackendRegisterSystemLibSymbol`` when the program starts: with a static initializer when
compiled as C++ (what TVM writes; TVM compiles ``devc.c`` with ``g++``) and with a
constructor function when compiled as C, so ``gcc`` accepts the file too.
"""

from __future__ import annotations

from tvmrt.binfmt.stream import ByteWriter
from tvmrt.error import UnsupportedError
from tvmrt.runtime.graph_executor.factory import GraphExecutorFactory, save_factory_binary
from tvmrt.runtime.module import Module

__all__ = ["BLOB_SYMBOL", "FFI_BLOB_SYMBOL", "ffi_module_blob", "module_blob", "pack_imports_to_c"]

BLOB_SYMBOL = "__tvm_dev_mblob"
FFI_BLOB_SYMBOL = "__tvm_ffi__library_bin"  # tvm-ffi's (TVM >= 0.22), for tvm-ffi kernels
_BYTES_PER_ROW = 20  # TVM: 100 columns, 5 characters per "0xab,"


def module_blob(module: Module) -> bytes:
    """The module blob of a graph-executor factory over the library it is linked with."""
    if not isinstance(module, GraphExecutorFactory):
        raise UnsupportedError(f"cannot export Module[{module.type_key}] with a module blob")
    writer = ByteWriter()
    # modules[0] = the factory, modules[1] = the DSO itself ("_lib"); 0 imports 1
    writer.u64(3)
    writer.string("GraphExecutorFactory")
    writer.raw(save_factory_binary(module))
    writer.string("_lib")
    writer.string("_import_tree")
    for values in ([0, 1, 1], [1]):
        writer.u64(len(values))
        for value in values:
            writer.u64(value)
    return bytes(writer.buffer)


def ffi_module_blob(module: Module) -> bytes:
    """The same factory in tvm-ffi's layout (``ProcessLibraryBin``), for tvm-ffi kernels.

    The import tree comes first in CSR form (``indptr`` ``[0, 1, 1]``, ``children``
    ``[1]``: the factory imports the library), then each module's kind and, except for
    the ``_lib`` placeholder, its bytes as a length-prefixed string.
    """
    if not isinstance(module, GraphExecutorFactory):
        raise UnsupportedError(f"cannot export Module[{module.type_key}] with a module blob")
    writer = ByteWriter()
    for values in ([0, 1, 1], [1]):
        writer.u64(len(values))
        for value in values:
            writer.u64(value)
    writer.string("GraphExecutorFactory")
    writer.string(save_factory_binary(module))
    writer.string("_lib")
    return bytes(writer.buffer)


def pack_imports_to_c(
    payload: bytes, system_lib: bool, prefix: str = "", symbol: str = BLOB_SYMBOL
) -> str:
    """C source defining ``{prefix}{symbol}`` (``__tvm_dev_mblob``) for ``payload`` (a
    module blob)."""
    if prefix and not system_lib:
        raise UnsupportedError(
            "a blob symbol prefix is used with system-lib only (got prefix "
            f"{prefix!r} for a build that is not system-lib)"
        )
    name = prefix + symbol
    data = len(payload).to_bytes(8, "little") + payload
    lines = [
        "#ifdef _WIN32",
        "#define TVM_EXPORT __declspec(dllexport)",
        "#else",
        "#define TVM_EXPORT",
        "#endif",
        "#ifdef __cplusplus",
        'extern "C" {',
        "#endif",
        f"TVM_EXPORT extern const unsigned char {name}[];",
        f"const unsigned char {name}[{len(data)}] = {{",
    ]
    for start in range(0, len(data), _BYTES_PER_ROW):
        lines.append("  " + "".join(f"0x{b:02x}," for b in data[start : start + _BYTES_PER_ROW]))
    lines.append("};")
    if system_lib:
        register = f'TVMBackendRegisterSystemLibSymbol("{name}", (void*){name})'
        lines += [
            "extern int TVMBackendRegisterSystemLibSymbol(const char*, void*);",
            "#ifdef __cplusplus",
            f"static int {name}_reg_ = {register};",
            "#else",
            f"__attribute__((constructor)) static void {name}_reg_(void) {{ {register}; }}",
            "#endif",
        ]
    lines += ["#ifdef __cplusplus", "}", "#endif", ""]
    return "\n".join(lines)
