"""The one place that says which kinds of artifact exist and which loader handles each.

A file is sniffed once (:func:`sniff`: header, then symbols or archive member names;
nothing is loaded or executed) and handed to exactly one leaf:

====================  ==========================================  ============================
:class:`FileKind`     what it is                                   handled by
====================  ==========================================  ============================
``legacy-so``         shared library of TVM <= 0.20 kernels        :mod:`.library`
                      (packed functions; optional module blob:
                      graph or AOT factory, link-params)
``system-lib-so``     the same built with ``system-lib``: it       :mod:`.library` (loaded and
                      registers its functions while loading        pinned); ``system_lib()``
                                                                   is :mod:`.systemlib`
``tvm-ffi-so``        shared library of TVM >= 0.21 kernels        :mod:`.ffi`
``relax-vm``          a Relax VM executable (TVM 0.16-0.27, any    the C runtime
                      ABI): its blob's root is relax.Executable    (:mod:`~tvmrt.runtime.
                      or relax.VMExecutable                        native_module`)
``object``            one ``.o`` (``export_library('x.o')``)       :mod:`.link`, then as above
``export-tar``        ``export_library('x.tar')``: objects and/or  :mod:`.link` (compiles C with
                      C sources (``devc.c``, ``target="c"``)       tvmrt's headers), then above
``mlf``               Model Library Format tar (microTVM export)   :mod:`.packages`
``tvmc``              tvmc package (``mod.so``/``mod.json``/       :mod:`.packages`
                      ``mod.params``, or ``mod.tar``)
====================  ==========================================  ============================

Anything else is refused with the form and the reason: a library for another machine or
OS, a file that is not a TVM module, a params blob, text, ... :func:`sniff` is also what
``tvmrt inspect`` uses to say which form an artifact is. Each kind is a member of
:class:`FileKind` carrying its description and its loader; adding a kind means one more
member, one more case in :func:`sniff`, and one new leaf; the leaves do not import each
other.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from tvmrt.binfmt import archive
from tvmrt.binfmt.abi import RELAX_KINDS, LibraryFacts, first_blob_kind, read_library
from tvmrt.binfmt.binary import BinaryInfo, check_host_compatible, identify
from tvmrt.binfmt.files import MAX_LIBRARY_BYTES, check_regular
from tvmrt.error import ModuleFileNotFoundError, ModuleLoadError
from tvmrt.runtime import kernel_services, native_module
from tvmrt.runtime.loaders import ffi, library, link, memory, mlf_aot, needs, packages
from tvmrt.runtime.module import Module
from tvmrt.runtime.packed_func import PackedFunc
from tvmrt.runtime.registry import get_global_func, list_global_func_names

__all__ = [
    "FileKind",
    "Sniffed",
    "is_builtin",
    "sniff",
    "recognises",
    "load",
    "load_library",
    "load_module_file",
]

_LOADFILE = "runtime.module.loadfile_"
_MAX_NAMES = archive.MAX_MEMBERS

# what loads one kind of file: (what sniff found, the real path, the name as given)
Loader = Callable[["Sniffed", str, str], Module]


def _load_legacy(found: Sniffed, path: str, shown: str) -> Module:
    assert found.facts is not None
    return library.load_shared_library(found.facts)


def _load_ffi(found: Sniffed, path: str, shown: str) -> Module:
    assert found.facts is not None
    return ffi.load_ffi_library(found.facts)


def _load_relax(found: Sniffed, path: str, shown: str) -> Module:
    symbols = found.facts.symbols if found.facts is not None else None
    if (
        symbols is not None
        and symbols.abi == "legacy"
        and any(name.startswith("TVM") for name in symbols.undefined)
    ):  # TVM <= 0.20 code importing the runtime's functions by name (compiled mode)
        kernel_services.make_global()
    return native_module.load_file(path, shown)  # the C runtime is its engine


def _load_object(found: Sniffed, path: str, shown: str) -> Module:
    return _load_linked(link.link_object(path), shown)


def _load_export_tar(found: Sniffed, path: str, shown: str) -> Module:
    return _load_linked(link.link_archive(path), shown)


def _load_mlf(found: Sniffed, path: str, shown: str) -> Module:
    return packages.load_mlf(path, shown, load_library)


def _load_mlf_aot(found: Sniffed, path: str, shown: str) -> Module:
    if found.info.format == "tar" and not mlf_aot.is_aot_package(path, shown):
        return packages.load_mlf(path, shown, load_library)  # a graph build missing its graph
    return mlf_aot.load_mlf_aot(path, shown)


def _load_tvmc(found: Sniffed, path: str, shown: str) -> Module:
    return packages.load_tvmc(path, shown, load_library)


class FileKind(str, Enum):
    """What a file is to the loader: the value is the name ``tvmrt inspect`` shows
    (``legacy-so``, ...), :attr:`description` the phrase for messages and ``inspect``,
    :attr:`loader` the leaf that loads it (None: refused, with :attr:`Sniffed.reason`).
    """

    description: str
    loader: Loader | None

    def __new__(cls, value: str, description: str, loader: Loader | None = None) -> FileKind:
        member = str.__new__(cls, value)
        member._value_ = value
        member.description = description
        member.loader = loader
        return member

    LEGACY_SO = (
        "legacy-so",
        "TVM kernel library (legacy packed-function ABI, TVM <= 0.20)",
        _load_legacy,
    )
    SYSTEM_LIB_SO = (
        "system-lib-so",
        "TVM system-lib library (registers its functions at load, TVM <= 0.20)",
        _load_legacy,
    )
    # no TVM era in the phrase: inspect's ABI line names it
    TVM_FFI_SO = ("tvm-ffi-so", "TVM kernel library (tvm-ffi ABI)", _load_ffi)
    RELAX_VM = ("relax-vm", "Relax VM executable (the kernels and the VM's bytecode)", _load_relax)
    OBJECT = (
        "object",
        "object file from export_library (linked into a library when loaded)",
        _load_object,
    )
    EXPORT_TAR = (
        "export-tar",
        "export_library tar of objects/C sources (linked when loaded)",
        _load_export_tar,
    )
    MLF = ("mlf", "Model Library Format tar (microTVM export)", _load_mlf)
    MLF_AOT = ("mlf-aot", "MLF AOT package (C code, compiled for this host)", _load_mlf_aot)
    TVMC = ("tvmc", "tvmc package tar (library + graph JSON + params)", _load_tvmc)
    NOT_TVM = ("not-tvm", "shared library that is not a TVM module")
    FOREIGN = ("foreign", "binary for another machine or OS")
    OTHER = ("other", "not a TVM module file")

    def __str__(self) -> str:
        return str.__str__(self)  # the value, on every Python version

    @property
    def is_shared_library(self) -> bool:
        """A shared library of TVM kernels, loaded by ``dlopen`` (CPU features checked first)."""
        return self in (
            FileKind.LEGACY_SO,
            FileKind.SYSTEM_LIB_SO,
            FileKind.TVM_FFI_SO,
            FileKind.RELAX_VM,
        )

    @property
    def is_linked(self) -> bool:
        """Objects (one, or a tar of objects and C sources) linked into a library at load."""
        return self in (FileKind.OBJECT, FileKind.EXPORT_TAR)

    @property
    def is_package(self) -> bool:
        """Loaded in several steps (members, link, library): a failure gets the kind added."""
        return self in (FileKind.MLF, FileKind.MLF_AOT, FileKind.TVMC)


@dataclass
class Sniffed:
    """What one look at a file found.

    Attributes
    ----------
    form
        What the file is.
    info
        The file header.
    facts
        For shared libraries: the parsed symbols handed to the ABI leaf.
    members
        For archives: the member names (``./`` stripped).
    reason
        Why the file cannot be loaded here (empty if nothing is known against it).
    """

    form: FileKind
    info: BinaryInfo
    facts: LibraryFacts | None = None
    members: list[str] = field(default_factory=list)
    reason: str = ""

    @property
    def description(self) -> str:
        """The form as a phrase (``tvmrt inspect``)."""
        return self.form.description


def _tar_names(path: str) -> list[str]:
    return archive.member_names(path, _MAX_NAMES)  # bounded like loading: sniffing stays cheap


def _archive_form(names: list[str]) -> FileKind:
    plain = set(names)
    if "metadata.json" in plain and any(
        n.startswith(("codegen/", "executor-config/", "parameters/")) for n in names
    ):  # an AOT build has no executor config: its entry function is in the C code
        if any(n.startswith("executor-config/graph/") for n in names):
            return FileKind.MLF
        return FileKind.MLF_AOT
    if {"mod.json", "mod.params"} <= plain and ({"mod.so", "mod.tar"} & plain):
        return FileKind.TVMC
    if "mod.so" in plain or "mod.tar" in plain:
        return FileKind.TVMC
    return FileKind.EXPORT_TAR


def sniff(path: str, shown: str | None = None) -> Sniffed:
    """Say which form the file at ``path`` is, reading headers, symbols and tar names only.

    Raises
    ------
    ModuleLoadError
        If an ELF file or tar archive is corrupt.
    """
    shown = shown or path
    info = identify(path)
    if mlf_aot.is_mlf_folder(path) and Path(path).name == "metadata.json":  # unpacked MLF
        return Sniffed(FileKind.MLF_AOT, info)
    if info.format == "tar":
        names = _tar_names(path)
        return Sniffed(_archive_form(names), info, members=names)
    if info.format in ("elf", "pe", "macho", "macho-fat"):
        expected = "object file" if info.kind == "object file" else "shared library"
        try:
            check_host_compatible(info, shown, expected)
        except ModuleLoadError as exc:
            return Sniffed(FileKind.FOREIGN, info, reason=str(exc))
        if expected == "object file":
            return Sniffed(FileKind.OBJECT, info)
        facts = read_library(path, shown, info)
        symbols = facts.symbols
        if symbols is None:  # native non-ELF library (macOS): checked by the system loader
            return Sniffed(FileKind.LEGACY_SO, info, facts)
        if symbols.abi == "none":
            return Sniffed(
                FileKind.NOT_TVM,
                info,
                facts,
                reason=f"cannot load {shown!r}: the shared library is not a TVM module (it has "
                "none of TVM's symbols such as __tvm_main__, __tvm_module_ctx, "
                "__tvm_dev_mblob or __TVMAPISetLastError, and no TVM kernel names)",
            )
        if facts.elf is not None and first_blob_kind(facts.elf, symbols) in RELAX_KINDS:
            return Sniffed(FileKind.RELAX_VM, info, facts)
        if symbols.abi.startswith("tvm-ffi"):
            return Sniffed(FileKind.TVM_FFI_SO, info, facts)
        # "legacy", or "empty" (no kernels at all: a library module with no functions)
        return Sniffed(
            FileKind.SYSTEM_LIB_SO if symbols.system_lib else FileKind.LEGACY_SO, info, facts
        )
    expected = _expected_by_name(shown)
    if expected == "a tar archive" and info.format in ("unknown", "empty") and _is_tar(path):
        names = _tar_names(path)  # an old-style or empty tar: no ustar magic
        return Sniffed(_archive_form(names), info, members=names)
    reason = f"cannot load {shown!r}: not {expected} (it is {_article(info.describe())})"
    return Sniffed(FileKind.OTHER, info, reason=reason)


def _is_tar(path: str) -> bool:
    try:
        archive.member_names(path, 1)  # an empty archive is a tar too
    except ModuleLoadError:
        return False
    return True


def _expected_by_name(name: str) -> str:
    base = Path(name).name
    if base.endswith((".so", ".dll", ".dylib")) or ".so." in base:
        return "a shared library"
    if base.endswith(".o"):
        return "an object file"
    if base.endswith(".tar"):
        return "a tar archive"
    return "a TVM module file"


def _article(phrase: str) -> str:
    return f"{'an' if phrase[:1].lower() in 'aeiou' else 'a'} {phrase}"


def recognises(path: str) -> bool:
    """Whether the file looks like something :func:`load` handles (or refuses knowingly)."""
    info = identify(path)
    if info.format in ("elf", "pe", "macho", "macho-fat", "tar") or mlf_aot.is_mlf_folder(path):
        return True
    return _expected_by_name(path) != "a TVM module file"  # refused by form, with a reason


def load_library(path: str, shown: str) -> Module:
    """Load a shared library made by the link step (or given), by its ABI."""
    found = sniff(path, shown)
    if found.form.is_shared_library:
        return _load_sniffed(found, path, shown)
    raise ModuleLoadError(found.reason or f"cannot load {shown!r}: not a shared library")


def _load_linked(linked: Path, shown: str) -> Module:
    """Load the library the link step made, naming its cache file if that fails."""
    try:
        return load_library(str(linked), shown)
    except ModuleLoadError as exc:
        raise ModuleLoadError(
            f"{exc} (loaded from the library tvmrt linked from it, cached as {str(linked)!r}; "
            "delete that file to link it again)"
        ) from exc


def _load_sniffed(found: Sniffed, path: str, shown: str) -> Module:
    if found.reason:
        raise ModuleLoadError(found.reason)
    facts = found.facts
    if found.form.is_shared_library and facts and facts.elf:
        needs.check_cpu(facts.elf, shown)  # before dlopen: constructors run code too
    if found.form.loader is None:
        raise ModuleLoadError(f"cannot load {shown!r}: {found.form.description}")
    return found.form.loader(found, path, shown)


def load(path: str, shown: str | None = None) -> Module:
    """Sniff ``path`` once and load it with the one loader for its form.

    Parameters
    ----------
    path
        The file (already resolved to a real path by ``load_module``).
    shown
        The name the user gave, for messages.

    Raises
    ------
    ModuleLoadError
        If the form cannot run here; the message names the form and the reason.
    """
    shown = shown or path
    found = sniff(path, shown)
    try:
        return _load_sniffed(found, path, shown)
    except ModuleLoadError as exc:
        if (
            not found.form.is_package
            or type(exc) is not ModuleLoadError
            or found.form.description.split(" (")[0] in str(exc)
        ):
            raise
        # say which form failed (a link error of an MLF tar names only a member)
        raise ModuleLoadError(f"{exc} ({shown!r} is a {found.form.description})") from exc


def loadfile(path: str) -> Module:
    """The global ``runtime.module.loadfile_<suffix>``: load a file, sniffing its form."""
    return load(str(Path(path).resolve()), path)


def is_builtin(loader: object) -> bool:
    """Whether ``loader`` (a registry entry) is this dispatcher's ``loadfile_<kind>``."""
    return isinstance(loader, PackedFunc) and loader.wrapped is loadfile


