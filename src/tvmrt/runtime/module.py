"""``Module``: a named collection of functions, with imports; ``load_module`` and ``system_lib``."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tvmrt.error import FunctionNotFoundError, ModuleLoadError
from tvmrt.runtime.benchmark import BenchmarkResult, time_evaluate
from tvmrt.runtime.device import Device
from tvmrt.runtime.packed_func import PackedFunc
from tvmrt.runtime.registry import get_global_func, list_global_func_names

__all__ = ["Module", "PyModule", "load_module", "system_lib", "register_system_lib_func"]

_LOADER_PREFIX = "runtime.module.loadfile_"


class Module:
    """A runtime module: functions looked up by name, plus imported modules.

    Subclasses implement :meth:`_get_function` (and usually :attr:`type_key`). TVM's
    executors, compiled libraries and factories are all modules.
    """

    entry_name = "__tvm_main__"

    def __init__(self) -> None:
        self._imports: list[Module] = []

    # -- identity ---------------------------------------------------------------------
    @property
    def type_key(self) -> str:
        """The kind of module (``"library"``, ``"GraphExecutor"``, ...)."""
        return "module"

    @property
    def format(self) -> str:
        """The format of the module's code (``"so"``, ``"tar"``, ``""``)."""
        return ""

    def __repr__(self) -> str:
        return f"Module(type_key={self.type_key!r}, {id(self):#x})"

    # -- functions ---------------------------------------------------------------------
    def _get_function(self, name: str) -> PackedFunc | None:
        """This module's own function ``name``, or ``None``; the hook subclasses implement."""
        return None

    def get_function(self, name: str, query_imports: bool = False) -> PackedFunc:
        """The function ``name`` of this module (and of its imports, if ``query_imports``).

        Raises
        ------
        FunctionNotFoundError
            If there is no such function (an ``AttributeError``, as in TVM).
        """
        func = self._find_function(name, query_imports)
        if func is None:
            raise FunctionNotFoundError(f"Module has no function '{name}'")
        return func

    def _find_function(self, name: str, query_imports: bool) -> PackedFunc | None:
        func = self._get_function(name)
        if func is not None or not query_imports:
            return func
        # depth-first through the imports, in order, each module once: linear in the
        # modules however often they are imported, and no recursion limit
        seen = {id(self)}
        stack = [iter(self._imports)]
        while stack:
            module = next(stack[-1], None)
            if module is None:
                stack.pop()
            elif id(module) not in seen:
                seen.add(id(module))
                func = module._get_function(name)
                if func is not None:
                    return func
                stack.append(iter(module._imports))
        return None

    def implements_function(self, name: str, query_imports: bool = False) -> bool:
        """Whether :meth:`get_function` would find ``name``."""
        return self._find_function(name, query_imports) is not None

    def __getitem__(self, name: str) -> PackedFunc:
        if not isinstance(name, str):
            raise ValueError("Can only take string as function name")
        return self.get_function(name)

    def __call__(self, *args: Any) -> Any:
        return self.entry_func(*args)

    @property
    def entry_func(self) -> PackedFunc:
        """The module's entry function (``__tvm_main__``)."""
        return self.get_function(self.entry_name)

    # -- imports ----------------------------------------------------------------------
    def import_module(self, module: Module) -> None:
        """Add ``module`` to this module's imports."""
        if not isinstance(module, Module):
            raise TypeError(f"can only import a Module, got {type(module).__name__}")
        self._imports.append(module)

    @property
    def imported_modules(self) -> list[Module]:
        """Modules this module imports (a copy of the list)."""
        return list(self._imports)

    def get_source(self, fmt: str = "") -> str:
        """Source code of the module, where it has any (``""`` otherwise)."""
        return ""

    # -- timing ------------------------------------------------------------------------
    def time_evaluator(
        self,
        func_name: str,
        dev: Device,
        number: int = 10,
        repeat: int = 1,
        min_repeat_ms: float = 0,
        limit_zero_time_iterations: int = 100,
        cooldown_interval_ms: float = 0,
        repeats_to_cooldown: int = 1,
        cache_flush_bytes: int = 0,
        f_preproc: str = "",
    ) -> Callable[..., BenchmarkResult]:
        """Time the function ``func_name`` (TVM's ``Module.time_evaluator``).

        Parameters
        ----------
        func_name
            Function of this module (or its imports) to time.
        dev
            Device to synchronise around each measurement.
        number
            Calls per measurement (grows under ``min_repeat_ms``).
        repeat
            Measurements; the result has one entry per measurement.
        min_repeat_ms
            Minimum duration of one measurement, in milliseconds.
        limit_zero_time_iterations
            Retries of a measurement that took zero time.
        cooldown_interval_ms
            Sleep between measurements, in milliseconds.
        repeats_to_cooldown
            Sleep after every this many measurements.
        cache_flush_bytes
            Bytes to overwrite before each measurement to flush caches.
        f_preproc
            Name of a global function to call before each measurement.

        Returns
        -------
        Callable[..., BenchmarkResult]
            ``evaluator(*args)`` returns seconds per call for each repeat.

        Examples
        --------
        >>> import tvmrt.runtime as rt
        >>> mod = rt.PyModule({"noop": lambda: None})
        >>> res = mod.time_evaluator("noop", rt.cpu(), number=3, repeat=2)()
        >>> len(res.results)
        2
        """
        func = self._find_function(func_name, True)
        if func is None:
            raise FunctionNotFoundError(f"Cannot find {func_name} in the module or its imports")
        preproc = get_global_func(f_preproc) if f_preproc else None
        return time_evaluate(
            func,
            dev,
            number,
            repeat,
            min_repeat_ms,
            limit_zero_time_iterations,
            cooldown_interval_ms,
            repeats_to_cooldown,
            cache_flush_bytes,
            preproc,
        )


