"""The kernel services that call back into Python: ``TVMBackendGetFuncFromEnv`` and ``TVMFuncCall``.

A compiled kernel that calls a packed function by name (a ``call_packed`` extern, rare)
asks ``TVMBackendGetFuncFromEnv`` for it with the token its library holds in
``__tvm_module_ctx``, then calls it with ``TVMFuncCall``. The native backend forwards both
to the two ctypes callbacks here, which :mod:`tvmrt.runtime.kernel_services` installs when
it loads the library; they are kept alive for the life of the process.

A name is looked up in the token's module (and its imports), then in the global registry,
once per function handle: host code calls its kernels through ``TVMFuncCall`` on every
run, so a handle's answer is kept (as TVM's ``ModuleNode`` keeps its ``import_cache_``)
while the token's module lives, and dropped with it. Only answers from an import or the
registry are kept; a function of the token's module itself is looked up on each call, so
that neither the token nor a function handle keeps a module alive: a library is unloaded
when its module goes (``loaders.library.unload_with``).
"""

from __future__ import annotations

import ctypes
import itertools
import threading
import weakref
from collections.abc import Callable
from typing import Any, Protocol

from tvmrt.runtime._ctypes_api import TVMFuncCallType
from tvmrt.runtime.packed_func import PackedFunc
from tvmrt.runtime.packed_values import from_tvm_value, to_tvm_value
from tvmrt.runtime.registry import get_global_func

__all__ = ["FunctionSource", "register_module_context", "install_callbacks", "call_python"]


class FunctionSource(Protocol):
    """What a module context is: something that finds functions by name (a ``Module``)."""

    def find_function(self, name: str, query_imports: bool = False) -> PackedFunc | None: ...


_GetFuncCallback = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)
)

_lock = threading.Lock()
_callbacks: list[Any] = []  # ctypes callback objects: must outlive every kernel library
_set_error: Any = None  # the native TVMAPISetLastError, once installed

# module-context tokens written into __tvm_module_ctx, and function handles for TVMFuncCall:
# (token, name), resolved on each call
_modules: weakref.WeakValueDictionary[int, FunctionSource] = weakref.WeakValueDictionary()
_tokens = itertools.count(1)
_handles: dict[int, tuple[int, str]] = {}
_handle_of: dict[tuple[int, str], int] = {}
_resolved: dict[int, PackedFunc] = {}  # handle -> its function, while the token's module lives
_ret_keepalive = threading.local()


def install_callbacks(lib: ctypes.CDLL) -> None:
    """Point the native backend ``lib``'s function environment at this module's callbacks."""
    global _set_error
    lib.tvmrt_set_env_callbacks.restype = None
    lib.tvmrt_set_env_callbacks.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    _set_error = lib.TVMAPISetLastError
    getfunc = _GetFuncCallback(_get_func_from_env)
    funccall = TVMFuncCallType(_func_call)
    _callbacks.extend([getfunc, funccall])
    lib.tvmrt_set_env_callbacks(
        ctypes.cast(getfunc, ctypes.c_void_p), ctypes.cast(funccall, ctypes.c_void_p)
    )


def register_module_context(module: FunctionSource) -> int:
    """A token for ``__tvm_module_ctx``: kernels pass it back to ``TVMBackendGetFuncFromEnv``.

    The registry holds the module weakly: the library that holds the token lives only as
    long as the module.
    """
    with _lock:
        token = next(_tokens)
        _modules[token] = module
    weakref.finalize(module, _forget, token)
    return token


def _forget(token: int) -> None:
    """Drop the kept answers of a module that is gone."""
    with _lock:
        for handle in [h for h, (t, _) in _handles.items() if t == token]:
            _resolved.pop(handle, None)


def _handle_for(token: int, name: str) -> int:
    with _lock:
        handle = _handle_of.get((token, name))
        if handle is None:
            handle = len(_handles) + 1
            _handles[handle] = (token, name)
            _handle_of[(token, name)] = handle
        return handle


def _lookup(token: int, name: str) -> PackedFunc | None:
    """The function a kernel of the module with ``token`` means by ``name``."""
    module = _modules.get(token)
    func = module.find_function(name, True) if module is not None else None
    return func if func is not None else get_global_func(name, allow_missing=True)


def _resolve(handle: int) -> PackedFunc | None:
    """The function behind a handle from ``_get_func_from_env`` (kept after the first call
    when it comes from an import or the registry, see the module's docstring)."""
    key = _handles.get(handle)
    if key is None:
        return None
    token, name = key
    module = _modules.get(token)
    if module is None:
        return get_global_func(name, allow_missing=True)
    own = module.find_function(name, False)
    if own is not None:
        return own
    func = _lookup(token, name)
    if func is not None:
        with _lock:
            if token in _modules:  # not kept for a module that went meanwhile
                _resolved[handle] = func
    return func


def _report(message: str) -> None:
    """Store ``message`` in the calling thread's error slot, for the kernel to return."""
    _set_error(message.encode("utf-8", errors="replace"))


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _get_func_from_env(mod_ctx: int | None, name: bytes | None, out: Any) -> int:
    try:
        fname = (name or b"").decode("utf-8", errors="replace")
        token = mod_ctx or 0
        func = _lookup(token, fname)
        if func is None:
            _report(
                f"cannot find function {fname!r} in the kernel library, its imports or the "
                "global registry"
            )
            return -1
        # a function implemented in C (runtime/contrib/_native.py): TVMFuncCall runs it directly
        native = getattr(func, "native_handle", None)
        out[0] = native if native is not None else _handle_for(token, fname)
        return 0
    except BaseException as exc:  # a ctypes callback must not raise: report it to the kernel
        _report(_error_text(exc))
        return -1


def _func_call(
    handle: int | None, args: Any, codes: Any, num_args: int, ret_val: Any, ret_code: Any
) -> int:
    try:
        func = _resolved.get(handle or 0) or _resolve(handle or 0)
        if func is None:
            _report(f"TVMFuncCall: invalid function handle {handle}")
            return -1
        raw = getattr(func, "raw_call", None)
        if raw is not None:  # a compiled kernel: hand the C arguments straight through
            return int(raw(args, codes, num_args, ret_val, ret_code))
    except BaseException as exc:  # a ctypes callback must not raise: report it to the kernel
        _report(_error_text(exc))
        return -1
    return call_python(func, args, codes, num_args, ret_val, ret_code)


def call_python(
    func: Callable[..., Any], args: Any, codes: Any, num_args: int, ret_val: Any, ret_code: Any
) -> int:
    """``func`` called by C with TVMFuncCall's arguments: 0 with its result in ``ret_val``,
    or -1 with the error in the thread's error slot (a ctypes callback must not raise)."""
    try:
        values = [from_tvm_value(args[i], codes[i]) for i in range(num_args)]
        keep = to_tvm_value(func(*values), ret_val, ret_code)
        _ret_keepalive.value = keep  # a returned string must outlive this call
        return 0
    except BaseException as exc:
        _report(_error_text(exc))
        return -1