def _format_of(path: str) -> str:
    name = Path(path).name
    if name.endswith((".so", ".dll", ".dylib")) or ".so." in name:
        return "so"
    suffix = Path(path).suffix
    return suffix[1:] if suffix else ""


def load_module_file(path: str, fmt: str = "") -> Module:
    """The global ``runtime.ModuleLoadFromFile``, behind :func:`tvmrt.runtime.load_module`.

    ``path`` is resolved to a real file first; the loader registered as
    ``runtime.module.loadfile_<fmt or extension>`` reads it, else :func:`load` sniffs it.
    tvmrt's own loaders name the file as given in their messages.
    """
    text = os.fspath(path)
    # a model held in memory (memory.memory_file) is read through its descriptor's path
    resolved = text if text.startswith(memory.MEMORY_PATHS) else os.path.realpath(text)
    if os.path.isdir(resolved) and mlf_aot.is_mlf_folder(resolved):  # an unpacked MLF package
        return load(os.path.join(resolved, "metadata.json"), shown=text)
    if not os.path.exists(resolved) or os.path.isdir(resolved):
        what = (
            "is a folder, not a file (a model folder, such as graph JSON + library + params, "
            "loads with tvmrt.artifact.load_artifact)"
            if os.path.isdir(resolved)
            else "does not exist"
        )
        raise ModuleFileNotFoundError(f"module file {text!r} {what}")
    check_regular(resolved, "module file", MAX_LIBRARY_BYTES, ModuleLoadError, text)
    kind = fmt or _format_of(text)
    loader = get_global_func(_LOADFILE + kind, allow_missing=True) if kind else None
    if loader is None:
        if recognises(resolved):
            return load(resolved, shown=text)
        names = list_global_func_names()
        known = sorted(n[len(_LOADFILE) :] for n in names if n.startswith(_LOADFILE))
        raise ModuleLoadError(
            f"cannot load {text!r}: no loader for file kind {kind!r}; "
            f"supported kinds are {', '.join(repr(k) for k in known)}"
        )
    if is_builtin(loader):  # tvmrt's own: messages name the file as given
        return load(resolved, shown=text)
    module = loader(resolved)
    if not isinstance(module, Module):
        raise ModuleLoadError(f"loader for {kind!r} returned {type(module).__name__}, not a Module")
    return module


def load_module_memory(data: bytes | bytearray | memoryview, fmt: str = "") -> Module:
    """The global ``runtime.ModuleLoadFromMemory``, behind ``load_module(bytes)``: the bytes
    of any file :func:`load` takes (a ``.so``, an export ``.tar`` or ``.o``, an MLF or tvmc
    package tar, a Relax ``model.so``), loaded through a memfd with nothing written to a disk
    (:mod:`.memory`). ``fmt`` names the form for a message only: the bytes say what it is.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ModuleLoadError(
            f"load_module from memory takes bytes, a bytearray or a memoryview, not "
            f"{type(data).__name__}"
        )
    with memory.held_in_memory(data) as path:
        shown = memory.SHOWN if not fmt else f"{memory.SHOWN} ({fmt})"
        return load(path, shown)
