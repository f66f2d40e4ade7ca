"""The global function registry: TVM's ``register_func`` / ``get_global_func`` table.

The registry is also how plug-ins are found: module loaders are registered as
``runtime.module.loadfile_<format>`` and compiled kernels may call registered
functions through ``TVMBackendGetFuncFromEnv``. tvmrt's own functions are not registered
at import: they are listed in :mod:`tvmrt.runtime.builtins` and imported the first time
their name is looked up; a function registered under the same name replaces one.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import Any, Literal, TypeVar, overload

from tvmrt.error import (
    ArgumentTypeError,
    FunctionAlreadyRegisteredError,
    FunctionNotFoundError,
    GlobalFunctionNotFoundError,
    InvalidArgumentError,
)
from tvmrt.runtime.builtins import BUILTIN_FUNCTIONS
from tvmrt.runtime.packed_func import PackedFunc

__all__ = [
    "register_func",
    "get_global_func",
    "list_global_func_names",
    "remove_global_func",
    "register_extension",
]

_F = TypeVar("_F", bound=Callable[..., Any])

_functions: dict[str, PackedFunc] = {}
# tvmrt's own functions not imported yet (name -> "module:attribute"); removed once loaded
_builtins: dict[str, str] = dict(BUILTIN_FUNCTIONS)
_lock = threading.Lock()


@overload
def register_func(func_name: _F, f: None = None, override: bool = False) -> _F: ...
@overload
def register_func(func_name: str, f: None = None, override: bool = False) -> Callable[[_F], _F]: ...
@overload
def register_func(func_name: str, f: _F, override: bool = False) -> _F: ...


def register_func(
    func_name: str | Callable[..., Any],
    f: Callable[..., Any] | None = None,
    override: bool = False,
) -> Any:
    """Register a global function under ``func_name``.

    Use it directly, ``register_func("my.add", fn)``, or as a decorator, with a name
    (``@register_func("my.add")``) or without (``@register_func`` uses ``__name__``).

    Parameters
    ----------
    func_name
        The name to register, or the function itself (decorator without arguments).
    f
        The function, for the direct form.
    override
        Replace an existing registration instead of raising.

    Raises
    ------
    FunctionAlreadyRegisteredError
        If the name is taken and ``override`` is false (an ``InternalError``, as TVM's
        failed check, and a ``ValueError``).
    """
    if callable(func_name):
        fn = func_name
        _register(fn.__name__, fn, override)
        return fn
    if not isinstance(func_name, str):
        raise ArgumentTypeError(f"function name must be a str, got {type(func_name).__name__}")
    name = func_name
    if f is not None:
        _register(name, f, override)
        return f

    def decorator(fn: _F) -> _F:
        _register(name, fn, override)
        return fn

    return decorator


def _register(name: str, fn: Callable[..., Any], override: bool) -> None:
    packed = fn if isinstance(fn, PackedFunc) else PackedFunc(fn, name)
    with _lock:
        if name in _functions and not override:
            raise FunctionAlreadyRegisteredError(
                f"global function {name!r} is already registered; pass override=True to replace it"
            )
        _builtins.pop(name, None)
        _functions[name] = packed


def _load_builtin(name: str) -> PackedFunc | None:
    """Import tvmrt's own function ``name`` (from :mod:`tvmrt.runtime.builtins`)."""
    target = _builtins.get(name)
    if target is None:
        return None
    module_name, _, attribute = target.partition(":")
    fn = getattr(importlib.import_module(module_name), attribute)
    with _lock:
        if _builtins.pop(name, None) is None:  # registered or removed meanwhile
            return _functions.get(name)
        packed = _functions[name] = fn if isinstance(fn, PackedFunc) else PackedFunc(fn, name)
    return packed


@overload
def get_global_func(name: str, allow_missing: Literal[False] = False) -> PackedFunc: ...
@overload
def get_global_func(name: str, allow_missing: bool) -> PackedFunc | None: ...


def get_global_func(name: str, allow_missing: bool = False) -> PackedFunc | None:
    """The global function ``name``; ``None`` if missing and ``allow_missing``.

    Raises
    ------
    GlobalFunctionNotFoundError
        If there is no such function and ``allow_missing`` is false (an
        ``AttributeError`` and, as in TVM, a ``ValueError``).
    """
    func = _functions.get(name) or _load_builtin(name)
    if func is None and not allow_missing:
        raise GlobalFunctionNotFoundError(f"Cannot find global function {name}")
    return func


def list_global_func_names() -> list[str]:
    """Names of all registered global functions, sorted."""
    return sorted({*_functions, *_builtins})


def remove_global_func(name: str) -> None:
    """Unregister ``name``.

    Raises
    ------
    FunctionNotFoundError
        If no function has that name.
    """
    with _lock:
        found = _functions.pop(name, None) is not None
        found = _builtins.pop(name, None) is not None or found
        if not found:
            raise FunctionNotFoundError(f"Cannot find global function {name}")


_C = TypeVar("_C", bound=type)


def register_extension(cls: _C, fcreate: Callable[..., Any] | None = None) -> _C:
    """Let objects of ``cls`` be passed to packed functions (TVM's ``register_extension``).

    ``cls`` gives ``_tvm_tcode`` (a type code, e.g. ``ArgTypeCode.DLTENSOR_HANDLE``) and a
    ``_tvm_handle`` property (the address to pass, e.g. an NDArray's ``_tvm_handle``). As in
    TVM 0.19, ``fcreate`` is no longer supported.

    Raises
    ------
    ArgumentTypeError
        If ``cls`` has no ``_tvm_tcode``.
    InvalidArgumentError
        If ``fcreate`` is given.
    """
    from tvmrt.runtime.packed_values import EXTENSION_TYPES

    if not hasattr(cls, "_tvm_tcode"):
        raise ArgumentTypeError(
            f"register_extension: {cls.__name__} has no _tvm_tcode (the type code its objects "
            "pass as)"
        )
    if fcreate is not None:
        raise InvalidArgumentError("Extension with fcreate is no longer supported")
    if cls not in EXTENSION_TYPES:
        EXTENSION_TYPES.append(cls)
    return cls
