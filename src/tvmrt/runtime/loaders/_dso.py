"""What every ``dlopen``-ed kernel library shares, whatever its ABI.

:class:`KernelLibrary` (one cached PackedFunc per symbol), the alignment check kernels
need, and the check that a library's imports resolve. The ABI leaves (:mod:`.library`,
:mod:`.ffi`) build on these and do not import each other.
"""

from __future__ import annotations

import _ctypes
import contextlib
import ctypes
import functools
import os
import weakref
from pathlib import Path

from tvmrt.binfmt.binary import ElfFile, ElfSymbol
from tvmrt.binfmt.elf_checks import check_loadable
from tvmrt.error import ArrayError, ModuleLoadError
from tvmrt.runtime.kernel_services import HOST_SYMBOLS
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.packed_func import PackedFunc

__all__ = [
    "KernelLibrary",
    "check_aligned",
    "check_imports_resolve",
    "process_scope",
    "dlopen_checked",
    "unload_with",
    "unload_now",
]

_ALIGNMENT = 64


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


def check_aligned(arr: NDArray, index: int, name: str) -> None:
    if arr.nbytes and arr.data_ptr % _ALIGNMENT:
        raise ArrayError(
            f"function {name!r}: argument {index} has data at {arr.data_ptr:#x}, which is not "
            f"{_ALIGNMENT}-byte aligned as compiled kernels require; copy it into a new array"
        )


@functools.cache
def process_scope() -> ctypes.CDLL:
    """The global symbol scope (``dlopen(NULL)``): where lazy binding looks first."""
    return ctypes.CDLL(None)


def check_imports_resolve(
    lib: ctypes.CDLL, dynsym: list[ElfSymbol], shown: str, provided: frozenset[str] = frozenset()
) -> None:
    """Fail now, not with a dead process at the first call, if an import cannot be bound.

    ``provided`` names imports the loader redirects itself (GOT patching).
    """
    process = process_scope()
    missing = []
    for symbol in dynsym:
        if symbol.defined or symbol.bind == "weak" or not symbol.name or symbol.name in provided:
            continue
        if symbol.name.startswith("TVM") and symbol.name not in HOST_SYMBOLS:
            missing.append(symbol.name)  # the C runtime's API: not the Python engine's
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


# -- library lifetime -----------------------------------------------------------------

_memfds: dict[int, int] = {}  # dlopen handle -> the memfd it was loaded from
_pinned_fds: list[int] = []  # memfds of libraries the loader would not unload


def dlopen_checked(path: str, elf: ElfFile | None, shown: str) -> ctypes.CDLL:
    """``dlopen`` the bytes that were checked, from a private in-memory file (else ``path``).

    The dynamic loader knows a library by its path and by its file's device and inode: a
    library rebuilt at the same path would come back as the old, still-mapped code, and
    a file changed after the check would not be the file checked. A fresh memfd per load
    holding ``elf``'s bytes avoids both. Without memfd (or where it cannot be mapped executable)
    the file itself is loaded.

    First the program headers, dynamic section and the tables it points to are checked
    (:func:`tvmrt.binfmt.elf_checks.check_loadable`): the loader trusts them, and a
    damaged one kills the process inside ``dlopen`` or maps other bytes than were checked.
    """
    data = elf.data if elf is not None else None
    if elf is not None:  # the file the caller parsed: its bytes are the bytes loaded
        check_loadable(elf)
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
