"""Load kernel libraries: ``runtime.module.loadfile_so``.

Legacy libraries (TVM <= 0.20, packed functions) are loaded here; tvm-ffi libraries
(TVM >= 0.21) are recognised by their symbols in step 2 and handed to
:mod:`tvmrt.runtime.loaders.ffi`.

The steps follow TVM's ``dso_library.cc`` / ``library_module.cc`` (docs/abi.md §6.1), with
checks first so that a wrong file fails with a clear :class:`~tvmrt.error.ModuleLoadError`
before any of its code runs:

1. identify the file (ELF for this machine and OS; not a DLL, Mach-O, text, ...);
2. read its dynamic symbols: is it a TVM module, which ABI, which slots, which imports;
3. read ``__tvm_main__`` and parse ``__tvm_dev_mblob`` from the file;
4. ``dlopen`` with ``RTLD_LAZY | RTLD_LOCAL`` and check every symbol it imports resolves;
5. write the backend's addresses into the ``__TVM*`` slots and a module token into
   ``__tvm_module_ctx``;
6. put the library module in place of ``_lib`` in the blob's module tree; return the root.
"""

from __future__ import annotations

import _ctypes
import contextlib
import ctypes
import functools
import os
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tvmrt.error import ArrayError, KernelError, ModuleLoadError
from tvmrt.runtime import _backend
from tvmrt.runtime._ctypes_api import TVM_DLTENSOR_HANDLE, TVMValue
from tvmrt.runtime.loaders import _values
from tvmrt.runtime.loaders.binary import (
    ElfFile,
    ElfSymbol,
    TvmSymbols,
    check_host_compatible,
    identify,
    scan_tvm_symbols,
)
from tvmrt.runtime.loaders.blob import ParsedBlob, assemble_modules, parse_module_blob
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.packed_func import PackedFunc, PreparedCall
from tvmrt.runtime.registry import register_func

__all__ = [
    "KernelLibrary",
    "LibraryModule",
    "LegacyPackedFunc",
    "load_shared_library",
    "native_call_parts",
]

# int f(TVMValue* args, int* type_codes, int num_args, TVMValue* ret, int* ret_code,
#       void* resource_handle). Declared without argtypes: ctypes then passes the prebuilt
# arrays and byref()s as pointers by its default conversions, which is several hundred
# nanoseconds per call cheaper than converting through declared c_void_p argtypes.
_PackedCFunc = ctypes.CFUNCTYPE(ctypes.c_int)
_ALIGNMENT = 64
_NULL_CODE = 4


def _make_errcheck(name: str) -> Any:
    def errcheck(result: int, func: object, arguments: object) -> int:
        if result != 0:
            message = _backend.take_last_error().rstrip()
            if not message:
                message = f"function {name!r} returned {result} without setting an error message"
            raise KernelError(message)
        return result

    return errcheck


