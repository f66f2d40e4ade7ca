"""``Module.export_library``: write a loaded artifact back as TVM v0.19 exports it.

TVM's ``export_library(file_name, fcompile=None, addons=None, workspace_dir=None, **kwargs)``
saves each kernel module as an object file (``lib0.o``, ...) in ``workspace_dir``, packs the
module blob (the factory's graph, params and module name) into ``devc.c``
(``pack_imports.py``; TVM without LLVM writes that C source, as tvmrt does) and hands the
file list to ``fcompile(file_name, files, **kwargs)``: by default a gzip tar for a ``.tar``
name and a shared library (``cc``, plus ``options``) otherwise. ``fcompile=False`` means the
default, so ``export_library("deploy.tar", fcompile=False)`` of a system-lib build is the
deployment guide's "lib.o + device-blob C file" that an application links with
``libtvmrt_runtime.a`` into one executable.

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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tvmrt.binfmt.abi import BLOB_SYMBOLS, FFI_PREFIX
from tvmrt.binfmt.archive import read_members
from tvmrt.binfmt.binary import ElfFile
from tvmrt.binfmt.files import MAX_LIBRARY_BYTES, read_regular
from tvmrt.error import InvalidArgumentError, ModuleLoadError, UnsupportedError
from tvmrt.runtime.loaders.link import find_compiler, is_source, missing_compiler
from tvmrt.runtime.module import Module
from tvmrt.runtime.pack_imports import (
    BLOB_SYMBOL,
    FFI_BLOB_SYMBOL,
    ffi_module_blob,
    module_blob,
    pack_imports_to_c,
)

__all__ = ["export_library", "kernel_objects", "is_dso_exportable", "export_module"]

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


def _members(module: Module) -> list[tuple[str, bytes]] | None:
    """The members of the file ``module``'s kernels came from (an ``.o`` is one member)."""
    if module.type_key == "static_library":  # an object held as it is (load_static_library)
        data = getattr(module, "data", None)
        return [("lib.o", data)] if isinstance(data, bytes) and _is_object(data) else None
    lib = _library_of(module)
    path = getattr(lib, "path", None)
    if lib.type_key != "library" or not isinstance(path, str) or not os.path.isfile(path):
        return None
    if tarfile.is_tarfile(path):
        return read_members(path)
    data = read_regular(path, "the library", MAX_LIBRARY_BYTES, ModuleLoadError)
    return [(Path(path).name, data)] if _is_object(data) else None


def _read_input(path: str) -> bytes:
    """A file to export: a regular file within the library bound (a FIFO is refused)."""
    return read_regular(path, "export_library input", MAX_LIBRARY_BYTES, ModuleLoadError)


def _is_blob_source(name: str, data: bytes) -> bool:
    return is_source(name) and BLOB_SYMBOL.encode() in data


def kernel_objects(module: Module) -> list[tuple[str, bytes]] | None:
    """The object files of ``module``'s kernels, without the old blob; None if not known.

    Known for a kernel library loaded from an exported ``.tar`` or an ``.o`` file; the
    member carrying the old blob (``devc.o``, or ``devc.c`` as source) is left out.
    """
    members = _members(module)
    if members is None:
        return None
    objects = []
    for name, data in members:
        if _is_blob_source(name, data):
            continue
        if not _is_object(data):
            return None  # sources or foreign members: tvmrt does not rebuild those
        defined, _ = _symbols(data, name)
        # the old blob, legacy (__tvm_dev_mblob) or tvm-ffi's (__tvm_ffi__library_bin): a
        # new one is written, and a library holding both would be read by its legacy one
        if not any(symbol.endswith(BLOB_SYMBOLS) for symbol in defined):
            objects.append((Path(name).name, data))
    return objects or None


def _ffi_kernels(objects: list[tuple[str, bytes]]) -> bool:
    """Whether the kernels are tvm-ffi's (TVM >= 0.22: exported as ``__tvm_ffi_<name>``)."""
    return any(
        symbol.startswith(FFI_PREFIX)
        for name, data in objects
        for symbol in _symbols(data, name)[0]
    )


def _blob_prefix(module: Module) -> str:
    """The symbol prefix of a system-lib build's old blob (``{prefix}__tvm_dev_mblob``)."""
    for name, data in _members(module) or []:
        if _is_object(data):
            names = _symbols(data, name)[0]
        elif _is_blob_source(name, data):
            text = data.decode("utf-8", "replace")
            names = {word for word in text.replace("[", " ").split() if BLOB_SYMBOL in word}
        else:
            continue
        for symbol in names:
            if symbol.endswith(BLOB_SYMBOL) and symbol.isidentifier():
                return symbol[: -len(BLOB_SYMBOL)]
    return ""


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
            f"export_library needs a C compiler to build devc.o: {missing_compiler()}"
        )
    return compiler


def is_dso_exportable(module: Module) -> bool:
    """The global ``runtime.ModuleIsDSOExportable`` (``Module.is_dso_exportable``)."""
    try:
        return kernel_objects(module) is not None
    except (ModuleLoadError, UnsupportedError):
        return False


