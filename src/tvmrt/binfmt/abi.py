"""What kind of TVM module a library is, from its symbols (no file-format code here).

:mod:`.binary` reads the symbol tables; this module classifies them: which calling
convention (legacy packed functions, tvm-ffi), which context slots the library defines,
which services it imports, whether it registers itself as a system library, whether it
carries TVM 0.7/0.8 linked params, and which symbol holds its module blob. Every loader
and ``tvmrt inspect`` take these answers from here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tvmrt.binfmt.binary import BinaryInfo, ElfFile, ElfSymbol
from tvmrt.binfmt.files import MAX_LIBRARY_BYTES, read_regular
from tvmrt.error import ModuleLoadError

__all__ = [
    "BLOB_SYMBOLS",
    "FFI_PREFIX",
    "LEGACY_SLOTS",
    "LINKED_PARAM_LOOKUP",
    "SYSTEM_LIB_REGISTER",
    "LibraryFacts",
    "RELAX_KINDS",
    "TvmSymbols",
    "first_blob_kind",
    "read_library",
    "scan_tvm_symbols",
]

SYSTEM_LIB_REGISTER = "TVMBackendRegisterSystemLibSymbol"
LINKED_PARAM_LOOKUP = "_lookup_linked_param"
# where a library keeps its module blob, in order of preference: legacy (<= 0.20), tvm-ffi
# (>= 0.22), tvm-ffi 0.21 (legacy layout under the new name)
BLOB_SYMBOLS = ("__tvm_dev_mblob", "__tvm_ffi__library_bin", "__tvm_ffi_library_bin")

# the module kinds of a Relax VM executable (TVM <= 0.19; >= 0.20)
RELAX_KINDS = ("relax.Executable", "relax.VMExecutable")

LEGACY_SLOTS = (
    "__TVMFuncCall",
    "__TVMAPISetLastError",
    "__TVMBackendGetFuncFromEnv",
    "__TVMBackendAllocWorkspace",
    "__TVMBackendFreeWorkspace",
    "__TVMBackendParallelLaunch",
    "__TVMBackendParallelBarrier",
)
_LEGACY_MARKERS = {"__tvm_main__", "__tvm_module_ctx", "__tvm_dev_mblob", *LEGACY_SLOTS}
_LEGACY_UNDEFINED = {
    "TVMAPISetLastError",
    "TVMBackendAllocWorkspace",
    "TVMBackendFreeWorkspace",
    "TVMBackendGetFuncFromEnv",
    "TVMFuncCall",
    "TVMBackendParallelLaunch",
    "TVMBackendParallelBarrier",
}
_FFI021_MARKERS = {"__tvm_ffi_library_ctx", "__tvm_ffi_library_bin"}
_FFI_MARKERS = {"__tvm_ffi__library_ctx", "__tvm_ffi__library_bin", "__tvm_ffi_main"}
FFI_PREFIX = "__tvm_ffi_"
# TVMFFIErrorSetRaisedFromCStrParts is called directly since TVM 0.24 (prefixed names)
_FFI_DIRECT_IMPORTS = {"TVMFFIErrorSetRaisedFromCStrParts"}
_KERNEL_PREFIXES = ("tvmgen_", "fused_", "fuse_")
_NOT_PACKED = {"_init", "_fini"}


@dataclass(frozen=True)
class TvmSymbols:
    """What a library's dynamic symbols say about it as a TVM module.

    Attributes
    ----------
    abi
        ``"legacy"`` (TVM <= 0.20 packed functions), ``"tvm-ffi-0.21"`` (tvm-ffi calling
        convention, functions under their plain names), ``"tvm-ffi"`` (>= 0.22,
        ``__tvm_ffi_<name>``), ``"empty"`` (a library that defines no symbol at all: TVM's
        export of a module with no kernels, an empty ``lib0.c``, which TVM loads as a
        ``library`` module with no functions) or ``"none"`` (not a TVM module).
    functions
        Names of the exported functions that can be packed functions.
    slots
        The context slots the library defines: data symbols named ``__TVM...``
        (``__TVMBackendAllocWorkspace``, ``__TVMFFIErrorSetRaisedFromCStr``, ...).
    undefined
        Names the library imports (functions and data it expects someone to provide).
    has_entry
        Whether ``__tvm_main__`` (legacy) or ``__tvm_ffi_main`` is defined.
    blob_symbol
        ``"__tvm_dev_mblob"`` or the tvm-ffi equivalent if present, else ``""``.
    system_lib
        Whether the code registers itself with ``TVMBackendRegisterSystemLibSymbol``
        (built with ``system-lib``): it imports that function.
    linked_params
        Whether it defines ``_lookup_linked_param`` (TVM 0.7/0.8 ``link-params``).
    """

    abi: str
    functions: tuple[str, ...]
    slots: tuple[str, ...]
    undefined: tuple[str, ...]
    has_entry: bool
    blob_symbol: str
    system_lib: bool = False
    linked_params: bool = False


def scan_tvm_symbols(symbols: Iterable[ElfSymbol]) -> TvmSymbols:
    """Classify a library by its dynamic symbols (see :class:`TvmSymbols`)."""
    symbols = list(symbols)
    defined = {s.name for s in symbols if s.defined and s.bind != "local"}
    undefined = tuple(sorted({s.name for s in symbols if not s.defined and s.name}))
    functions = tuple(
        sorted(
            s.name
            for s in symbols
            if s.defined
            and s.is_function
            and s.bind != "local"
            and s.name not in _NOT_PACKED
            and (not s.name.startswith("__") or s.name.startswith("__tvm"))
        )
    )
    ffi_functions = any(n.startswith(FFI_PREFIX) for n in functions)
    slots = tuple(
        sorted(
            s.name
            for s in symbols
            if s.defined and s.name.startswith("__TVM") and not s.is_function and s.bind != "local"
        )
    )
    ffi_021 = any(n.startswith("__TVMFFI") for n in slots) or any(
        n.startswith("TVMFFI") for n in undefined
    )
    if defined & _FFI_MARKERS or ffi_functions or _FFI_DIRECT_IMPORTS.intersection(undefined):
        abi = "tvm-ffi"
    elif defined & _FFI021_MARKERS or ffi_021:
        abi = "tvm-ffi-0.21"
    elif (
        SYSTEM_LIB_REGISTER in undefined
        or defined & _LEGACY_MARKERS
        or _LEGACY_UNDEFINED.intersection(undefined)
        or any(n.startswith(_KERNEL_PREFIXES) for n in functions)
    ):
        abi = "legacy"
    elif not defined:
        abi = "empty"
    else:
        abi = "none"
    # a library's own ABI names its blob: an older tvmrt's re-export of a tvm-ffi factory
    # carried a legacy blob beside tvm-ffi's, which the tvm-ffi loader does not read
    preferred = {"tvm-ffi": BLOB_SYMBOLS[1], "tvm-ffi-0.21": BLOB_SYMBOLS[2]}.get(abi)
    order = (preferred, *BLOB_SYMBOLS) if preferred else BLOB_SYMBOLS
    blob = next((n for n in order if n in defined), "")
    return TvmSymbols(
        abi=abi,
        functions=functions,
        slots=slots,
        undefined=undefined,
        has_entry="__tvm_main__" in defined or "__tvm_ffi_main" in defined,
        blob_symbol=blob,
        system_lib=SYSTEM_LIB_REGISTER in undefined,
        linked_params=LINKED_PARAM_LOOKUP in defined,
    )


@dataclass(frozen=True)
class LibraryFacts:
    """A shared library as the dispatcher read it, handed to exactly one ABI leaf.

    Attributes
    ----------
    path
        The file to ``dlopen``.
    shown
        The name for messages (the user's file when ``path`` was linked from it).
    info
        Its header.
    elf, dynsym, symbols
        The parsed ELF file, its dynamic symbols and what they say (``None``/empty for a
        native non-ELF library such as a macOS dylib: no checks before ``dlopen``).
    """

    path: str
    shown: str
    info: BinaryInfo
    elf: ElfFile | None
    dynsym: list[ElfSymbol]
    symbols: TvmSymbols | None


def read_library(path: str, shown: str, info: BinaryInfo) -> LibraryFacts:
    """Read a shared library's dynamic symbols and classify them (nothing is loaded).

    Raises
    ------
    ModuleLoadError
        If the ELF file is corrupt or has no dynamic symbol table.
    """
    if info.format != "elf":
        return LibraryFacts(path, shown, info, None, [], None)
    elf = ElfFile(
        read_regular(path, "module file", MAX_LIBRARY_BYTES, ModuleLoadError, shown=shown), shown
    )
    dynsym = elf.symbols(dynamic=True)
    if not dynsym:
        raise ModuleLoadError(
            f"cannot load {shown!r}: the shared library has no dynamic symbol table"
        )
    return LibraryFacts(path, shown, info, elf, dynsym, scan_tvm_symbols(dynsym))


def first_blob_kind(elf: ElfFile, symbols: TvmSymbols) -> str:
    """The kind of the first module a library's blob holds (its root: ``"relax.Executable"``,
    ``"GraphExecutorFactory"``, ...), or ``""`` when there is no blob or it cannot tell.

    Reads only the blob's head: ``u64 nbytes``, then ``u64 count`` and a string in the old
    layout (``__tvm_dev_mblob``, TVM 0.21's ``__tvm_ffi_library_bin``), or the import tree's
    two vectors and then a string in tvm-ffi's (``__tvm_ffi__library_bin``).
    """
    name = symbols.blob_symbol
    symbol = next((s for s in elf.symbols(dynamic=True) if s.name == name and s.defined), None)
    if symbol is None:
        return ""
    try:
        blob = elf.read_sized_blob(symbol)
    except ModuleLoadError:
        return ""
    at = 8
    if name == BLOB_SYMBOLS[1]:  # tvm-ffi: indptr and children first
        for _ in range(2):
            if at + 8 > len(blob):
                return ""
            count = int.from_bytes(blob[at : at + 8], "little")
            at += 8 + 8 * count
    else:
        at += 8  # the number of entries
    if at + 8 > len(blob):
        return ""
    size = int.from_bytes(blob[at : at + 8], "little")
    if size > 256 or at + 8 + size > len(blob):
        return ""
    return blob[at + 8 : at + 8 + size].decode("utf-8", errors="replace")