class LegacyPackedFunc(PackedFunc):
    """A function of a legacy kernel library (``TVMBackendPackedCFunc``).

    Parameters
    ----------
    address
        Address of the C function.
    name
        Its symbol name.
    library
        The module it belongs to (kept alive with the function).
    """

    __slots__ = ("_kernel", "_raw", "address", "library")

    def __init__(self, address: int, name: str, library: Module) -> None:
        # called through tvmrt_call_packed(f, ...): each call starts with an empty error slot
        cfunc = _PackedCFunc(_backend.call_packed_address())
        cfunc.errcheck = _make_errcheck(name)
        super().__init__(cfunc, name)
        self.address = address
        self.library = library
        self._kernel = ctypes.c_void_p(address)
        self._raw = _PackedCFunc(address)

    def __call__(self, *args: Any) -> Any:
        """Call with tensors (as ``DLTensor*``), ints, floats, strings, bytes or ``None``.

        Raises
        ------
        KernelError
            If the kernel returns an error; the message is the kernel's own.
        ArrayError
            If a tensor's data is not 64-byte aligned (the kernels assume it).
        """
        for i, arg in enumerate(args):
            if isinstance(arg, NDArray):
                _check_aligned(arg, i, self.name)
        values, codes, keep = _values.pack_args(args)
        ret = (TVMValue * 1)()
        ret_code = (ctypes.c_int * 1)(_NULL_CODE)
        self._func(self._kernel, values, codes, len(args), ret, ret_code)
        result = _values.from_tvm_value(ret[0], ret_code[0])
        del keep  # arguments (strings, bytes) the return value may point into
        return result

    def prepare_call(self, args: Sequence[NDArray]) -> PreparedCall:
        """Build the ``TVMValue``/type-code arrays once: ``fn(*fn_args)`` then runs the kernel.

        ``fn`` is the ctypes function itself (its ``errcheck`` raises :class:`KernelError`),
        so a run loop makes one ctypes call per kernel and nothing else. The argument
        arrays keep the NDArrays alive. :meth:`bind_arrays` wraps the same call in a
        zero-argument callable.

        Raises
        ------
        TypeError
            If an argument is not an NDArray.
        ArrayError
            If a tensor's data is not 64-byte aligned.
        """
        n = len(args)
        values = (TVMValue * max(n, 1))()
        codes = (ctypes.c_int * max(n, 1))()
        for i, arg in enumerate(args):
            if not isinstance(arg, NDArray):
                raise TypeError(
                    f"function {self.name!r}: argument {i} must be an NDArray, "
                    f"got {type(arg).__name__}"
                )
            _check_aligned(arg, i, self.name)
            values[i].v_handle = ctypes.addressof(arg._dltensor())
            codes[i] = TVM_DLTENSOR_HANDLE
        values.keepalive = (tuple(args), self)  # type: ignore[attr-defined]
        ret = TVMValue()
        ret_code = ctypes.c_int(_NULL_CODE)
        return (
            self._func,
            (self._kernel, values, codes, n, ctypes.byref(ret), ctypes.byref(ret_code)),
        )

    def raw_call(self, args: Any, codes: Any, num_args: int, ret_val: Any, ret_code: Any) -> int:
        """Call with C argument arrays as they are; returns the status (no exception)."""
        return int(self._raw(args, codes, num_args, ret_val, ret_code, None))

    def __repr__(self) -> str:
        return f"LegacyPackedFunc({self.name!r}, {self.address:#x})"


def _check_aligned(arr: NDArray, index: int, name: str) -> None:
    if arr.nbytes and arr.data_ptr % _ALIGNMENT:
        raise ArrayError(
            f"function {name!r}: argument {index} has data at {arr.data_ptr:#x}, which is not "
            f"{_ALIGNMENT}-byte aligned as compiled kernels require; copy it into a new array"
        )


def native_call_parts(prepared: PreparedCall) -> tuple[int, int, int, int] | None:
    """``(function, TVMValue*, int* codes, num_args)`` addresses of a prepared kernel call.

    ``None`` if ``prepared`` did not come from :meth:`LegacyPackedFunc.prepare_call`. Tools
    that replay kernel calls from C (the benchmark) use this.
    """
    fn, fn_args = prepared
    if not isinstance(fn, _PackedCFunc) or len(fn_args) != 6:
        return None
    kernel, values, codes, n = fn_args[0], fn_args[1], fn_args[2], fn_args[3]
    return kernel.value or 0, ctypes.addressof(values), ctypes.addressof(codes), int(n)


