"""``system_lib()``: the process-wide module of functions registered at load time.

Code built with ``system-lib`` (``Runtime("cpp", {"system-lib": True})``, ``--system-lib``)
does not wait to be looked up: a static constructor of each object calls
``TVMBackendRegisterSystemLibSymbol(name, address)`` for every kernel and for
``__tvm_dev_mblob`` while the library is being loaded. tvmrt's native backend keeps that
table (the backend is made global before such a library is loaded, so the constructor
finds the function). This module turns the table into TVM's system library:

* ``system_lib(prefix)`` looks a name up as ``prefix + name`` first, then as ``name``
  (v0.19's ``SystemLibrary::GetSymbol``), and falls back to functions registered from
  Python with :func:`~tvmrt.runtime.module.register_system_lib_func`;
* when a blob was registered, the module tree it describes is rebuilt around the system
  library, and the root's functions (a factory's ``default``, ``get_graph_json``, ...)
  are found through the system library too: ``system_lib()["default"](dev)`` creates the
  executor as in TVM, where ``system_lib()`` returns the root itself;
* one module per prefix, rebuilt only when something new was registered;
* ``runtime.SystemLib`` and ``module._GetSystemLib`` are the global functions.
"""

from __future__ import annotations

import ctypes
import threading

from tvmrt.error import ArgumentTypeError, ModuleLoadError
from tvmrt.runtime import kernel_callbacks, kernel_services
from tvmrt.runtime.loaders.blob import assemble_modules, parse_module_blob
from tvmrt.runtime.loaders.library import LegacyPackedFunc
from tvmrt.runtime.module import Module, python_system_lib
from tvmrt.runtime.packed_func import PackedFunc

__all__ = ["SystemLibModule", "get_system_lib", "registered_names", "lookup_symbol"]

_BLOB = "__tvm_dev_mblob"
_MODULE_CTX = "__tvm_module_ctx"
_MAX_BLOB_BYTES = 1 << 34  # a registered blob claiming more is corrupt

_lock = threading.Lock()
_modules: dict[str, tuple[int, Module]] = {}  # prefix -> (generation, root module)
_declared = False


def _native() -> ctypes.CDLL:
    global _declared
    lib = kernel_services.native_library()
    if not _declared:
        lib.tvmrt_system_lib_lookup.restype = ctypes.c_void_p
        lib.tvmrt_system_lib_lookup.argtypes = [ctypes.c_char_p]
        lib.tvmrt_system_lib_generation.restype = ctypes.c_int64
        lib.tvmrt_system_lib_generation.argtypes = []
        lib.tvmrt_system_lib_name.restype = ctypes.c_char_p
        lib.tvmrt_system_lib_name.argtypes = [ctypes.c_int64]
        _declared = True
    return lib


def lookup_symbol(name: str) -> int:
    """The address registered under ``name`` exactly (0 if none)."""
    return int(_native().tvmrt_system_lib_lookup(name.encode()) or 0)


def registered_names() -> list[str]:
    """Every name registered with ``TVMBackendRegisterSystemLibSymbol`` so far."""
    lib = _native()
    names = []
    index = 0
    while (raw := lib.tvmrt_system_lib_name(index)) is not None:
        names.append(raw.decode("utf-8", errors="replace"))
        index += 1
    return names


class SystemLibModule(Module):
    """The system library seen through one symbol prefix (TVM's ``SystemLibrary``)."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix
        self._cache: dict[str, PackedFunc] = {}
        self.root: Module | None = None  # the blob's root module, if a blob was registered

    @property
    def type_key(self) -> str:
        return "system_lib"

    def __repr__(self) -> str:
        return f"SystemLibModule(prefix={self.prefix!r})"

    def symbol_address(self, name: str) -> int:
        """``prefix + name`` if registered, else ``name`` (0 if neither)."""
        if self.prefix:
            address = lookup_symbol(self.prefix + name)
            if address:
                return address
        return lookup_symbol(name)

    def _get_function(self, name: str) -> PackedFunc | None:
        func = self._cache.get(name)
        if func is not None:
            return func
        address = self.symbol_address(name) if not name.startswith("__") else 0
        if address:
            func = LegacyPackedFunc(address, name, self)
            self._cache[name] = func
            return func
        if self.root is not None and self.root is not self:
            found = self.root.find_function(name)
            if found is not None:
                return found
        python = python_system_lib()
        if self.prefix:
            found = python.find_function(self.prefix + name)
            if found is not None:
                return found
        return python.find_function(name)


def _build(prefix: str) -> Module:
    library = SystemLibModule(prefix)
    # like TVM's InitContextFunctions over the registry: slots some builds register
    for name, address in kernel_services.slot_addresses().items():
        slot = library.symbol_address("__" + name)
        if slot:
            ctypes.c_void_p.from_address(slot).value = address
    ctx = library.symbol_address(_MODULE_CTX)
    if ctx:
        ctypes.c_void_p.from_address(ctx).value = kernel_callbacks.register_module_context(library)
    blob = library.symbol_address(_BLOB)
    if not blob:
        return library
    nbytes = int.from_bytes(ctypes.string_at(blob, 8), "little")
    what = f"the system library's {_BLOB}"
    if nbytes > _MAX_BLOB_BYTES:
        raise ModuleLoadError(f"{what} claims {nbytes} bytes: it is corrupt")
    data = ctypes.string_at(blob, 8 + nbytes)
    library.root = assemble_modules(parse_module_blob(data, what), library)
    return library


def get_system_lib(symbol_prefix: str = "") -> Module:
    """The system library for ``symbol_prefix`` (built once per registration generation).

    Raises
    ------
    ModuleLoadError
        If a registered module blob is corrupt.
    """
    generation = int(_native().tvmrt_system_lib_generation())
    with _lock:
        cached = _modules.get(symbol_prefix)
        if cached is not None and cached[0] == generation:
            return cached[1]
        module = _build(symbol_prefix)
        _modules[symbol_prefix] = (generation, module)
        return module


def global_system_lib(*args: object) -> Module:
    prefix = args[0] if args else ""
    if not isinstance(prefix, str):
        raise ArgumentTypeError(f"runtime.SystemLib takes a symbol prefix string, got {prefix!r}")
    return get_system_lib(prefix)
