"""The ``VMExecutable`` module: a loaded, checked Relay VM executable and its kernels.

What TVM's ``runtime::vm::Executable`` offers as packed functions (``get_bytecode``,
``save``, ``vm_load_executable``, the late-bound constant functions, ...), the global
``runtime.Load_Executable`` (``Executable.load_exec``) and the blob loader
``runtime.module.loadbinary_VMExecutable`` for ``vm.so``. The kernel library is the
module's first import, as in TVM.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from tvmrt.binfmt.files import MAX_PARAMS_BYTES, PARAMS_MAGIC, file_identity, read_regular
from tvmrt.binfmt.stream import ByteReader
from tvmrt.error import (
    ArgumentTypeError,
    InputNotFoundError,
    InvalidArgumentError,
    ModuleLoadError,
    ParamsFormatError,
)
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray, array
from tvmrt.runtime.packed_func import PackedFunc
from tvmrt.runtime.params import load_param_dict, save_param_dict
from tvmrt.runtime.vm import listing
from tvmrt.runtime.vm.decode import DecodedFunction, decode_executable
from tvmrt.runtime.vm.format import ExecutableData, read_executable, write_executable

__all__ = ["VMExecutable", "load_executable", "load_executable_binary"]


class VMExecutable(Module):
    """A Relay VM executable (type key ``VMExecutable``), checked and decoded.

    Parameters
    ----------
    data
        The parsed executable.
    what
        Where it came from, for messages.
    """

    def __init__(self, data: ExecutableData, what: str = "executable") -> None:
        super().__init__()
        self.data = data
        self.what = what
        self.functions: list[DecodedFunction] = decode_executable(data, what)
        self.global_map = {name: i for i, name in enumerate(data.globals)}
        self.code_bytes: bytes | None = None  # code.ro as given to load_executable
        self.changed = ""  # what changed the constants after loading, if anything did
        # the files load_late_bound_consts read, in order, each with its identity then
        # (binfmt/files.py's file_identity): what the C VM reads too while they are the
        # same files (the executable is still its file's, the late-bound constants theirs)
        self.late_bound_files: list[tuple[str, tuple[int, int, int, int]]] = []

    @property
    def type_key(self) -> str:
        return "VMExecutable"

    @property
    def lib(self) -> Module:
        """The kernel library (the first import)."""
        if not self._imports:
            raise ModuleLoadError(f"{self.what}: the executable has no kernel library")
        return self._imports[0]

    def _get_function(self, name: str) -> PackedFunc | None:
        table: dict[str, Callable[..., Any]] = {
            "get_lib": lambda: self.lib,
            "get_bytecode": lambda: listing.bytecode_text(self.data),
            "get_constants": lambda: listing.constants_text(self.data),
            "get_virtual_devices": lambda: listing.devices_text(self.data),
            "get_primitives": lambda: listing.primitives_text(self.data),
            "get_stats": lambda: listing.stats_text(self.data),
            "save": lambda: bytearray(self.save_bytes()),
            "get_function_arity": self.function_arity,
            "get_function_param_name": self.function_param_name,
            "vm_load_executable": self.load_vm,
            "move_late_bound_consts": self.move_late_bound_consts,
            "get_late_bound_consts": self.get_late_bound_consts,
            "load_late_bound_consts": self.load_late_bound_consts,
            "load_late_bound_consts_from_map": self.load_late_bound_consts_from_map,
        }
        func = table.get(name)
        return None if func is None else PackedFunc(func, name)

    def save_bytes(self) -> bytes:
        """The serialized executable (the bytes of ``code.ro``)."""
        return write_executable(self.data)

    def function_arity(self, name: str) -> int:
        """The number of parameters of function ``name``, or -1 if there is none."""
        index = self.global_map.get(str(name))
        return -1 if index is None else len(self.functions[index].params)

    def function_param_name(self, name: str, index: int) -> str:
        """The name of parameter ``index`` of function ``name``."""
        func = self.function(name)
        if not 0 <= index < len(func.params):
            raise InvalidArgumentError(
                f"function {name!r} has {len(func.params)} params, no param {index}"
            )
        return func.params[index]

    def function(self, name: str) -> DecodedFunction:
        """The decoded function ``name``."""
        index = self.global_map.get(str(name))
        if index is None:
            raise InputNotFoundError(
                f"the executable has no function {name!r}; it has {', '.join(self.data.globals)}"
            )
        return self.functions[index]

    def load_vm(self) -> Module:
        """A new, uninitialised ``VirtualMachine`` module over this executable."""
        from tvmrt.runtime.vm.machine import VirtualMachineModule

        return VirtualMachineModule(self)

    # -- late-bound constants (executable.cc: MoveLateBoundConstantsToFile, ...) ----------
    def late_bound_names(self) -> list[str]:
        """Names of the late-bound constants not loaded yet."""
        return [c for c in self.data.constants if isinstance(c, str)]

    def get_late_bound_consts(self, byte_limit: int) -> dict[str, NDArray]:
        """Move every constant of at least ``byte_limit`` bytes out; return them by name."""
        moved: dict[str, NDArray] = {}
        self.changed = "its constants were moved out (late-bound)"
        for k, const in enumerate(self.data.constants):
            if isinstance(const, NDArray) and const.nbytes >= int(byte_limit):
                moved[f"const_{k}"] = const
                self.data.constants[k] = f"const_{k}"
        return moved

    def move_late_bound_consts(self, path: str, byte_limit: int) -> None:
        """Move the large constants out into the params file ``path``."""
        moved = self.get_late_bound_consts(byte_limit)
        with open(os.fspath(path), "wb") as out:
            out.write(save_param_dict(moved))

    def load_late_bound_consts(self, path: str) -> None:
        """Load the late-bound constants from the params file ``path``."""
        data = read_regular(
            path, "late-bound constants file", MAX_PARAMS_BYTES, ModuleLoadError, PARAMS_MAGIC
        )
        self._set_late_bound(load_param_dict(data))
        full = os.path.abspath(os.fspath(path))
        self.late_bound_files.append((full, file_identity(full)))

    def load_late_bound_consts_from_map(self, consts: Mapping[str, object]) -> None:
        """Set the late-bound constants from ``consts`` (name -> array); all must match."""
        self._set_late_bound(consts)
        self.changed = "its late-bound constants were loaded from a map in Python"

    def _set_late_bound(self, consts: Mapping[str, object]) -> None:
        if not isinstance(consts, Mapping):
            raise ArgumentTypeError(f"expected a map of name to array, got {type(consts).__name__}")
        wanted = {c: k for k, c in enumerate(self.data.constants) if isinstance(c, str)}
        missing = sorted(set(wanted) - set(consts))
        unused = sorted(set(consts) - set(wanted))
        if missing or unused:
            raise ParamsFormatError(
                f"late-bound constants do not match the executable: missing {missing}, "
                f"not used {unused}"
            )
        for name, k in wanted.items():
            value = consts[name]
            self.data.constants[k] = value if isinstance(value, NDArray) else array(value)


def load_executable(code: bytes | bytearray | str, lib: Module) -> VMExecutable:
    """The global ``runtime.Load_Executable``: ``code.ro`` bytes + the kernel library."""
    if isinstance(code, str):
        code = code.encode("latin-1")
    if not isinstance(code, bytes | bytearray | memoryview):
        raise ArgumentTypeError(f"load_exec: bytecode must be bytes, got {type(code).__name__}")
    if not isinstance(lib, Module):
        raise ArgumentTypeError(f"load_exec: lib must be a Module, got {type(lib).__name__}")
    exe = VMExecutable(read_executable(code, "Relay VM executable"), "Relay VM executable")
    exe.code_bytes = bytes(code)
    exe.import_module(lib)
    return exe


def load_executable_binary(reader: ByteReader) -> VMExecutable:
    """``runtime.module.loadbinary_VMExecutable``: the entry of ``vm.so``'s module blob."""
    payload = reader.blob("VMExecutable payload")
    return VMExecutable(read_executable(payload, f"{reader.what}: VMExecutable"), reader.what)
