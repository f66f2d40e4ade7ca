"""Kernel services: what compiled kernels call into (workspace, parallel launch, errors).

The services live in tvmrt's one native library, ``tvmrt/lib/libtvmrt_runtime.so``
(``src/tvmrt/_native/services.c`` and its neighbours, beside the C runtime): a 64-byte
aligned caching workspace allocator, a persistent pthread pool for
``TVMBackendParallelLaunch``, and the thread-local error slot. Python loads it here with
ctypes; the C runtime's engines (the Relay VM, ...) and C programs use the same library, so a
process holds one copy of the services, one pool and one error slot per thread, whoever
loaded it first. One implementation serves both kernel ABIs. Loaders write the addresses
from :func:`slot_addresses` (legacy) or :func:`ffi_symbol_addresses` (tvm-ffi) into a kernel
library's ``__TVMBackend*`` / ``__TVMFFI*`` slots, or into the GOT entries of the names it
imports; kernels then call into C without touching Python. :func:`make_kernel_call` builds
the native object (``tvmrt._native_backend``, CPython glue that links nothing of the
library) the graph executor calls once per tvm-ffi kernel.

The library's names are global (``RTLD_GLOBAL``) from ``import tvmrt`` on, as libtvm's are
after ``import tvm``: a library that *imports* the backend functions by name (a system
library, C-target kernels: undefined ``TVMBackendRegisterSystemLibSymbol``,
``TVMBackendAllocWorkspace``, ...) then resolves them here however it is loaded, by
:func:`~tvmrt.runtime.load_module` or by ``ctypes.CDLL`` (TVM's way to fill
``system_lib()`` from Python). Only the ``dlopen`` happens at import; the library is set up
(its thread pool sized, its callbacks installed) on first use. Two cases keep the names
local until :func:`make_global` needs them (a library importing them is loaded), because
global definitions take precedence for every library loaded later: a TVM runtime already in
the process (``libtvm_runtime.so`` or ``libtvm.so`` mapped: its own names answer), and
``TVMRT_LOCAL_SYMBOLS=1``, for a process that imports a real TVM after tvmrt and wants
that TVM's own calls to reach its own error slot and pools. The tvm-ffi error entry points
are exported under ``tvmrt_``-prefixed names for the same reason.

Only ``TVMBackendGetFuncFromEnv`` and ``TVMFuncCall`` (``call_packed`` externs, rare)
come back into Python, through the callbacks of :mod:`tvmrt.runtime.kernel_callbacks`, and
only for the module contexts and handles Python made (the C runtime answers for its own); a
lookup that finds a function implemented in C (the ``tvm.contrib.sort`` family,
``src/tvmrt/_native/sort.c``) hands out its native handle, which ``TVMFuncCall`` runs
without Python.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tvmrt.error import ArgumentTypeError, InvalidArgumentError, ModuleLoadError, TVMError
from tvmrt.runtime.kernel_callbacks import install_callbacks
from tvmrt.runtime.threads import default_num_threads, max_threads

__all__ = [
    "config_threadpool",
    "BackendStats",
    "available",
    "library_path",
    "native_library",
    "make_global",
    "binds_globally",
    "num_threads",
    "set_num_threads",
    "set_spin_count",
    "slot_addresses",
    "ffi_error_addresses",
    "ffi_symbol_addresses",
    "make_kernel_call",
    "glue",
    "call_packed_address",
    "take_last_error",
    "take_last_error_with_kind",
    "set_last_error",
    "clear_last_error",
    "stats",
    "reset_stats",
    "release_workspace_cache",
]

_EXTENSION = "tvmrt._native_backend"
_LIBRARY = Path(__file__).resolve().parents[1] / "lib" / "libtvmrt_runtime.so"

# Context slots a kernel library may define ("__" + name), and the C function for each.
SLOT_FUNCTIONS = (
    "TVMFuncCall",
    "TVMAPISetLastError",
    "TVMBackendGetFuncFromEnv",
    "TVMBackendAllocWorkspace",
    "TVMBackendFreeWorkspace",
    "TVMBackendParallelLaunch",
    "TVMBackendParallelBarrier",
)
# Functions a C-target kernel library may import by name (resolved once the backend is global).
PROVIDED_SYMBOLS = frozenset(SLOT_FUNCTIONS)
# The TVM* functions a library Python loads may import: the services above and the system
# library's registration. The native library also exports the C runtime's API (TVMArrayAlloc,
# ...), whose objects the Python engine does not take: an import of one is refused by name.
HOST_SYMBOLS = PROVIDED_SYMBOLS | {"TVMBackendRegisterSystemLibSymbol"}

# What tvm-ffi kernel libraries may call, by the C name they use (as a "__" + name slot, or
# as an undefined import whose GOT entry the loader patches), and the backend function
# serving it. The lookups (call_packed externs) report an error: tvmrt has no tvm-ffi
# function objects to give kernels.
FFI_FUNCTIONS = {
    "TVMBackendAllocWorkspace": "TVMBackendAllocWorkspace",
    "TVMBackendFreeWorkspace": "TVMBackendFreeWorkspace",
    "TVMBackendParallelLaunch": "TVMBackendParallelLaunch",
    "TVMBackendParallelBarrier": "TVMBackendParallelBarrier",
    "TVMFFIErrorSetRaisedFromCStr": "tvmrt_ffi_error_set_raised_from_cstr",
    "TVMFFIErrorSetRaisedFromCStrParts": "tvmrt_ffi_error_set_raised_from_cstr_parts",
    "TVMFFIHandleInitOnce": "tvmrt_ffi_handle_init_once",
    "TVMBackendGetFuncFromEnv": "tvmrt_ffi_get_func_from_env",
    "TVMFFIEnvModLookupFromImports": "tvmrt_ffi_env_mod_lookup_from_imports",
    "TVMFFIFunctionCall": "tvmrt_ffi_function_call",
}

_STAT_NAMES = (
    "workspace_allocs",
    "workspace_frees",
    "workspace_system_allocs",
    "workspace_bytes_cached",
    "workspace_bytes_in_use",
    "launches",
    "serial_launches",
    "barriers",
)

_lock = threading.RLock()
_lib: ctypes.CDLL | None = None
_global = False


@dataclass(frozen=True)
class BackendStats:
    """Counters of the native backend since the last :func:`reset_stats`.

    Attributes
    ----------
    workspace_allocs, workspace_frees
        ``TVMBackendAllocWorkspace`` / ``FreeWorkspace`` calls.
    workspace_system_allocs
        Allocations the cache could not serve (each one a ``posix_memalign``).
    workspace_bytes_cached
        Bytes held in the per-thread free lists now (a gauge, not reset).
    workspace_bytes_in_use
        Bytes handed out and not freed yet (a gauge, not reset).
    launches
        ``TVMBackendParallelLaunch`` calls.
    serial_launches
        Launches that ran on the calling thread alone (one thread, nested or concurrent).
    barriers
        ``TVMBackendParallelBarrier`` calls.
    """

    workspace_allocs: int
    workspace_frees: int
    workspace_system_allocs: int
    workspace_bytes_cached: int
    workspace_bytes_in_use: int
    launches: int
    serial_launches: int
    barriers: int


def library_path() -> str:
    """Path of the native library (``tvmrt/lib/libtvmrt_runtime.so``).

    Raises
    ------
    ModuleLoadError
        If the package was installed without building it.
    """
    if not _LIBRARY.is_file():
        raise ModuleLoadError(
            f"tvmrt's native library {_LIBRARY} is not built; reinstall tvmrt with a C "
            "compiler available (pip install -e . builds it)"
        )
    return str(_LIBRARY)


def native_library() -> ctypes.CDLL:
    """The loaded native backend (loaded on first use)."""
    lib = _lib
    if lib is not None:
        return lib
    with _lock:
        if _lib is None:
            _load(library_path())
        assert _lib is not None
        return _lib


def available() -> bool:
    """Whether the native backend can be loaded."""
    try:
        native_library()
    except (ModuleLoadError, OSError):
        return False
    return True


def _load(path: str) -> None:
    global _lib
    try:
        lib = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
    except OSError as exc:
        raise ModuleLoadError(f"cannot load tvmrt's native library {path!r}: {exc}") from exc
    c_int, c_char_p = ctypes.c_int, ctypes.c_char_p
    lib.tvmrt_get_num_threads.restype = c_int
    lib.tvmrt_get_num_threads.argtypes = []
    lib.tvmrt_set_num_threads.restype = c_int
    lib.tvmrt_set_num_threads.argtypes = [c_int]
    lib.tvmrt_set_spin_count.restype = None
    lib.tvmrt_set_spin_count.argtypes = [c_int]
    lib.tvmrt_take_last_error.restype = c_char_p
    lib.tvmrt_take_last_error.argtypes = [ctypes.POINTER(c_char_p)]
    lib.TVMAPISetLastError.restype = None
    lib.TVMAPISetLastError.argtypes = [c_char_p]
    lib.tvmrt_get_stats.restype = c_int
    lib.tvmrt_get_stats.argtypes = [ctypes.POINTER(ctypes.c_int64), c_int]
    lib.tvmrt_reset_stats.restype = None
    lib.tvmrt_reset_stats.argtypes = []
    lib.tvmrt_release_workspace_cache.restype = None
    lib.tvmrt_release_workspace_cache.argtypes = []
    lib.tvmrt_time_call_sequence.restype = ctypes.c_int64
    lib.tvmrt_time_ffi_call_sequence.restype = ctypes.c_int64
    lib.tvmrt_time_empty_launch.restype = ctypes.c_double
    lib.tvmrt_time_empty_launch.argtypes = [c_int]
    lib.tvmrt_time_workspace.restype = ctypes.c_double
    lib.tvmrt_time_workspace.argtypes = [ctypes.c_uint64, c_int]
    install_callbacks(lib)
    lib.tvmrt_clear_last_error.restype = None
    lib.tvmrt_clear_last_error.argtypes = []
    _resize_pool(lib, default_num_threads())  # the environment is parsed on this side only
    glue().bind_runtime(_address(lib, "tvmrt_clear_last_error"))
    _lib = lib


def glue() -> Any:
    """``tvmrt._native_backend``: the prepared calls (ModuleLoadError if it is not built)."""
    try:
        return importlib.import_module(_EXTENSION)
    except ImportError as exc:
        raise ModuleLoadError(
            f"tvmrt's CPython glue {_EXTENSION!r} is not built; reinstall tvmrt with a C "
            "compiler available (pip install -e . builds it)"
        ) from exc


def make_global() -> None:
    """Make the backend's symbols visible to libraries loaded from now on (``RTLD_GLOBAL``).

    Needed before loading a library that imports ``TVMBackendAllocWorkspace`` & co. by name
    (C-target kernels) instead of using the ``__TVMBackend*`` slots.
    """
    global _global
    native_library()
    with _lock:
        if not _global:
            mode = os.RTLD_NOW | os.RTLD_GLOBAL | getattr(os, "RTLD_NOLOAD", 0)
            ctypes.CDLL(library_path(), mode=mode)
            _global = True


def binds_globally(name: str) -> bool:
    """Whether the process's global scope binds ``name`` to the native library's own
    definition: what a library loaded now that imports ``name`` would call (False when the
    names are local, another runtime defines it first, or the library has no such name)."""
    try:
        process = ctypes.cast(getattr(ctypes.CDLL(None), name), ctypes.c_void_p).value
        ours = ctypes.cast(getattr(native_library(), name), ctypes.c_void_p).value
    except AttributeError:
        return False
    return process is not None and process == ours


def _tvm_runtime_loaded() -> bool:
    """Whether a TVM runtime library (libtvm_runtime.so, libtvm.so) is mapped in the process."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            return any("/libtvm_runtime." in line or "/libtvm." in line for line in maps)
    except OSError:  # no procfs: judge by a TVM package imported
        return "tvm" in sys.modules