class PyModule(Module):
    """A module whose functions are Python callables (custom kernels, tests).

    Parameters
    ----------
    functions
        Name → callable (each wrapped as a :class:`PackedFunc`).
    type_key
        Reported type key (default ``"py"``).

    Examples
    --------
    >>> mod = PyModule({"myadd": lambda a, b: b.copyfrom(a.numpy() + 1)})
    >>> mod.implements_function("myadd")
    True
    """

    def __init__(
        self, functions: Mapping[str, Callable[..., Any]] | None = None, type_key: str = "py"
    ) -> None:
        super().__init__()
        self._type_key = type_key
        self._functions: dict[str, PackedFunc] = {}
        for name, func in (functions or {}).items():
            self.add_function(name, func)

    @property
    def type_key(self) -> str:
        return self._type_key

    def add_function(self, name: str, func: Callable[..., Any]) -> None:
        """Add or replace the function ``name``."""
        self._functions[name] = func if isinstance(func, PackedFunc) else PackedFunc(func, name)

    def __setitem__(self, name: str, func: Callable[..., Any]) -> None:
        self.add_function(name, func)

    def _get_function(self, name: str) -> PackedFunc | None:
        return self._functions.get(name)


class _SystemLib(PyModule):
    """The process-wide module of statically registered functions (``system_lib()``)."""

    def __init__(self) -> None:
        super().__init__(type_key="system_lib")
        self.lock = threading.Lock()


_system_lib = _SystemLib()


def system_lib(symbol_prefix: str = "") -> Module:
    """The process-wide module of functions registered with :func:`register_system_lib_func`.

    ``symbol_prefix`` selects functions registered under ``"<prefix>"``-prefixed names,
    returned without the prefix; the default returns the whole library.
    """
    if not symbol_prefix:
        return _system_lib
    view = PyModule(type_key="system_lib")
    for name, func in _system_lib._functions.items():
        if name.startswith(symbol_prefix):
            view.add_function(name[len(symbol_prefix) :], func)
    return view


def register_system_lib_func(name: str, func: Callable[..., Any]) -> None:
    """Add ``func`` to :func:`system_lib` under ``name`` (TVM's static registration)."""
    with _system_lib.lock:
        _system_lib.add_function(name, func)


def _format_of(path: str) -> str:
    name = Path(path).name
    if name.endswith((".so", ".dll", ".dylib")) or ".so." in name:
        return "so"
    suffix = Path(path).suffix
    return suffix[1:] if suffix else ""


def load_module(path: str | os.PathLike[str], fmt: str = "") -> Module:
    """Load a module from a file (TVM's ``tvm.runtime.load_module``).

    The file kind comes from ``fmt`` or the file's extension; the loader registered
    as ``runtime.module.loadfile_<kind>`` reads it.

    Parameters
    ----------
    path
        The file: a compiled library (``.so``), an exported archive (``.tar``), an
        object file (``.o``), ...
    fmt
        The file kind, overriding the extension.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ModuleLoadError
        If no loader handles this kind of file, or the loader rejects it.
    """
    import tvmrt.runtime.loaders  # noqa: F401 - registers the built-in loaders

    text = os.fspath(path)
    if not os.path.exists(text):
        raise FileNotFoundError(f"module file {text!r} does not exist")
    kind = fmt or _format_of(text)
    loader = get_global_func(_LOADER_PREFIX + kind, allow_missing=True)
    if loader is None:
        names = list_global_func_names()
        known = sorted(n[len(_LOADER_PREFIX) :] for n in names if n.startswith(_LOADER_PREFIX))
        raise ModuleLoadError(
            f"cannot load {text!r}: no loader for file kind {kind!r}; "
            f"supported kinds are {', '.join(repr(k) for k in known)}"
        )
    module = loader(text)
    if not isinstance(module, Module):
        raise ModuleLoadError(f"loader for {kind!r} returned {type(module).__name__}, not a Module")
    return module