def export_module(module: Module, file_name: str, options: dict[str, Any]) -> Any:
    """The global ``runtime.ModuleExportLibrary``: :func:`export_library` with its options
    as one dict (``Module.export_library``'s keyword arguments)."""
    return export_library(module, file_name, **options)


FCompile = Callable[..., Any]


def export_library(
    module: Module,
    file_name: str | os.PathLike[str],
    fcompile: FCompile | bool | None = None,
    addons: Sequence[str] | None = None,
    workspace_dir: str | os.PathLike[str] | None = None,
    fpack_imports: Callable[..., str] | None = None,
    **kwargs: Any,
) -> Any:
    """Export ``module`` (kernels + module blob) as TVM v0.19's ``export_library`` does.

    Parameters
    ----------
    module
        A ``GraphExecutorFactory`` (``load_module("x.tar")``) or a kernel library whose
        kernels tvmrt holds as object files.
    file_name
        The output. With the default ``fcompile``: ``.tar`` (gzip tar of ``lib0.o``... and
        ``devc.c``) or a shared library (any other name).
    fcompile
        ``fcompile(file_name, files, **kwargs)`` makes the output from the files written in
        ``workspace_dir``; ``None`` or ``False``: the default (tar or shared library).
    addons
        More files for ``fcompile`` (placed first, as TVM does).
    workspace_dir
        Where ``lib0.o``... and ``devc.c`` are written (and kept); a temporary folder if None.
    fpack_imports
        ``fpack_imports(module, is_system_lib, prefix, workspace_dir)`` returns the path of
        the blob file to use instead of tvmrt's ``devc.c``.
    kwargs
        Passed to ``fcompile``; the default shared-library step reads ``cc`` (the compiler)
        and ``options`` (extra flags).

    Returns
    -------
    What ``fcompile`` returns (None for the defaults).

    Raises
    ------
    UnsupportedError
        If the kernels are not held as object files (a library loaded from a ``.so``), or
        ``fcompile`` asks for an object format other than ``o``.
    ModuleLoadError
        If no C compiler is found or compiling/linking fails.
    """
    target = Path(os.fspath(file_name))
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
    object_format = getattr(fcompile, "object_format", "o") if callable(fcompile) else "o"
    if object_format != "o":
        raise UnsupportedError(
            f"export_library: fcompile asks for object_format {object_format!r}; tvmrt holds "
            "the kernels as ELF objects ('o') only"
        )
    system_lib = any(_SYSTEM_LIB_REGISTER in _symbols(data, name)[1] for name, data in objects)
    prefix = _blob_prefix(module) if system_lib else ""
    with tempfile.TemporaryDirectory(prefix="tvmrt-export-") as scratch:
        work = Path(os.fspath(workspace_dir)) if workspace_dir is not None else Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        files = [os.fspath(addon) for addon in addons or ()]
        for index, (_, data) in enumerate(objects):
            path = work / f"lib{index}.o"
            path.write_bytes(data)
            files.append(str(path))
        if module is not _library_of(module):  # a factory: its blob goes with the kernels
            if fpack_imports is not None:
                files.append(os.fspath(fpack_imports(module, system_lib, prefix, str(work))))
            else:
                devc = work / f"{prefix}devc.c"
                if _ffi_kernels(objects) and not system_lib:  # tvm-ffi's blob, as TVM writes
                    source = pack_imports_to_c(
                        ffi_module_blob(module), False, "", symbol=FFI_BLOB_SYMBOL
                    )
                else:
                    source = pack_imports_to_c(module_blob(module), system_lib, prefix)
                devc.write_text(source)
                files.append(str(devc))
        if callable(fcompile):
            return fcompile(str(target), files, **kwargs)
        if fcompile not in (None, False):
            raise InvalidArgumentError(
                f"export_library: fcompile must be a callable, None or False, not {fcompile!r}"
            )
        if target.suffix.lower() == ".tar":
            partial = target.with_name(f".{target.name}.tmp")
            members = [(Path(f).name, _read_input(f)) for f in files]
            _write_tar(partial, members)
            os.replace(partial, target)
        else:
            _create_shared(target, files, work, **kwargs)
    return None


def _create_shared(
    target: Path,
    files: list[str],
    work: Path,
    cc: str | None = None,
    options: str | Sequence[str] | None = None,
    **unused: Any,
) -> None:
    """TVM's ``cc.create_shared``: link ``files`` into a shared library with ``cc``."""
    if unused:
        raise InvalidArgumentError(
            f"export_library: unknown option(s) {', '.join(sorted(unused))} for the default "
            "fcompile (it takes cc and options)"
        )
    compiler = [cc] if cc else _compiler()
    extra = [options] if isinstance(options, str) else list(options or ())
    partial = target.with_name(f".{target.name}.tmp")
    _run([*compiler, "-shared", "-fPIC", "-o", str(partial), *files, *extra, "-lm"], "linking")
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