def _export_at_import() -> None:
    """Make the library's names global now, unless a TVM runtime or the environment says
    not to (the module docstring says why); a library that is not built is left alone."""
    global _global
    if os.environ.get("TVMRT_LOCAL_SYMBOLS", "") not in ("", "0") or _tvm_runtime_loaded():
        return
    if not _LIBRARY.is_file():
        return  # native_library() says so on first use
    try:
        ctypes.CDLL(str(_LIBRARY), mode=os.RTLD_NOW | os.RTLD_GLOBAL)
    except OSError:
        return  # native_library() raises the loader's words on first use
    _global = True


_export_at_import()


# -- threads ----------------------------------------------------------------------------


def num_threads() -> int:
    """Threads of the worker pool (the launching thread included)."""
    try:
        lib = native_library()
    except ModuleLoadError:
        return default_num_threads()
    return int(lib.tvmrt_get_num_threads())


def set_num_threads(n: int) -> None:
    """Resize the worker pool to ``n`` threads (``0``: back to the environment's default).

    The default is ``TVM_NUM_THREADS``, else ``OMP_NUM_THREADS``, else the CPUs this
    process may run on (:mod:`tvmrt.runtime.threads`). The workers start now; a launch in
    progress finishes first. If the system refuses some threads, the pool keeps those it
    started and a ``RuntimeWarning`` says so.

    Raises
    ------
    ValueError
        If ``n`` is negative or above :func:`tvmrt.runtime.threads.max_threads`.
    TVMError
        If called from inside a parallel task.
    """
    if isinstance(n, bool) or not isinstance(n, int):
        raise ArgumentTypeError(f"number of threads must be an int, got {type(n).__name__}")
    if n < 0:
        raise InvalidArgumentError(f"number of threads must be >= 0 (0 = default), got {n}")
    if n > max_threads():
        raise InvalidArgumentError(
            f"number of threads must be at most {max_threads()} (4 per CPU this process may "
            f"use, at least 64), got {n}"
        )
    _resize_pool(native_library(), n or default_num_threads())