class KernelLibrary(Module):
    """A ``dlopen``-ed kernel library: each function is found by symbol once, then cached.

    Subclasses map a function name to its symbol (:meth:`_symbol_for`) and wrap the
    address in their ABI's PackedFunc (:meth:`_wrap`).
    """

    def __init__(self, path: str, lib: ctypes.CDLL) -> None:
        super().__init__()
        self.path = path
        self._lib = lib
        self._cache: dict[str, PackedFunc] = {}

    @property
    def type_key(self) -> str:
        return "library"

    @property
    def format(self) -> str:
        return "so"

    def _symbol_for(self, name: str) -> str | None:
        """The symbol of function ``name``, or None if the library has no such function."""
        raise NotImplementedError

    def _wrap(self, address: int, symbol: str, name: str) -> PackedFunc:
        """The PackedFunc calling the function at ``address``."""
        raise NotImplementedError

    def _get_function(self, name: str) -> PackedFunc | None:
        func = self._cache.get(name)
        if func is not None:
            return func
        symbol = self._symbol_for(name)
        if symbol is None:
            return None
        try:
            address = ctypes.cast(self._lib[symbol], ctypes.c_void_p).value
        except AttributeError:
            return None
        if not address:
            return None
        func = self._wrap(address, symbol, name)
        self._cache[name] = func
        return func


class LibraryModule(KernelLibrary):
    """A loaded legacy kernel library: one packed function per exported kernel symbol.

    Parameters
    ----------
    path
        The file, for messages.
    lib
        The ``dlopen``-ed library.
    symbols
        What its dynamic symbols say (``None`` where they could not be read: then any
        ``dlsym``-able name is taken for a function).
    entry
        The entry function's name (the string in ``__tvm_main__``), if any.
    """

    def __init__(
        self, path: str, lib: ctypes.CDLL, symbols: TvmSymbols | None, entry: str | None
    ) -> None:
        super().__init__(path, lib)
        self._symbols = symbols
        self._function_names = frozenset(symbols.functions) if symbols is not None else None
        self._entry = entry

    @property
    def entry_name_in_library(self) -> str | None:
        """The name ``__tvm_main__`` stands for, if the library has a single entry."""
        return self._entry

    @property
    def function_names(self) -> list[str]:
        """Names of the exported functions (empty if the symbol table was not read)."""
        return sorted(self._function_names or ())

    def __repr__(self) -> str:
        return f"LibraryModule({self.path!r})"

    def _symbol_for(self, name: str) -> str | None:
        symbol = self._entry if name == self.entry_name else name
        if symbol is None:
            return None
        if self._function_names is not None and symbol not in self._function_names:
            return None  # not ours (dlsym would also find libc's functions) or not code
        return symbol

    def _wrap(self, address: int, symbol: str, name: str) -> PackedFunc:
        return LegacyPackedFunc(address, symbol, self)


# -- loading ------------------------------------------------------------------------------


def load_shared_library(path: str, source: str | None = None) -> Module:
    """Load a legacy kernel library and the modules it imports; return the root module.

    Parameters
    ----------
    path
        The shared library.
    source
        The file the user asked for, if ``path`` was made from it (a linked ``.tar``).

    Raises
    ------
    ModuleLoadError
        If the file is not a shared library for this machine, not a TVM module, was built
        for an ABI version tvmrt does not support, imports symbols nobody provides, or
        its module blob is unusable.
    """
    shown = source or path
    info = identify(path)
    if info.format == "tar" or (info.format == "elf" and info.kind == "object file"):
        from tvmrt.runtime.loaders import link  # an archive or object named like a library

        return link.load_archive(path) if info.format == "tar" else link.load_object(path)
    check_host_compatible(info, shown, "shared library")
    if info.format == "elf":
        elf = ElfFile(Path(path).read_bytes(), shown)
        dynsym = elf.symbols(dynamic=True)
        if not dynsym:
            raise ModuleLoadError(
                f"cannot load {shown!r}: the shared library has no dynamic symbol table"
            )
        symbols: TvmSymbols | None = scan_tvm_symbols(dynsym)
        entry, parsed = _read_from_file(elf, dynsym, shown)
    else:  # a native non-ELF library (macOS): no symbol checks before dlopen
        elf, dynsym, symbols, entry, parsed = None, [], None, None, None
    if symbols is not None:
        _check_abi(symbols, shown)
        if symbols.abi.startswith("tvm-ffi"):
            from tvmrt.runtime.loaders.ffi import load_ffi_library

            assert elf is not None
            return load_ffi_library(path, shown, elf, dynsym, symbols)
        if _backend.PROVIDED_SYMBOLS.intersection(symbols.undefined):
            _backend.make_global()  # C-target kernels import the backend by name
    slots = _backend.slot_addresses()  # loads the native backend before the library
    lib = dlopen_checked(path, elf.data if elf is not None else None, shown)
    try:
        if dynsym:
            _check_imports_resolve(lib, dynsym, shown)
        if symbols is None:  # no symbol table: probe like TVM does
            entry = _probe_entry(lib)
            parsed = _probe_blob(lib, shown)
    except BaseException:
        unload_now(lib)
        raise
    module = LibraryModule(shown, lib, symbols, entry)
    unload_with(module, lib)
    _fill_slots(lib, symbols, slots)
    _set_module_context(lib, symbols, module)
    return assemble_modules(parsed, module) if parsed is not None else module


