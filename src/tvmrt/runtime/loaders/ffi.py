"""Load tvm-ffi kernel libraries (TVM >= 0.21): ``tvm.compile(...).export_library(...)`` output.

Since TVM 0.21 compiled kernels use tvm-ffi's calling convention (``TVMFFISafeCallType``):
``int f(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result)``, exported
as ``__tvm_ffi_<name>`` (TVM >= 0.22) or under the plain name (0.21). tvmrt runs them on
its own, without ``apache-tvm-ffi``, over the same native backend as legacy kernels:

1. the symbols say which ABI (:func:`~tvmrt.binfmt.abi.scan_tvm_symbols`); a
   library that needs a context symbol or runtime function tvmrt does not know was built
   for a tvm-ffi version tvmrt does not support, and is refused;
2. ``__tvm_ffi__library_bin`` (>= 0.22 layout) or ``__tvm_ffi_library_bin`` (0.21, legacy
   layout) is parsed from the file;
3. the imports tvmrt supplies (``TVMFFIErrorSetRaisedFromCStrParts``; ``TVMBackend*`` of
   ``target="c"`` kernels) are found among the GOT relocations, and every other import
   must resolve;
4. the file's bytes, exactly as checked, are loaded from a private in-memory copy
   (``memfd``; else the file itself) with ``RTLD_LAZY | RTLD_LOCAL``: the instance is
   tvmrt's alone, so ``tvm_ffi.load_module`` of the same file in the same process gets its
   own, untouched by tvmrt;
5. before any kernel runs, the GOT entries of those imports and the ``__TVMBackend*`` /
   ``__TVMFFI*`` context slots are pointed at the native backend (workspace, thread pool,
   thread-local error slot), and a module token goes into ``__tvm_ffi__library_ctx``.

Calls (:mod:`tvmrt.runtime.loaders.ffi_call`): :meth:`FFIKernelFunc.prepare_call` builds
the ``TVMFFIAny`` array once and returns a native call object; a failing kernel raises
:class:`~tvmrt.error.KernelError` with the kernel's ``"<kind>: <message>"``.

Why not ``apache-tvm-ffi`` (bench/README.md, "ffi_dispatch"): one call costs ~50 ns here
against ~125 ns through ``tvm_ffi`` (and ~225-290 ns through ctypes); tvm_ffi alone
crashes the error path of 0.22-0.23 kernels and the workspace calls of ``target="c"``
kernels; registering tvmrt's services in tvm_ffi's global context-symbol registry would
also change every library a user's ``tvm``/``tvm_ffi`` loads later; and there is no
3.3 MB dependency.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass

from tvmrt.binfmt.abi import FFI_PREFIX, LibraryFacts, TvmSymbols
from tvmrt.binfmt.binary import ElfFile, ElfSymbol
from tvmrt.error import FunctionNotFoundError, ModuleLoadError
from tvmrt.runtime import kernel_callbacks, kernel_services
from tvmrt.runtime.loaders._dso import (
    KernelLibrary,
    check_imports_resolve,
    dlopen_checked,
    unload_now,
    unload_with,
)
from tvmrt.runtime.loaders.blob import ParsedBlob, assemble_modules, parse_module_blob
from tvmrt.runtime.loaders.ffi_call import FFIKernelFunc, kernel_call_parts
from tvmrt.runtime.loaders.got import apply_patches, plan_patches
from tvmrt.runtime.module import Module
from tvmrt.runtime.packed_func import PackedFunc

__all__ = ["FFIKernelFunc", "FFILibraryModule", "load_ffi_library", "kernel_call_parts"]


_MAIN = "__tvm_ffi_main"
_SPECIAL = "__tvm_ffi__"  # __tvm_ffi__library_ctx, __tvm_ffi__metadata_<f>, ...
_CTX_SYMBOLS = ("__tvm_ffi__library_ctx", "__tvm_ffi_library_ctx")
_BIN = "__tvm_ffi__library_bin"
_BIN_021 = "__tvm_ffi_library_bin"
_ALIGNMENT = 64
_SUPPORTED = "the tvm-ffi ABI of TVM 0.21 to 0.27"


class FFILibraryModule(KernelLibrary):
    """A loaded tvm-ffi kernel library: one function per exported kernel.

    Parameters
    ----------
    path
        The file, for messages.
    lib
        The ``dlopen``-ed library.
    symbols
        What its dynamic symbols say.
    entry
        The entry function's symbol (``__tvm_ffi_main``, or the name in ``__tvm_main__``
        for TVM 0.21), if any.
    skipped
        Kinds of the modules in ``__tvm_ffi__library_bin`` that tvmrt does not load.
    """

    def __init__(
        self,
        path: str,
        lib: ctypes.CDLL,
        symbols: TvmSymbols,
        entry: str | None,
        skipped: Sequence[str] = (),
    ) -> None:
        super().__init__(path, lib)
        self.abi = symbols.abi
        self._entry = entry
        self.skipped_modules = tuple(skipped)
        if symbols.abi == "tvm-ffi":
            self._symbols = {
                name[len(FFI_PREFIX) :]: name
                for name in symbols.functions
                if name.startswith(FFI_PREFIX) and not name.startswith(_SPECIAL) and name != _MAIN
            }
        else:  # 0.21: plain names
            self._symbols = {n: n for n in symbols.functions if not n.startswith("__")}

    @property
    def function_names(self) -> list[str]:
        """Names of the exported kernels (without the ``__tvm_ffi_`` prefix)."""
        return sorted(self._symbols)

    def __repr__(self) -> str:
        return f"FFILibraryModule({self.path!r}, abi={self.abi!r})"

    def get_function(self, name: str, query_imports: bool = False) -> PackedFunc:
        try:
            return super().get_function(name, query_imports)
        except FunctionNotFoundError:
            if not self.skipped_modules:
                raise
            raise FunctionNotFoundError(
                f"Module has no function '{name}' (the library also holds modules tvmrt "
                f"does not load: {', '.join(self.skipped_modules)})"
            ) from None

    def _symbol_for(self, name: str) -> str | None:
        return self._entry if name in (self.entry_name, "main") else self._symbols.get(name)

    def _wrap(self, address: int, symbol: str, name: str) -> PackedFunc:
        return FFIKernelFunc(address, name, self)


# -- loading ------------------------------------------------------------------------------


def load_ffi_library(facts: LibraryFacts) -> Module:
    """Load a tvm-ffi kernel library whose symbols were read already; return the root module.

    Parameters
    ----------
    facts
        The file, its parsed ELF, dynamic symbols and what they say (from the dispatcher).

    Raises
    ------
    ModuleLoadError
        If the library was built for a tvm-ffi ABI version tvmrt does not support, needs
        symbols nobody provides, or its embedded modules are unreadable.
    """
    path, shown, elf, dynsym, symbols = (
        facts.path,
        facts.shown,
        facts.elf,
        facts.dynsym,
        facts.symbols,
    )
    if elf is None or symbols is None:
        raise ModuleLoadError(f"cannot load {shown!r}: a tvm-ffi library must be an ELF file")
    addresses = kernel_services.ffi_symbol_addresses()  # loads the native backend first
    _check_supported(symbols, addresses, shown)
    entry, bin_modules, parsed = _read_library_bin(elf, dynsym, symbols, shown)
    skipped = bin_modules.skipped if bin_modules is not None else []
    patches = plan_patches(elf, symbols, addresses, shown)
    lib = _dlopen_private(path, elf, shown)
    try:
        check_imports_resolve(lib, dynsym, shown, provided=frozenset(addresses))
        apply_patches(lib, elf, dynsym, patches, shown)
        for slot in symbols.slots:  # every slot is one of ours (_check_supported)
            ctypes.c_void_p.in_dll(lib, slot).value = addresses[slot[2:]]
    except BaseException:
        unload_now(lib)
        raise
    module = FFILibraryModule(shown, lib, symbols, entry, skipped)
    unload_with(module, lib)
    for name in _CTX_SYMBOLS:
        try:
            ctx = ctypes.c_void_p.in_dll(lib, name)
        except ValueError:
            continue
        ctx.value = kernel_callbacks.register_module_context(module)
    if bin_modules is not None:
        return bin_modules.assemble(module)
    return assemble_modules(parsed, module) if parsed is not None else module


def _check_supported(symbols: TvmSymbols, addresses: dict[str, int], shown: str) -> None:
    """Refuse, before loading, a library that needs services tvmrt does not know."""
    unknown = [s for s in symbols.slots if s[2:] not in addresses]
    unknown += [
        name
        for name in symbols.undefined
        if name.startswith(("TVMFFI", "TVMBackend", "TVMAPI", "TVMFunc", "TVMArray"))
        and name not in addresses
    ]
    if unknown:
        raise ModuleLoadError(
            f"cannot load {shown!r}: it was built for a tvm-ffi ABI version tvmrt does not "
            f"support (tvmrt runs {_SUPPORTED}); it needs runtime symbols tvmrt does not "
            f"provide: {', '.join(sorted(unknown))}"
        )
    if symbols.abi == "tvm-ffi-0.21" and not any(not n.startswith("__") for n in symbols.functions):
        raise ModuleLoadError(
            f"cannot load {shown!r}: it looks like a TVM 0.21 tvm-ffi library but exports no "
            "kernel functions"
        )


def _read_library_bin(
    elf: ElfFile, dynsym: list[ElfSymbol], symbols: TvmSymbols, shown: str
) -> tuple[str | None, LibraryBin | None, ParsedBlob | None]:
    """``(entry symbol, >= 0.22 library bin, parsed 0.21 blob)``, read from the file."""
    defined = {s.name: s for s in dynsym if s.defined}
    parsed: ParsedBlob | None = None
    if symbols.abi == "tvm-ffi":
        entry = _MAIN if _MAIN in defined and defined[_MAIN].is_function else None
        bin_modules = None
        if symbols.blob_symbol == _BIN:
            data = elf.read_sized_blob(defined[_BIN])
            bin_modules = parse_library_bin(data, f"{_BIN} of {shown!r}")
        return entry, bin_modules, None
    entry = None
    if "__tvm_main__" in defined:  # 0.21 still names the entry in a char array
        entry = elf.read_cstring(defined["__tvm_main__"]) or None
    if symbols.blob_symbol == _BIN_021:  # 0.21 wrote the legacy blob layout under the new name
        data = elf.read_sized_blob(defined[_BIN_021])
        parsed = parse_module_blob(data, f"{_BIN_021} of {shown!r}")
    return entry, None, parsed


@dataclass
class LibraryBin:
    """The modules of a >= 0.22 ``__tvm_ffi__library_bin``, before the library is attached.

    ``entries[i]`` is ``None`` for ``_lib`` (the library itself), a loaded Module for a
    kind tvmrt has a ``runtime.module.loadbinary_<kind>`` loader for (e.g. the
    ``GraphExecutorFactory`` of a ``tvmrt.compile`` single-file artifact), or the kind's
    name for a module tvmrt skips (e.g. ``metal``; a Relax executable's library is the C
    runtime's to load: dispatch.py).
    """

    entries: list[Module | str | None]
    indptr: list[int]
    children: list[int]

    @property
    def skipped(self) -> list[str]:
        """Kinds of the modules that were not loaded."""
        return [e for e in self.entries if isinstance(e, str)]

    def assemble(self, library: Module) -> Module:
        """Link the imports with ``library`` as ``_lib``; the root, or ``library`` if skipped."""
        modules = [library if e is None else e for e in self.entries]
        for i, module in enumerate(modules):
            if isinstance(module, str):
                continue
            for j in self.children[self.indptr[i] : self.indptr[i + 1]]:
                child = modules[j]
                if not isinstance(child, str) and child is not module:
                    module.import_module(child)
        root = modules[0]
        return library if isinstance(root, str) else root


def parse_library_bin(data: bytes, what: str) -> LibraryBin:
    """Parse a >= 0.22 ``__tvm_ffi__library_bin``, loading the modules tvmrt can load.

    Layout: ``u64 nbytes | vec<u64> indptr | vec<u64> children | (str kind [str bytes])*``;
    every payload is length-prefixed, so modules tvmrt cannot load are skipped. Loading a
    module here only parses its bytes: nothing from the library executes.
    """
    from tvmrt.binfmt.stream import ByteReader
    from tvmrt.runtime.registry import get_global_func

    outer = ByteReader(data, what, ModuleLoadError)
    reader = ByteReader(outer.blob("library binary"), what, ModuleLoadError)
    indptr = reader.u64s("import tree indptr")
    children = reader.u64s("import tree child indices")
    if not indptr or indptr[0] != 0 or indptr[-1] != len(children):
        raise reader.fail(f"invalid import tree indptr {indptr[:8]}")
    if any(c >= len(indptr) - 1 for c in children):
        raise reader.fail("an import tree child index is out of range")
    entries: list[Module | str | None] = []
    for index in range(len(indptr) - 1):
        kind = reader.string(f"kind of module {index}")
        if kind == "_lib":
            entries.append(None)
            continue
        payload = reader.blob(f"bytes of module {index} ({kind!r})")
        loader = get_global_func(f"runtime.module.loadbinary_{kind}", allow_missing=True)
        if loader is None:
            entries.append(kind)
            continue
        sub = ByteReader(payload, f"{what}: module {index} ({kind!r})", ModuleLoadError)
        module = loader(sub)
        if not isinstance(module, Module):
            raise reader.fail(f"the loader of {kind!r} returned {type(module).__name__}")
        if sub.remaining:
            raise sub.fail(f"{sub.remaining} bytes are left over after the module")
        entries.append(module)
    if entries.count(None) != 1:
        raise reader.fail(f"expected one '_lib' module, found {entries.count(None)}")
    if reader.remaining:
        raise reader.fail(f"{reader.remaining} bytes are left over after the last module")
    return LibraryBin(entries, indptr, children)


# -- a private instance -------------------------------------------------------------------


def _dlopen_private(path: str, elf: ElfFile, shown: str) -> ctypes.CDLL:
    """``dlopen`` the checked bytes from a private in-memory file (else ``path`` itself).

    A private instance has its own GOT and context slots: tvmrt's patches never reach a
    ``tvm_ffi.load_module`` of the same file, and the bytes loaded are the bytes checked
    (:func:`tvmrt.runtime.loaders._dso.dlopen_checked`).
    """
    return dlopen_checked(path, elf, shown)
