"""``static_library`` modules: object files kept as they are, not linked (TVM's kind).

``runtime.ModuleLoadStaticLibrary`` (behind :func:`tvmrt.runtime.load_static_library`)
and ``runtime.module.loadbinary_static_library`` (one inside a factory blob) make them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tvmrt.binfmt.files import MAX_LIBRARY_BYTES, read_regular
from tvmrt.error import ArgumentTypeError, ModuleFileNotFoundError, ModuleLoadError
from tvmrt.runtime.module import Module
from tvmrt.runtime.packed_func import PackedFunc

__all__ = ["StaticLibraryModule", "load_static_library", "load_static_binary"]


class StaticLibraryModule(Module):
    """An object file kept as it is (TVM's ``static_library`` module).

    It is not linked or loaded: it has no callable functions, only ``get_func_names``;
    :meth:`implements_function` answers for the names it was given, and
    :meth:`save` writes the object back (what ``export_library`` links into a library).

    Parameters
    ----------
    data
        The object file's bytes.
    func_names
        The functions it implements.
    """

    def __init__(self, data: bytes, func_names: list[str]) -> None:
        super().__init__()
        self.data = data
        self.func_names = list(func_names)

    @property
    def type_key(self) -> str:
        return "static_library"

    def __repr__(self) -> str:
        return f"StaticLibraryModule({len(self.data)} bytes, {self.func_names})"

    def _get_function(self, name: str) -> PackedFunc | None:
        if name == "get_func_names":
            return PackedFunc(lambda: list(self.func_names), name)
        return None

    def implements_function(self, name: str, query_imports: bool = False) -> bool:
        """Whether ``name`` is one of the functions the object implements."""
        return name in self.func_names

    def save(self, file_name: str | os.PathLike[str], fmt: str = "") -> None:
        """Write the object file to ``file_name``."""
        Path(file_name).write_bytes(self.data)


def load_static_library(path: str | os.PathLike[str], func_names: list[str]) -> Module:
    """The global ``runtime.ModuleLoadStaticLibrary``: the ``.o`` at ``path``, not linked.

    Raises
    ------
    ModuleFileNotFoundError
        If ``path`` does not exist.
    TypeError
        If ``func_names`` is not a list of strings.
    """
    text = os.fspath(path)
    resolved = os.path.realpath(text)
    if not os.path.exists(resolved):  # a FIFO or a folder exists: read_regular says what it is
        raise ModuleFileNotFoundError(f"static library {text!r} does not exist")
    names = list(func_names)
    if not all(isinstance(n, str) for n in names):
        raise ArgumentTypeError(f"func_names must be strings, got {names!r}")
    data = read_regular(resolved, "static library", MAX_LIBRARY_BYTES, ModuleLoadError, shown=text)
    return StaticLibraryModule(data, names)


def load_static_binary(reader: Any) -> StaticLibraryModule:
    """The global ``runtime.module.loadbinary_static_library``: one from a module blob."""
    data = bytes(reader.blob("static library object"))
    names = reader.strings("static library function names")
    return StaticLibraryModule(data, names)
