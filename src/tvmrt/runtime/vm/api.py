"""TVM's ``tvm.runtime.vm`` Python face: ``Executable`` and ``VirtualMachine``.

Thin, as TVM's own ``python/tvm/runtime/vm.py`` (v0.16): each method calls one packed
function of the ``VMExecutable`` or ``VirtualMachine`` module.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tvmrt.error import ArgumentTypeError, InputNotFoundError
from tvmrt.runtime.benchmark import BenchmarkResult
from tvmrt.runtime.container import ADT, tuple_object
from tvmrt.runtime.device import Device, cpu
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray, array, empty
from tvmrt.runtime.registry import get_global_func

__all__ = ["Executable", "VirtualMachine", "convert_input"]


def convert_input(value: object) -> object:
    """TVM's ``_convert``: numpy -> NDArray, tuple/list -> ADT, int/float -> 0-d array."""
    if isinstance(value, NDArray | ADT):
        return value
    if isinstance(value, np.ndarray):
        return array(value, cpu(0))
    if isinstance(value, tuple | list):
        return tuple_object([convert_input(v) for v in value])
    if isinstance(value, bool | numbers.Integral):
        return array(np.array(value, dtype="int32"))
    if isinstance(value, np.floating):
        return array(np.array(value))
    if isinstance(value, numbers.Real):
        return array(np.array(value, dtype="float32"))
    if value is None:
        return empty((0,), "float32")
    raise ArgumentTypeError(f"unsupported VM input type {type(value).__name__}")


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