# -- library lifetime -----------------------------------------------------------------

_memfds: dict[int, int] = {}  # dlopen handle -> the memfd it was loaded from
_pinned_fds: list[int] = []  # memfds of libraries the loader would not unload


def dlopen_checked(path: str, data: bytes | None, shown: str) -> ctypes.CDLL:
    """``dlopen`` the bytes that were checked, from a private in-memory file (else ``path``).

    The dynamic loader knows a library by its path and by its file's device and inode: a
    library rebuilt at the same path would come back as the old, still-mapped code, and
    a file changed after the check would not be the file checked. A fresh memfd per load
    holding ``data`` avoids both. Without memfd (or where it cannot be mapped executable)
    the file itself is loaded.
    """
    mode = os.RTLD_LAZY | os.RTLD_LOCAL
    memfd_create = getattr(os, "memfd_create", None)
    if data is not None and memfd_create is not None and os.path.isdir("/proc/self/fd"):
        fd = -1
        try:
            fd = memfd_create(f"tvmrt:{Path(shown).name}", getattr(os, "MFD_CLOEXEC", 0))
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            lib = ctypes.CDLL(f"/proc/self/fd/{fd}", mode=mode)
        except OSError:
            if fd >= 0:  # no memfd, or not executable here (noexec policies): load the file
                os.close(fd)
        else:
            _memfds[lib._handle] = fd
            return lib
    try:
        return ctypes.CDLL(path, mode=mode)
    except OSError as exc:
        raise ModuleLoadError(f"cannot load {shown!r}: {exc}") from exc


def unload_with(module: Module, lib: ctypes.CDLL) -> None:
    """``dlclose`` ``lib`` (and release its memfd) once ``module`` is garbage, as TVM does.

    Every function of the library holds its module, so no kernel can run after that.
    """
    finalizer = weakref.finalize(module, _unload, lib._handle, _memfds.pop(lib._handle, -1))
    finalizer.atexit = False  # at exit the process unmaps everything anyway


def unload_now(lib: ctypes.CDLL) -> None:
    """Unload a library that failed its checks after ``dlopen`` (no module was made)."""
    _unload(lib._handle, _memfds.pop(lib._handle, -1))


def _unload(handle: int, fd: int) -> None:
    with contextlib.suppress(OSError):
        _ctypes.dlclose(handle)
    if fd < 0:
        return
    # the loader finds a library by its name, /proc/self/fd/<fd>: the number may be reused
    # only once the library is gone (one marked NODELETE stays mapped)
    try:
        again = _ctypes.dlopen(f"/proc/self/fd/{fd}", os.RTLD_LAZY | os.RTLD_NOLOAD)
    except OSError:
        os.close(fd)
        return
    _ctypes.dlclose(again)
    _pinned_fds.append(fd)


