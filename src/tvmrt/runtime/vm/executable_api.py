"""TVM's ``tvm.runtime.vm.Executable`` face, and ``convert`` (TVM's ``_convert`` rules).

Thin, as TVM's own ``python/tvm/runtime/vm.py`` (v0.16): each method calls one packed
function of the ``VMExecutable`` module.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping

import numpy as np

from tvmrt.error import ArgumentTypeError, InputNotFoundError
from tvmrt.runtime.container import tuple_object
from tvmrt.runtime.device import cpu
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray, array
from tvmrt.runtime.object import Object
from tvmrt.runtime.registry import get_global_func

__all__ = ["Executable", "convert", "convert_input"]


def convert_input(value: object) -> object:
    """One VM argument by TVM v0.19's ``_convert`` rules.

    Objects (NDArray, ADT, ...) and ``str`` as they are; numpy arrays -> NDArray on
    ``cpu(0)``; tuple/list -> ADT of the converted fields; ``None`` -> an empty float64
    array; ints and bools -> int32 scalars; ``np.float16`` -> float16, other reals ->
    float32 scalars.
    """
    if isinstance(value, Object | NDArray | str):
        return value
    if value is None:
        return array(np.array([]), cpu(0))
    if isinstance(value, np.ndarray):
        return array(value, cpu(0))
    if isinstance(value, tuple | list):
        return tuple_object([convert_input(v) for v in value])
    if isinstance(value, bool | numbers.Integral):
        return array(np.array(value, dtype="int32"), cpu(0))
    if isinstance(value, np.float16):
        return array(np.array(value, dtype="float16"), cpu(0))
    if isinstance(value, numbers.Real):
        return array(np.array(value, dtype="float32"), cpu(0))
    raise ArgumentTypeError(f"unsupported VM input type {type(value).__name__}")


def convert(args: Iterable[object]) -> list[object]:
    """``tvm.runtime.vm.convert``: each argument by :func:`convert_input`'s rules."""
    return [convert_input(arg) for arg in args]


class Executable:
    """A Relay VM executable (``tvm.runtime.vm.Executable``) around its module."""

    def __init__(self, mod: Module) -> None:
        if not isinstance(mod, Module) or mod.type_key != "VMExecutable":
            raise ArgumentTypeError(f"Executable needs a VMExecutable module, got {mod!r}")
        self.mod = mod
        self._function_params: dict[str, list[str]] = {}

    @staticmethod
    def load_exec(bytecode: bytes | bytearray | str, lib: Module) -> Executable:
        """An executable from ``code.ro``'s bytes and the kernel library."""
        return Executable(get_global_func("runtime.Load_Executable")(bytecode, lib))

    def save(self) -> tuple[bytearray, Module]:
        """``(code, lib)``: the serialized executable and the kernel library."""
        return self.mod["save"](), self.lib

    @property
    def lib(self) -> Module:
        """The kernel library."""
        lib: Module = self.mod["get_lib"]()
        return lib

    @property
    def module(self) -> Module:
        """The ``VMExecutable`` module."""
        return self.mod

    @property
    def globals(self) -> list[str]:
        """The VM function names, in function-index order."""
        return list(self.mod.data.globals)  # type: ignore[attr-defined]

    @property
    def primitive_ops(self) -> list[str]:
        """The kernel names, in packed-index order."""
        return list(self.mod.data.primitive_names)  # type: ignore[attr-defined]

    @property
    def bytecode(self) -> str:
        """The instructions of every function, as text."""
        return str(self.mod["get_bytecode"]())

    @property
    def constants(self) -> str:
        """The constant pool, as text."""
        return str(self.mod["get_constants"]())

    @property
    def primitives(self) -> str:
        """The kernel table, as text."""
        return str(self.mod["get_primitives"]())

    @property
    def virtual_devices(self) -> str:
        """The virtual devices, as text."""
        return str(self.mod["get_virtual_devices"]())

    @property
    def stats(self) -> str:
        """Counts and shapes, as text."""
        return str(self.mod["get_stats"]())

    def get_function_params(self, func_name: str) -> list[str]:
        """The parameter names of ``func_name``."""
        if func_name not in self._function_params:
            arity = int(self.mod["get_function_arity"](func_name))
            if arity < 0:
                raise InputNotFoundError(f"the executable has no function {func_name!r}")
            name = self.mod["get_function_param_name"]
            self._function_params[func_name] = [str(name(func_name, i)) for i in range(arity)]
        return self._function_params[func_name]

    def move_late_bound_consts(self, path: str, byte_limit: int) -> None:
        """Move constants of at least ``byte_limit`` bytes to the params file ``path``."""
        self.mod["move_late_bound_consts"](str(path), byte_limit)

    def get_late_bound_consts(self, byte_limit: int) -> dict[str, NDArray]:
        """Move constants of at least ``byte_limit`` bytes out and return them."""
        consts: dict[str, NDArray] = self.mod["get_late_bound_consts"](byte_limit)
        return consts

    def load_late_bound_consts(self, path: str) -> None:
        """Load late-bound constants from the params file ``path``."""
        self.mod["load_late_bound_consts"](str(path))

    def load_late_bound_consts_from_map(self, map: Mapping[str, object]) -> None:
        """Load late-bound constants from a name -> array map."""
        self.mod["load_late_bound_consts_from_map"](map)