# TVM's threading::ThreadGroup::AffinityMode values
_AFFINITY_MODES = {1: "big", -1: "little", -2: "one core per thread", -3: "threads share cores"}


def config_threadpool(mode: int, nthreads: int, cpus: Sequence[object] = ()) -> None:
    """The global ``runtime.config_threadpool`` (TVM's): ``nthreads`` workers (0 or less: the
    default), for affinity ``mode`` over ``cpus``.

    tvmrt's pool does not pin its threads, so the mode and the CPU list are checked (as
    TVM's, a CPU must be a number) and otherwise have no effect (docs/tvm-compat.md).

    Raises
    ------
    ValueError
        If ``mode`` is not one of TVM's, a CPU is not a number, or ``nthreads`` is too large.
    """
    if int(mode) not in _AFFINITY_MODES:
        raise InvalidArgumentError(
            f"config_threadpool: affinity mode {mode} is not one of TVM's "
            f"({', '.join(f'{k}: {v}' for k, v in _AFFINITY_MODES.items())})"
        )
    for cpu in cpus:
        if not str(cpu).isdigit():
            raise InvalidArgumentError(f"The CPU core information '{cpu}' is not a number.")
    set_num_threads(max(int(nthreads), 0))


def _resize_pool(lib: ctypes.CDLL, n: int) -> None:
    lib.tvmrt_clear_last_error()
    reached = int(lib.tvmrt_set_num_threads(n))
    if reached < 0 or reached < n:  # the library may not be published yet: read it here
        message = (lib.tvmrt_take_last_error(None) or b"").decode("utf-8", errors="replace")
        if reached < 0:
            raise TVMError(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def set_spin_count(n: int) -> None:
    """Iterations an idle worker spins before it sleeps (TVM's ``TVM_THREAD_POOL_SPIN_COUNT``)."""
    native_library().tvmrt_set_spin_count(max(int(n), 0))


# -- context slots and errors ----------------------------------------------------------------


def _address(lib: ctypes.CDLL, name: str) -> int:
    address = ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
    assert address is not None
    return address


def slot_addresses() -> dict[str, int]:
    """C addresses to write into a kernel library's context slots.

    Returns
    -------
    dict[str, int]
        Slot name without the ``__`` prefix (``"TVMBackendAllocWorkspace"``) → address.
    """
    lib = native_library()
    return {name: _address(lib, name) for name in SLOT_FUNCTIONS}


def ffi_error_addresses() -> dict[str, int]:
    """C addresses of the tvm-ffi error setters, for the tvm-ffi loader.

    Keys are tvm-ffi's names; the functions have the same signatures but are exported as
    ``tvmrt_ffi_error_set_raised_from_cstr[_parts]`` so that a later ``import tvm_ffi``
    is not interposed. The loader writes ``TVMFFIErrorSetRaisedFromCStr`` into the
    ``__TVMFFIErrorSetRaisedFromCStr`` slot and patches the GOT entry of an undefined
    ``TVMFFIErrorSetRaisedFromCStrParts``; :func:`take_last_error_with_kind` then returns
    ``(kind, message)``.
    """
    lib = native_library()
    setters = ("TVMFFIErrorSetRaisedFromCStr", "TVMFFIErrorSetRaisedFromCStrParts")
    return {name: _address(lib, FFI_FUNCTIONS[name]) for name in setters}


def ffi_symbol_addresses() -> dict[str, int]:
    """C addresses of the services a tvm-ffi kernel library may use, by tvm-ffi's names.

    Keys are the names of :data:`FFI_FUNCTIONS`: a loader writes each address into the
    ``"__" + name`` slot where the library defines one, and into the GOT entry of an
    undefined ``name``. The error setters and the lookups are exported under private
    ``tvmrt_ffi_*`` names (see :func:`ffi_error_addresses`).
    """
    lib = native_library()
    return {ffi_name: _address(lib, name) for ffi_name, name in FFI_FUNCTIONS.items()}


def call_packed_address() -> int:
    """Address of ``tvmrt_call_packed(f, args, codes, n, ret, ret_code)``: clears the calling
    thread's error slot, then calls the legacy packed function ``f``."""
    return _address(native_library(), "tvmrt_call_packed")


def make_kernel_call(
    func: int, args: int, num_args: int, result: int, on_error: Callable[[], object], keep: object
) -> Callable[[], None]:
    """A prepared tvm-ffi kernel call: calling it (no arguments) runs the kernel.

    Calling it releases the GIL and runs ``func(NULL, args, num_args, result)`` in C
    (``result`` is reset to None first); a non-zero status calls ``on_error()``, which must
    raise. ``keep`` holds the memory behind ``args`` and ``result`` for the object's life.
    About 50 ns per call, where a ctypes call costs 280-350 ns (bench/README.md).
    """
    native_library()  # the services the kernel calls into are set up
    call: Callable[[], None] = glue().make_kernel_call(func, args, num_args, result, on_error, keep)
    return call


def take_last_error_with_kind() -> tuple[str, str]:
    """This thread's last kernel error as ``(kind, message)``, clearing it.

    ``kind`` is ``""`` for legacy kernels (``TVMAPISetLastError``) and the error class
    name (``"ValueError"``) for tvm-ffi kernels; ``message`` is ``""`` if none was set.
    """
    kind = ctypes.c_char_p()
    message = native_library().tvmrt_take_last_error(ctypes.byref(kind))
    if message is None:
        return "", ""
    text = message.decode("utf-8", errors="replace")
    return (kind.value or b"").decode("utf-8", errors="replace"), text


def take_last_error() -> str:
    """This thread's last kernel error message, clearing it (``""`` if none)."""
    return take_last_error_with_kind()[1]


def clear_last_error() -> None:
    """Empty this thread's error slot (done before every kernel call)."""
    native_library().tvmrt_clear_last_error()


def set_last_error(message: str) -> None:
    """Store ``message`` in this thread's error slot (what a failing kernel does)."""
    native_library().TVMAPISetLastError(message.encode("utf-8", errors="replace"))


# -- statistics ----------------------------------------------------------------------------


def stats() -> BackendStats:
    """Current counters of the native backend."""
    values = (ctypes.c_int64 * len(_STAT_NAMES))()
    native_library().tvmrt_get_stats(values, len(_STAT_NAMES))
    return BackendStats(**{name: int(v) for name, v in zip(_STAT_NAMES, values, strict=True)})


def reset_stats() -> None:
    """Zero the event counters (the byte gauges keep their values)."""
    native_library().tvmrt_reset_stats()


def release_workspace_cache() -> None:
    """Free the calling thread's cached workspace blocks."""
    native_library().tvmrt_release_workspace_cache()