class VirtualMachine:
    """A Relay VM (``tvm.runtime.vm.VirtualMachine``) running one executable.

    Parameters
    ----------
    exe
        An :class:`Executable` or its ``VMExecutable`` module (``load_module("vm.so")``).
    device
        One device or a list; a CPU is added if none is given (shape functions run there).
    memory_cfg
        ``None``/``"pooled"``, ``"naive"``, or a dict device -> name.
    """

    NAIVE_ALLOCATOR = 1
    POOLED_ALLOCATOR = 2

    def __init__(
        self, exe: Executable | Module, device: Device | Sequence[Device], memory_cfg: object = None
    ) -> None:
        mod = exe.mod if isinstance(exe, Executable) else exe
        if not isinstance(mod, Module) or mod.type_key != "VMExecutable":
            raise ArgumentTypeError(
                f"VirtualMachine needs an Executable or a VMExecutable module, got {exe!r}"
            )
        self._exec = exe if isinstance(exe, Executable) else Executable(mod)
        self.module = mod["vm_load_executable"]()
        self._init = self.module["init"]
        self._invoke = self.module["invoke"]
        self._invoke_stateful = self.module["invoke_stateful"]
        self._get_output = self.module["get_output"]
        self._get_num_outputs = self.module["get_num_outputs"]
        self._get_input_index = self.module["get_input_index"]
        self._set_input = self.module["set_input"]
        self._set_one_input = self.module["set_one_input"]
        self._setup_device(device, memory_cfg)

    def _setup_device(self, dev: Device | Sequence[Device], memory_cfg: object) -> None:
        devs = [dev] if isinstance(dev, Device) else list(dev)
        if not devs or not all(isinstance(d, Device) for d in devs):
            raise ArgumentTypeError("device is expected to be a Device or a list of Devices")
        if not any(d.device_type == cpu().device_type for d in devs):
            devs.append(cpu())
        default = self.POOLED_ALLOCATOR
        cfg: Mapping[Any, Any] = {}
        if memory_cfg is None or memory_cfg == "pooled":
            pass
        elif memory_cfg == "naive":
            default = self.NAIVE_ALLOCATOR
        elif isinstance(memory_cfg, Mapping):
            cfg = memory_cfg
        else:
            raise ArgumentTypeError(
                f"memory_cfg must be None, 'naive', 'pooled' or a dict, got {memory_cfg!r}"
            )
        args: list[int] = []
        for d in devs:
            kind = cfg.get(d, "pooled" if default == self.POOLED_ALLOCATOR else "naive")
            args += [
                d.device_type,
                d.device_id,
                self.NAIVE_ALLOCATOR if kind == "naive" else default,
            ]
        self._init(*args)

    def set_input(self, func_name: str, *args: object, **kwargs: object) -> None:
        """Set the inputs of ``func_name``, positionally or by parameter name."""
        if kwargs:
            params = self._exec.get_function_params(func_name)
            new_args: list[object] = [None] * len(params)
            for i, value in enumerate(args):
                new_args[i] = value
            for name, value in kwargs.items():
                if name not in params:
                    raise InputNotFoundError(f"function {func_name!r} has no input {name!r}")
                new_args[params.index(name)] = value
            args = tuple(new_args)
        self._set_input(func_name, *(convert_input(a) for a in args))

    def set_one_input(self, func_name: str, *args: object, **kwargs: object) -> None:
        """Set one input: ``(index_or_name, value)`` positionally, or ``name=value``."""
        key: object
        if kwargs:
            ((key, value),) = kwargs.items()
        else:
            key, value = args
        self._set_one_input(func_name, key, convert_input(value))

    def invoke(self, func_name: str, *args: object, **kwargs: object) -> Any:
        """Run ``func_name`` (after setting inputs if given); an NDArray or an ADT."""
        if args or kwargs:
            self.set_input(func_name, *args, **kwargs)
        return self._invoke(func_name)

    def run(self, *args: object, **kwargs: object) -> Any:
        """``invoke("main", ...)``."""
        return self.invoke("main", *args, **kwargs)

    def invoke_stateful(self, func_name: str, *args: object, **kwargs: object) -> None:
        """Run ``func_name``; read the result with :meth:`get_outputs`."""
        if args or kwargs:
            self.set_input(func_name, *args, **kwargs)
        self._invoke_stateful(func_name)

    def get_outputs(self) -> list[NDArray]:
        """The fields of the last result, or the result itself."""
        return [self._get_output(i) for i in range(self._get_num_outputs())]

    def get_input_index(self, input_name: str, func_name: str = "main") -> int:
        """The index of input ``input_name`` of ``func_name``, or -1."""
        return int(self._get_input_index(input_name, func_name))

    def benchmark(
        self,
        device: Device,
        *args: object,
        func_name: str = "main",
        repeat: int = 5,
        number: int = 5,
        min_repeat_ms: float | None = None,
        limit_zero_time_iterations: int = 100,
        end_to_end: bool = False,
        cooldown_interval_ms: float = 0,
        repeats_to_cooldown: int = 1,
        **kwargs: object,
    ) -> BenchmarkResult:
        """Time ``func_name``: ``repeat`` measurements of ``number`` runs each."""
        call_args: tuple[object, ...]
        if end_to_end:  # inputs copied in and outputs copied back to the CPU in every run
            if not args or kwargs:
                raise ArgumentTypeError(
                    "benchmark(end_to_end=True) takes the inputs as positional arguments"
                )
            inputs = [convert_input(a) for a in args]
            timed_name, call_args = (
                "invoke_return_to_device",
                (func_name, cpu().device_type, 0, *inputs),
            )
        else:
            if args or kwargs:
                self.set_input(func_name, *args, **kwargs)
            timed_name, call_args = "invoke", (func_name,)
        evaluator = self.module.time_evaluator(
            timed_name,
            device,
            repeat=repeat,
            number=number,
            min_repeat_ms=0 if min_repeat_ms is None else min_repeat_ms,
            limit_zero_time_iterations=limit_zero_time_iterations,
            cooldown_interval_ms=cooldown_interval_ms,
            repeats_to_cooldown=repeats_to_cooldown,
        )
        result: BenchmarkResult = evaluator(*call_args)
        return result
