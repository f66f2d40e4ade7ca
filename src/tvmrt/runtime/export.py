"""``Module.export_library``: write a loaded artifact back as one TVM factory library.

What TVM's ``export_library`` writes: the kernels' object files
plus ``devc.o``, an object defining ``__tvm_dev_mblob`` = ``u64 nbytes`` + the module
blob (``GraphExecutorFactory`` payload, ``_lib``, ``_import_tree``), either linked into
one shared library (``.so``) or put in a gzip tar (``.tar``) that the loader links.

tvmrt can do that when it holds the kernels as object files: a library loaded from an
exported ``.tar`` or an ``.o``. A kernel library loaded from a shared object cannot be
re-linked into another library (TVM cannot re-export a loaded ``.so`` either: its
``library`` modules do not support ``SaveToFile``); such modules are refused with a
:class:`~tvmrt.error.UnsupportedError` naming what can be exported.
"""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from tvmrt.error import ModuleLoadError, UnsupportedError
from tvmrt.runtime._stream import ByteWriter
from tvmrt.runtime.graph_executor.factory import GraphExecutorFactory, save_factory_binary
from tvmrt.runtime.loaders.archive import read_members
from tvmrt.runtime.loaders.binary import ElfFile
from tvmrt.runtime.loaders.link import find_compiler
from tvmrt.runtime.module import Module

__all__ = ["export_library", "kernel_objects", "is_dso_exportable", "export_module"]

_BLOB_SYMBOL = "__tvm_dev_mblob"
_SYSTEM_LIB_REGISTER = "TVMBackendRegisterSystemLibSymbol"
_ELF_MAGIC = b"\x7fELF"
_ET_REL = 1
_COMPILE_TIMEOUT_S = 300


def _is_object(data: bytes) -> bool:
    if len(data) < 18 or data[:4] != _ELF_MAGIC:
        return False
    if data[5] == 1:
        return int.from_bytes(data[16:18], "little") == _ET_REL
    return int.from_bytes(data[16:18], "big") == _ET_REL


def _symbols(data: bytes, name: str) -> tuple[set[str], set[str]]:
    """(defined, undefined) global symbol names of an ELF object file."""
    defined: set[str] = set()
    undefined: set[str] = set()
    for symbol in ElfFile(data, name).symbols(dynamic=False):
        if not symbol.name:
            continue
        (defined if symbol.defined else undefined).add(symbol.name)
    return defined, undefined


def _library_of(module: Module) -> Module:
    """The kernel library of ``module``: itself, or a factory's first import."""
    if module.type_key in ("GraphExecutorFactory", "GraphRuntimeFactory"):
        imports = module.imported_modules
        if not imports:
            raise UnsupportedError("cannot export a GraphExecutorFactory that imports no library")
        return imports[0]
    return module


def kernel_objects(module: Module) -> list[tuple[str, bytes]] | None:
    """The object files of ``module``'s kernels, without the old blob; None if not known.

    Known for a kernel library loaded from an exported ``.tar`` (its members) or an
    ``.o`` file; a blob-carrying member (the old ``devc.o``) is left out.
    """
    lib = _library_of(module)
    path = getattr(lib, "path", None)
    if lib.type_key != "library" or not isinstance(path, str) or not os.path.isfile(path):
        return None
    members: list[tuple[str, bytes]] = []
    if tarfile.is_tarfile(path):
        members = read_members(path)
    else:
        data = Path(path).read_bytes()
        if not _is_object(data):
            return None
        members = [(Path(path).name, data)]
    objects = []
    for name, data in members:
        if not _is_object(data):
            return None  # sources or foreign members: tvmrt does not rebuild those
        defined, _ = _symbols(data, name)
        if _BLOB_SYMBOL not in defined:
            objects.append((Path(name).name, data))
    return objects or None


def _module_blob(module: Module) -> bytes:
    """``__tvm_dev_mblob``'s payload for a factory over the library it is linked with."""
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


def _blob_source(payload: bytes) -> str:
    """C source defining ``__tvm_dev_mblob`` as TVM's ``PackImportsToC`` lays it out."""
    data = len(payload).to_bytes(8, "little") + payload
    rows = []
    for start in range(0, len(data), 24):
        rows.append(",".join(str(b) for b in data[start : start + 24]))
    body = ",\n".join(rows)
    return (
        "/* written by tvmrt's export_library: the module blob of a graph-executor factory */\n"
        '#ifdef __cplusplus\nextern "C" {\n#endif\n'
        '__attribute__((visibility("default"))) extern const unsigned char '
        f"{_BLOB_SYMBOL}[];\n"
        '__attribute__((visibility("default"))) const unsigned char '
        f"{_BLOB_SYMBOL}[{len(data)}] = {{\n{body}\n}};\n"
        "#ifdef __cplusplus\n}\n#endif\n"
    )


