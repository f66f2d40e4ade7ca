"""The legacy-ABI leaf: kernel libraries of TVM <= 0.20 (packed functions).

:mod:`.dispatch` hands over a shared library whose symbols say ``legacy`` (including
``system-lib`` builds, which register their functions at load time). The steps follow
TVM's ``src/runtime/dso_library.cc`` / ``library_module.cc``, with checks first so
that a wrong file fails with a clear :class:`~tvmrt.error.ModuleLoadError` before any of
its code runs:

1. (the dispatcher) identify the file: ELF for this machine and OS;
2. (the dispatcher) read its dynamic symbols: which ABI, which slots, which imports;
3. read ``__tvm_main__`` and parse ``__tvm_dev_mblob`` from the file; a system-lib's
   constructor imports must resolve before ``dlopen`` runs them;
4. ``dlopen`` with ``RTLD_LAZY | RTLD_LOCAL`` and check every symbol it imports resolves;
5. write the backend's addresses into the ``__TVM*`` slots and a module token into
   ``__tvm_module_ctx``;
6. put the library module in place of ``_lib`` in the blob's module tree; return the root.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Sequence
from typing import Any

from tvmrt.binfmt.abi import LibraryFacts, TvmSymbols
from tvmrt.binfmt.binary import ElfFile, ElfSymbol
from tvmrt.binfmt.files import file_identity
from tvmrt.error import ArgumentTypeError, KernelError, ModuleLoadError
from tvmrt.runtime import kernel_callbacks, kernel_services, packed_values
from tvmrt.runtime._ctypes_api import ArgTypeCode, TVMValue
from tvmrt.runtime.loaders import needs
from tvmrt.runtime.loaders._dso import (
    KernelLibrary,
    check_aligned,
    check_imports_resolve,
    dlopen_checked,
    process_scope,
    unload_now,
    unload_with,
)
from tvmrt.runtime.loaders.blob import ParsedBlob, assemble_modules, parse_module_blob
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.packed_func import PackedFunc, PreparedCall

__all__ = [
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
_NULL_CODE = 4


def _make_errcheck(name: str) -> Any:
    def errcheck(result: int, func: object, arguments: object) -> int:
        if result != 0:
            message = kernel_services.take_last_error().rstrip()
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
        cfunc = _PackedCFunc(kernel_services.call_packed_address())
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
                check_aligned(arg, i, self.name)
        values, codes, keep = packed_values.pack_args(args)
        ret = (TVMValue * 1)()
        ret_code = (ctypes.c_int * 1)(_NULL_CODE)
        self._func(self._kernel, values, codes, len(args), ret, ret_code)
        result = packed_values.from_tvm_value(ret[0], ret_code[0])
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
                raise ArgumentTypeError(
                    f"function {self.name!r}: argument {i} must be an NDArray, "
                    f"got {type(arg).__name__}"
                )
            check_aligned(arg, i, self.name)
            values[i].v_handle = ctypes.addressof(arg.dltensor())
            codes[i] = ArgTypeCode.DLTENSOR_HANDLE
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

# Libraries that registered symbols with TVMBackendRegisterSystemLibSymbol: the registry
# holds addresses inside them, so they stay loaded for the life of the process (TVM crashes
# when such a library is unloaded and system_lib() is used; tvmrt never unloads them).
_PINNED: list[ctypes.CDLL] = []


def load_shared_library(facts: LibraryFacts) -> Module:
    """Load a legacy kernel library and the modules it imports; return the root module.

    Parameters
    ----------
    facts
        The file and what its header and symbols say (:func:`~.abi.read_library`).

    Raises
    ------
    ModuleLoadError
        If the library is not a TVM module, imports symbols nobody provides, or its module
        blob is unusable.
    """
    path, shown, elf, dynsym, symbols = (
        facts.path,
        facts.shown,
        facts.elf,
        facts.dynsym,
        facts.symbols,
    )
    entry: str | None = None
    parsed: ParsedBlob | None = None
    if symbols is not None:
        _check_abi(symbols, shown)
        if symbols.system_lib or kernel_services.PROVIDED_SYMBOLS.intersection(symbols.undefined):
            kernel_services.make_global()  # imported by name: resolved from the global scope
        if symbols.system_lib:
            _check_constructor_imports(symbols, shown)
        assert elf is not None
        entry, parsed = _read_from_file(elf, dynsym, symbols, shown)
    slots = kernel_services.slot_addresses()  # loads the native backend before the library
    lib = dlopen_checked(path, elf, shown)
    try:
        if symbols is not None and symbols.system_lib:
            _PINNED.append(lib)  # its functions stay registered: never unloaded
        if dynsym:
            check_imports_resolve(lib, dynsym, shown)
        if symbols is None:  # no symbol table: probe like TVM does
            entry = _probe_entry(lib)
            parsed = _probe_blob(lib, shown)
    except BaseException:
        unload_now(lib)
        raise
    module = LibraryModule(shown, lib, symbols, entry)
    if symbols is None or not symbols.system_lib:
        unload_with(module, lib)
    _fill_slots(lib, symbols, slots)
    _set_module_context(lib, symbols, module)
    root = assemble_modules(parsed, module) if parsed is not None else module
    if elf is not None:  # every function a kernel looks up by name exists (loaders/needs.py)
        needs.check_functions(module, elf, shown)
    if symbols is not None:
        with contextlib.suppress(OSError):  # gone already: a refusal reads it and says so
            root._file_symbols = (file_identity(path), symbols)
    # TVM 0.7/0.8 link-params weights: the blob's factory reads them when the library
    # becomes its import (graph_executor/factory.py, over graph_executor/linked.py)
    return root


def _check_constructor_imports(symbols: TvmSymbols, shown: str) -> None:
    """A system-lib's static constructors call TVM functions inside ``dlopen``: an import
    nobody provides would kill the process there, so check them before loading."""
    process = process_scope()
    missing = []
    for name in symbols.undefined:
        if not name.startswith("TVM"):
            continue
        try:
            process[name]
        except AttributeError:
            missing.append(name)
    if missing:
        raise ModuleLoadError(
            f"cannot load {shown!r}: it is a system-lib library (built with system-lib; it "
            "registers its functions while it is loaded) and needs TVM runtime functions "
            f"tvmrt does not provide: {', '.join(sorted(missing))}"
        )


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
    elf: ElfFile, dynsym: list[ElfSymbol], symbols: TvmSymbols, shown: str
) -> tuple[str | None, ParsedBlob | None]:
    """``__tvm_main__`` and the parsed module blob, read from the file's bytes."""
    entry = None
    main = _find(dynsym, "__tvm_main__")
    if main is not None:
        entry = elf.read_cstring(main) or None
    parsed = None
    blob = _find(dynsym, symbols.blob_symbol) if symbols.blob_symbol else None
    if blob is not None:
        data = elf.read_symbol(blob, blob.size) if blob.size else elf.read_sized_blob(blob)
        parsed = parse_module_blob(data, f"{symbols.blob_symbol} of {shown!r}")
    return entry, parsed


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
    ctx.value = kernel_callbacks.register_module_context(module)


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