def _check_abi(symbols: TvmSymbols, shown: str) -> None:
    if symbols.abi == "none":
        raise ModuleLoadError(
            f"cannot load {shown!r}: the shared library is not a TVM module (it has none of "
            "TVM's symbols such as __tvm_main__, __tvm_module_ctx, __tvm_dev_mblob or "
            "__TVMAPISetLastError, and no TVM kernel names)"
        )


def _find(dynsym: list[ElfSymbol], name: str) -> ElfSymbol | None:
    for symbol in dynsym:
        if symbol.name == name and symbol.defined:
            return symbol
    return None


def _read_from_file(
    elf: ElfFile, dynsym: list[ElfSymbol], shown: str
) -> tuple[str | None, ParsedBlob | None]:
    """``__tvm_main__`` and the parsed ``__tvm_dev_mblob``, read from the file's bytes."""
    entry = None
    main = _find(dynsym, "__tvm_main__")
    if main is not None:
        entry = elf.read_cstring(main) or None
    parsed = None
    blob = _find(dynsym, "__tvm_dev_mblob")
    if blob is not None:
        data = elf.read_symbol(blob, blob.size) if blob.size else elf.read_sized_blob(blob)
        parsed = parse_module_blob(data, f"__tvm_dev_mblob of {shown!r}")
    return entry, parsed


@functools.cache
def _process_scope() -> ctypes.CDLL:
    """The global symbol scope (``dlopen(NULL)``): where lazy binding looks first."""
    return ctypes.CDLL(None)


def _check_imports_resolve(
    lib: ctypes.CDLL, dynsym: list[ElfSymbol], shown: str, provided: frozenset[str] = frozenset()
) -> None:
    """Fail now, not with a dead process at the first call, if an import cannot be bound.

    ``provided`` names imports the loader redirects itself (GOT patching).
    """
    process = _process_scope()
    missing = []
    for symbol in dynsym:
        if symbol.defined or symbol.bind == "weak" or not symbol.name or symbol.name in provided:
            continue
        try:
            lib[symbol.name]
        except AttributeError:
            try:
                process[symbol.name]
            except AttributeError:
                missing.append(symbol.name)
    if missing:
        hint = ""
        if any(name.startswith("TVM") for name in missing):
            hint = " (TVM runtime functions tvmrt does not provide)"
        raise ModuleLoadError(
            f"cannot load {shown!r}: it needs symbols that nothing in this process "
            f"provides{hint}: {', '.join(sorted(missing))}"
        )


def _fill_slots(lib: ctypes.CDLL, symbols: TvmSymbols | None, slots: dict[str, int]) -> None:
    for name, address in slots.items():
        slot = "__" + name
        if symbols is not None and slot not in symbols.slots:
            continue
        try:
            ctypes.c_void_p.in_dll(lib, slot).value = address
        except ValueError:
            continue  # absent: kernels that never call this service


def _set_module_context(lib: ctypes.CDLL, symbols: TvmSymbols | None, module: Module) -> None:
    try:
        ctx = ctypes.c_void_p.in_dll(lib, "__tvm_module_ctx")
    except ValueError:
        return
    ctx.value = _backend.register_module_context(module)


def _probe_entry(lib: ctypes.CDLL) -> str | None:
    try:
        main = ctypes.c_char.in_dll(lib, "__tvm_main__")
    except ValueError:
        return None
    return ctypes.string_at(ctypes.addressof(main)).decode("utf-8", errors="replace") or None


def _probe_blob(lib: ctypes.CDLL, shown: str) -> ParsedBlob | None:
    try:
        blob = ctypes.c_char.in_dll(lib, "__tvm_dev_mblob")
    except ValueError:
        return None
    address = ctypes.addressof(blob)
    nbytes = int.from_bytes(ctypes.string_at(address, 8), "little")
    data = ctypes.string_at(address, 8 + nbytes)
    return parse_module_blob(data, f"__tvm_dev_mblob of {shown!r}")


def _loadfile_so(path: str) -> Module:
    return load_shared_library(path)


register_func("runtime.module.loadfile_so", _loadfile_so, override=True)
