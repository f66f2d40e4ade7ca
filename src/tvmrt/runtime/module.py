"""``Module``: a named collection of functions, with imports; ``load_module`` and ``system_lib``.

What a module does beyond finding functions is served through the global registry, as
in TVM (whose ``Module`` methods call ``runtime.Module*`` global functions): loading a
file (``runtime.ModuleLoadFromFile``), the system library (``runtime.SystemLib``),
static libraries (``runtime.ModuleLoadStaticLibrary``) and exporting
(``runtime.ModuleIsDSOExportable``, ``runtime.ModuleExportLibrary``) are implemented by
the loaders and :mod:`tvmrt.runtime.export`, which build on this module
(:mod:`tvmrt.runtime.builtins` names them).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tvmrt.error import (
    ArgumentTypeError,
    FunctionNotFoundError,
    InvalidArgumentError,
    ModuleLoadError,
    UnsupportedError,
)
from tvmrt.runtime.benchmark import BenchmarkResult, time_evaluate
from tvmrt.runtime.device import Device
from tvmrt.runtime.module_info import ModulePropertyMask, enabled, find_include_path, num_threads
from tvmrt.runtime.packed_func import PackedFunc
from tvmrt.runtime.registry import get_global_func

if TYPE_CHECKING:
    from tvmrt.binfmt.abi import TvmSymbols

__all__ = [
    "Module",
    "PyModule",
    "BenchmarkResult",
    "ModulePropertyMask",
    "enabled",
    "find_include_path",
    "num_threads",
    "load_module",
    "load_static_library",
    "python_system_lib",
    "system_lib",
    "register_system_lib_func",
]


class Module:
    """A runtime module: functions looked up by name, plus imported modules.

    Subclasses implement :meth:`_get_function` (and usually :attr:`type_key`). TVM's
    executors, compiled libraries and factories are all modules.
    """

    entry_name = "__tvm_main__"

    source_file: str | None = None  # the file load_module read this module from (tvmrt)
    _native_changed = False  # imports changed after load_module (the C engine refuses it)
    _native_kernels: Module | None = None  # the C runtime's load of source_file's kernels
    _native_refusal: str | None = None  # why the C engine must not run them ("" if it may)
    # what the loader read from the dynamic symbols of the library file it loaded this
    # module's kernels from: the file's identity then, and the facts (loaders/needs.py)
    _file_symbols: tuple[tuple[int, int, int, int], TvmSymbols] | None = None

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
        func = self.find_function(name, query_imports)
        if func is None:
            raise FunctionNotFoundError(f"Module has no function '{name}'")
        return func

    def find_function(self, name: str, query_imports: bool = False) -> PackedFunc | None:
        """:meth:`get_function`, returning ``None`` instead of raising (tvmrt extension).

        Executors and loaders look kernels up with it: a missing name is theirs to report.
        """
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
        return self.find_function(name, query_imports) is not None

    def __getitem__(self, name: str) -> PackedFunc:
        if not isinstance(name, str):
            raise InvalidArgumentError("Can only take string as function name")
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
            raise ArgumentTypeError(f"can only import a Module, got {type(module).__name__}")
        if module is self:
            raise InvalidArgumentError("a module cannot import itself")
        # as TVM's ModuleNode::Import (and the C runtime): refused when module already
        # reaches this one through its imports
        seen, todo = {id(module)}, list(module._imports)
        while todo:
            m = todo.pop()
            if m is self:
                raise InvalidArgumentError("Cyclic dependency detected during import")
            if id(m) not in seen:
                seen.add(id(m))
                todo.extend(m._imports)
        self._imports.append(module)
        self._mark_changed()

    def _mark_changed(self) -> None:
        # what the module's file holds is no longer all of it: the C runtime, which loads
        # the file again, must not run it (graph_executor.native)
        if self.source_file is not None:
            self._native_changed = True

    @property
    def imported_modules(self) -> list[Module]:
        """Modules this module imports (a copy of the list)."""
        return list(self._imports)

    def clear_imports(self) -> None:
        """Remove all imports of the module."""
        self._mark_changed()
        self._imports.clear()

    def get_source(self, fmt: str = "") -> str:
        """Source code of the module; only modules that hold source have it.

        Raises
        ------
        UnsupportedError
            For modules without source (compiled libraries, executors), as TVM's
            ``Module[...] does not support get source``.
        """
        raise UnsupportedError(f"Module[{self.type_key}] does not support get source")

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
        """Time the function ``func_name`` (TVM's ``Module.time_evaluator``, same arguments).

        ``evaluator(*args)`` returns a :class:`BenchmarkResult`, seconds per call for each
        of ``repeat`` measurements of ``number`` calls (more under ``min_repeat_ms``), after
        ``f_preproc`` (a global function's name) and flushing ``cache_flush_bytes``,
        sleeping ``cooldown_interval_ms`` every ``repeats_to_cooldown`` measurements; a
        measurement that took no time is retried up to ``limit_zero_time_iterations``.

        >>> import tvmrt.runtime as rt
        >>> mod = rt.PyModule({"noop": lambda: None})
        >>> len(mod.time_evaluator("noop", rt.cpu(), number=3, repeat=2)().results)
        2
        """
        func = self.find_function(func_name, True)
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

    # -- saving and exporting (TVM's Module.save / export_library) ------------------------
    def save(self, file_name: str | os.PathLike[str], fmt: str = "") -> None:
        """Save this module alone to a file (TVM's ``SaveToFile``).

        No module kind tvmrt loads supports it (TVM's loaded libraries and executors do
        not either); use :meth:`export_library` for a whole factory.

        Raises
        ------
        UnsupportedError
            Always, naming the module kind (``Module[library] does not support SaveToFile``).
        """
        raise UnsupportedError(
            f"Module[{self.type_key}] does not support SaveToFile; export_library writes a "
            "factory whose kernels tvmrt holds as object files"
        )

    @property
    def is_dso_exportable(self) -> bool:
        """Whether :meth:`export_library` can put this module's code into a new library.

        A property, as in TVM (``if lib.is_dso_exportable:``).

        True for kernel libraries (and factories over them) that tvmrt holds as object
        files, i.e. loaded from an exported ``.tar`` or an ``.o``.
        """
        return bool(get_global_func("runtime.ModuleIsDSOExportable")(self))

    def get_property_mask(self) -> int:
        """:class:`ModulePropertyMask` bits: every module tvmrt holds is ``RUNNABLE``;
        ``DSO_EXPORTABLE`` as :attr:`is_dso_exportable`; none is ``BINARY_SERIALIZABLE``
        (tvmrt writes no module to a binary stream but through :meth:`export_library`)."""
        mask = ModulePropertyMask.RUNNABLE
        return int(mask | ModulePropertyMask.DSO_EXPORTABLE if self.is_dso_exportable else mask)

    @property
    def is_binary_serializable(self) -> bool:
        """The ``BINARY_SERIALIZABLE`` bit of :meth:`get_property_mask`."""
        return bool(self.get_property_mask() & ModulePropertyMask.BINARY_SERIALIZABLE)

    @property
    def is_runnable(self) -> bool:
        """The ``RUNNABLE`` bit of :meth:`get_property_mask`."""
        return bool(self.get_property_mask() & ModulePropertyMask.RUNNABLE)

    @property
    def is_device_module(self) -> bool:
        """Whether this holds device code (TVM's list of device module kinds)."""
        return self.type_key in ("cuda", "opencl", "metal", "hip", "vulkan", "webgpu")

    def export_library(
        self,
        file_name: str | os.PathLike[str],
        fcompile: Any = None,
        *,
        fpack_imports: Any = None,
        addons: Any = None,
        workspace_dir: str | None = None,
        **kwargs: Any,
    ) -> Any:
        """Export this module as TVM v0.19 does (kernels, module blob, then ``fcompile``).

        The kernels are written as ``lib0.o``..., the module blob as ``devc.c``, and
        ``fcompile(file_name, files, **kwargs)`` makes the output.

        Arguments are TVM's: ``fcompile`` (a callable; None or False: a gzip tar for a
        ``.tar`` name, else a shared library; positional too, as before TVM 0.19),
        ``fpack_imports``, ``addons``, ``workspace_dir`` and, for the default shared
        library, ``cc`` and ``options``. The
        result loads back with :func:`load_module` (and with TVM); a system-lib build's tar
        links into a C/C++ program with ``libtvmrt_runtime.a``. Exportable: a
        ``GraphExecutorFactory`` or kernel library loaded from an exported ``.tar`` or an
        ``.o`` (see :meth:`is_dso_exportable`); other modules are refused.

        Returns
        -------
        What ``fcompile`` returns (None for the defaults).

        Raises
        ------
        UnsupportedError
            If the module's kernels are not held as object files.
        ModuleLoadError
            If no C compiler is found, or compiling or linking fails.
        """
        named = {"fcompile": fcompile, "fpack_imports": fpack_imports, "addons": addons}
        named["workspace_dir"] = workspace_dir
        kwargs.update((key, value) for key, value in named.items() if value is not None)
        return get_global_func("runtime.ModuleExportLibrary")(self, os.fspath(file_name), kwargs)


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
    """Functions registered from Python for :func:`system_lib` (TVM's static registration)."""

    def __init__(self) -> None:
        super().__init__(type_key="system_lib")
        self.lock = threading.Lock()


_system_lib = _SystemLib()


def python_system_lib() -> PyModule:
    """The functions added with :func:`register_system_lib_func` (looked up last)."""
    return _system_lib


def system_lib(symbol_prefix: str = "") -> Module:
    """The process-wide system library (TVM's ``tvm.runtime.system_lib``).

    It holds what code built with ``system-lib`` registered while it was loaded
    (``load_module("deploy.so")`` of such a library, or a program linking it in), and the
    functions added with :func:`register_system_lib_func`. A name is looked up as
    ``symbol_prefix + name`` first, then as ``name`` (TVM v0.19's rules). When a module
    blob was registered, the functions of the module tree's root are found too, so
    ``system_lib()["default"](dev)`` creates the executor of a system-lib factory.

    Parameters
    ----------
    symbol_prefix
        The prefix the library was built with (``Runtime("cpp", {"system-lib": True,
        "system-lib-prefix": ...})``); ``""`` for none.

    Raises
    ------
    ModuleLoadError
        If a registered module blob is corrupt.
    """
    return _as_module(get_global_func("runtime.SystemLib")(symbol_prefix), "runtime.SystemLib")


def register_system_lib_func(name: str, func: Callable[..., Any]) -> None:
    """Add ``func`` to :func:`system_lib` under ``name`` (TVM's static registration)."""
    with _system_lib.lock:
        _system_lib.add_function(name, func)


def load_static_library(path: str | os.PathLike[str], func_names: list[str]) -> Module:
    """Load the ``.o`` at ``path`` implementing ``func_names``, without linking it.

    TVM's ``tvm.runtime.load_static_library``: the result stays a ``static_library``
    module (see :class:`~tvmrt.runtime.static_library.StaticLibraryModule`) instead of
    being relinked into a ``.so``.

    Raises
    ------
    ModuleFileNotFoundError
        If ``path`` does not exist.
    TypeError
        If ``func_names`` is not a list of strings.
    """
    loader = get_global_func("runtime.ModuleLoadStaticLibrary")
    return _as_module(loader(path, func_names), "runtime.ModuleLoadStaticLibrary")


def load_module(
    path: str | os.PathLike[str] | bytes | bytearray | memoryview, fmt: str = ""
) -> Module:
    """Load a module from a file (TVM's ``tvm.runtime.load_module``), or from its bytes.

    A loader registered as ``runtime.module.loadfile_<kind>`` for ``fmt`` or the file's
    extension reads it; tvmrt's own loader (``so``, ``tar``, ``o``, ...) looks at the
    file's contents, whatever its name, and hands it to the one loader for its form
    (docs/artifacts.md lists them). The path is resolved first: a bare name like
    ``"deploy.so"`` means the file in the current folder, never a system library.

    Parameters
    ----------
    path
        The file: a compiled library (``.so``), an exported archive (``.tar``), an
        object file (``.o``), a Model Library Format or tvmc package tar, ...; or such a
        file's bytes (tvmrt's: a model decrypted into memory), loaded through a memfd with
        nothing written to a disk (``tvmrt.runtime.loaders.memory`` says what this cannot
        do).
    fmt
        The file kind, overriding the extension.

    Raises
    ------
    ModuleFileNotFoundError
        If ``path`` does not exist (a ``FileNotFoundError`` and a ``ValueError``).
    ModuleLoadError
        If no loader handles this kind of file, or the loader rejects it.
    """
    if isinstance(path, bytes | bytearray | memoryview):
        from_memory = get_global_func("runtime.ModuleLoadFromMemory")
        return _as_module(from_memory(path, fmt), "runtime.ModuleLoadFromMemory")
    loader = get_global_func("runtime.ModuleLoadFromFile")
    module = _as_module(loader(os.fspath(path), fmt), "runtime.ModuleLoadFromFile")
    module.source_file = os.path.abspath(os.fspath(path))
    return module


def _as_module(value: object, what: str) -> Module:
    if not isinstance(value, Module):
        raise ModuleLoadError(f"{what} returned {type(value).__name__}, not a Module")
    return value