def _run(command: list[str], what: str) -> None:
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=_COMPILE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise ModuleLoadError(f"export_library: {what} failed: {exc}") from exc
    if result.returncode != 0:
        output = (result.stderr or result.stdout).strip()[-2000:]
        raise ModuleLoadError(
            f"export_library: {what} failed ({command[0]} exited with {result.returncode}): "
            f"{output}"
        )


def _compiler() -> list[str]:
    compiler = find_compiler()
    if compiler is None:
        raise ModuleLoadError(
            "export_library needs a C compiler to build devc.o; install gcc or clang, or set $CC"
        )
    return compiler


def is_dso_exportable(module: Module) -> bool:
    """The global ``runtime.ModuleIsDSOExportable`` (``Module.is_dso_exportable``)."""
    try:
        return kernel_objects(module) is not None
    except (ModuleLoadError, UnsupportedError):
        return False


def export_module(module: Module, file_name: str, options: dict[str, Any]) -> None:
    """The global ``runtime.ModuleExportLibrary``: :func:`export_library` with its options
    as one dict (``Module.export_library``'s keyword arguments)."""
    export_library(module, file_name, **options)


def export_library(module: Module, file_name: str | os.PathLike[str], **kwargs: Any) -> None:
    """Write ``module`` as one factory library, ``.so`` (linked) or ``.tar`` (objects).

    Parameters
    ----------
    module
        A ``GraphExecutorFactory`` (``load_module("x.tar")``) or a kernel library whose
        kernels tvmrt holds as object files.
    file_name
        Ends with ``.so`` (or ``.dylib``/``.dll``: a shared library) or ``.tar``.
    kwargs
        TVM's ``fcompile``, ``addons``, ``workspace_dir``, ``options`` and ``cc``; tvmrt
        uses the system C compiler and refuses the others when given.

    Raises
    ------
    UnsupportedError
        If the kernels are not held as object files (a library loaded from a ``.so``),
        if a system-lib build is exported (its blob registers itself under a prefix
        tvmrt does not know), or if an unsupported option is passed.
    ModuleLoadError
        If no C compiler is found or compiling/linking fails.
    """
    unsupported = sorted(k for k, v in kwargs.items() if v is not None and k != "workspace_dir")
    if unsupported:
        raise UnsupportedError(
            f"export_library: tvmrt does not support {', '.join(unsupported)}; it builds "
            "with the system C compiler for this machine"
        )
    target = Path(os.fspath(file_name))
    suffix = target.suffix.lower()
    if suffix not in (".so", ".dylib", ".dll", ".tar"):
        raise UnsupportedError(
            f"export_library: cannot write {str(target)!r}: the name must end with .so or .tar"
        )
    objects = kernel_objects(module)
    if objects is None:
        lib = _library_of(module)
        raise UnsupportedError(
            f"cannot export Module[{module.type_key}]: tvmrt can re-export only kernels it "
            f"holds as object files (a factory or library loaded from an exported .tar or "
            f"an .o); this one's kernels are Module[{lib.type_key}] "
            f"{getattr(lib, 'path', '')!r}, which cannot be linked into a new library "
            "(TVM cannot re-export a loaded library either)"
        )
    for name, data in objects:
        _, undefined = _symbols(data, name)
        if _SYSTEM_LIB_REGISTER in undefined:
            raise UnsupportedError(
                f"cannot export Module[{module.type_key}]: its kernels ({name}) were built "
                "with system-lib and register themselves at load time; keep the original file"
            )
    compiler = _compiler()
    with tempfile.TemporaryDirectory(prefix="tvmrt-export-") as work:
        members = [(name, data) for name, data in objects if name != "devc.o"]
        if module is not _library_of(module):  # a factory: its blob goes into devc.o
            devc_c = Path(work) / "devc.c"
            devc_c.write_text(_blob_source(_module_blob(module)))
            devc_o = Path(work) / "devc.o"
            _run([*compiler, "-c", "-fPIC", "-o", str(devc_o), str(devc_c)], "compiling devc.c")
            members.append(("devc.o", devc_o.read_bytes()))
        partial = target.with_name(f".{target.name}.tmp")
        if suffix == ".tar":
            _write_tar(partial, members)
        else:
            inputs = []
            for i, (_, data) in enumerate(members):
                obj = Path(work) / f"member{i}.o"
                obj.write_bytes(data)
                inputs.append(str(obj))
            _run([*compiler, "-shared", "-fPIC", "-o", str(partial), *inputs, "-lm"], "linking")
        os.replace(partial, target)


def _write_tar(path: Path, members: list[tuple[str, bytes]]) -> None:
    """A gzip-compressed tar of ``members`` (what TVM's ``export_library('x.tar')`` writes)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            archive.addfile(info, io.BytesIO(data))
    path.write_bytes(gzip.compress(buffer.getvalue(), mtime=0))
