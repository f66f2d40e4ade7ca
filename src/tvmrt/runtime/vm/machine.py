"""The ``VirtualMachine`` module: TVM's ``runtime::vm::VirtualMachine`` packed functions.

``init`` binds each virtual device to the first given device of its type, copies the
constants there once and looks every kernel up in the executable's library (a missing
one fails here, naming it); ``set_input``/``invoke``/``get_output`` then run functions
through the :class:`~tvmrt.runtime.vm.interpreter.Interpreter`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

import numpy as np

from tvmrt.error import (
    ArgumentTypeError,
    DeviceUnavailableError,
    FunctionNotFoundError,
    InputIndexError,
    InputNotFoundError,
    InvalidArgumentError,
    ModuleLoadError,
    TVMError,
)
from tvmrt.runtime.container import ADT
from tvmrt.runtime.device import Device
from tvmrt.runtime.device_api import Storage, get_device_api
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray, array
from tvmrt.runtime.packed_func import PackedFunc
from tvmrt.runtime.vm.decode import DecodedFunction
from tvmrt.runtime.vm.format import ExecutableData
from tvmrt.runtime.vm.interpreter import Interpreter, VMClosure, VMLimits

__all__ = ["VirtualMachineModule", "NAIVE_ALLOCATOR", "POOLED_ALLOCATOR", "bound_index"]

NAIVE_ALLOCATOR = 1
POOLED_ALLOCATOR = 2


class LoadedExecutable(Protocol):
    """What a VM needs of its executable (``executable.VMExecutable`` offers it)."""

    data: ExecutableData
    functions: list[DecodedFunction]

    @property
    def lib(self) -> Module: ...

    def late_bound_names(self) -> list[str]: ...

    def function(self, name: str) -> DecodedFunction: ...


def bound_index(given: Sequence[Device], dev_type: int) -> int | None:
    """Which of the ``given`` devices a virtual device of ``dev_type`` runs on, as TVM's VM
    binds it: the first of its type (None: no device of that type is given)."""
    return next((k for k, d in enumerate(given) if d.device_type == dev_type), None)


class VirtualMachineModule(Module):
    """A Relay VM over one executable (type key ``VirtualMachine``)."""

    def __init__(self, exe: LoadedExecutable, limits: VMLimits | None = None) -> None:
        super().__init__()
        self.exe = exe
        self.limits = limits or VMLimits()
        self.interp: Interpreter | None = None
        self.inputs: dict[str, list[object]] = {}
        self.result: object = None
        self._busy = threading.RLock()
        if isinstance(exe, Module):
            self.import_module(exe)

    @property
    def type_key(self) -> str:
        return "VirtualMachine"

    def _get_function(self, name: str) -> PackedFunc | None:
        table: dict[str, Callable[..., Any]] = {
            "init": self.init,
            "invoke": self.invoke,
            "invoke_stateful": self.invoke_stateful,
            "invoke_return_to_device": self.invoke_return_to_device,
            "get_output": self.get_output,
            "get_num_outputs": self.get_num_outputs,
            "get_input_index": self.get_input_index,
            "set_input": lambda func, *args: self.bind_inputs(func, list(enumerate(args)), True),
            "set_one_input": lambda func, key, value: self.bind_inputs(func, [(key, value)]),
        }
        func = table.get(name)
        return None if func is None else PackedFunc(func, name)

    @contextmanager
    def _entered(self, what: str) -> Iterator[None]:
        """One call at a time: init, the inputs, invoke and the outputs while another
        thread's call runs are refused (the C VM's rule and words)."""
        if not self._busy.acquire(blocking=False):
            raise TVMError(
                f"VirtualMachine.{what}: this VirtualMachine is already running in another "
                "thread (give each thread its own VM)"
            )
        try:
            yield
        finally:
            self._busy.release()

    # -- init ---------------------------------------------------------------------------
    def init(self, *args: object) -> None:
        """``init(dev_type, dev_id, alloc_type, ...)``: one triple per device."""
        with self._entered("init"):
            self._init(*args)

    def _init(self, *args: object) -> None:
        if not args or len(args) % 3:
            raise ArgumentTypeError(
                "init takes (device_type, device_id, allocator_type) triples, "
                f"got {len(args)} values"
            )
        given = []
        allocators: list[int] = []
        for i in range(0, len(args), 3):
            dev_type, dev_id, alloc = args[i : i + 3]
            if not all(isinstance(v, int | np.integer) for v in (dev_type, dev_id, alloc)):
                raise ArgumentTypeError(f"init: triple {i // 3} is not three integers")
            if int(alloc) not in (NAIVE_ALLOCATOR, POOLED_ALLOCATOR):  # type: ignore[call-overload]
                raise InvalidArgumentError(
                    f"init: allocator type {alloc} is not 1 (naive) or 2 (pooled)"
                )
            given.append(Device(int(dev_type), int(dev_id)))  # type: ignore[call-overload]
            allocators.append(int(alloc))  # type: ignore[call-overload]
        self.setup(given, allocators)

    def setup(self, given: Sequence[Device], allocators: Sequence[int] = ()) -> None:
        """Bind the virtual devices to ``given``, place the constants, find the kernels.

        ``allocators[i]`` is the allocator of ``given[i]`` (default pooled).
        """
        data = self.exe.data
        late = self.exe.late_bound_names()
        if late:
            raise ModuleLoadError(
                f"Need to load late-bound-constants before creating VM: {len(late)} "
                f"constants ({', '.join(late[:4])}{', ...' if len(late) > 4 else ''}) are "
                "not loaded"
            )
        devices = []
        pooled = []
        for i, (dev_type, _dev_id, _scope) in enumerate(data.virtual_devices):
            at = bound_index(given, dev_type)
            match = None if at is None else given[at]
            pooled.append(at is None or at >= len(allocators) or allocators[at] == POOLED_ALLOCATOR)
            if match is None:
                raise DeviceUnavailableError(
                    f"virtual device {i} needs a device of type {dev_type}; the VM was given "
                    f"{', '.join(str(d) for d in given)}"
                )
            devices.append(match)
        apis = [get_device_api(d) for d in devices]
        constants = []
        for k, const in enumerate(data.constants):
            assert isinstance(const, NDArray)
            dev = devices[data.const_device_indexes[k]]
            constants.append(const if const.device == dev else const.copyto(dev))
        lib = self.exe.lib
        kernels = []
        for name in data.primitive_names:
            func = lib.find_function(name, True)
            if func is None:
                raise FunctionNotFoundError(
                    f"the executable calls kernel {name!r}, which its library "
                    f"({lib.type_key!r} module) does not have"
                )
            kernels.append(func)
        self.interp = Interpreter(
            self.exe.functions, devices, apis, constants, kernels, self.limits, pooled
        )

    def _interp(self) -> Interpreter:
        if self.interp is None:
            raise ModuleLoadError("the VirtualMachine is not initialised: call init first")
        return self.interp

    # -- inputs -------------------------------------------------------------------------
    def _convert(self, value: object, dev: Device, index: int, nested: bool = False) -> object:
        if isinstance(value, ADT):
            return ADT(value.tag, [self._convert(v, dev, index, True) for v in value.fields])
        if isinstance(value, NDArray):
            return value if value.device == dev else value.copyto(dev)
        if isinstance(value, np.ndarray):
            return array(value, dev)
        if nested and isinstance(value, VMClosure | Storage):  # the C VM's words
            kind = "a closure" if isinstance(value, VMClosure) else "a storage"
            raise ArgumentTypeError(
                f"input {index} holds {kind} (a field of an ADT); a VM input holds tensors and "
                "ADTs of tensors only: a closure or a storage belongs to the executable that "
                "made it"
            )
        raise ArgumentTypeError(
            "a VM input must be an NDArray, a numpy array or a tuple (ADT), "
            f"got {type(value).__name__}"
        )

    def bind_inputs(
        self, func_name: str, keyed: Sequence[tuple[object, object]], every: bool = False
    ) -> None:
        """Set inputs of ``func_name``, each ``(index or parameter name, value)``.

        TVM's ``set_input`` gives ``every`` input, in parameter order; ``set_one_input``
        gives one, keeping the others.
        """
        with self._entered("set_input" if every else "set_one_input"):
            self._bind_inputs(func_name, keyed, every)

    def _bind_inputs(
        self, func_name: str, keyed: Sequence[tuple[object, object]], every: bool
    ) -> None:
        interp = self._interp()
        func = self.exe.function(func_name)
        if every and len(keyed) != len(func.params):
            raise InvalidArgumentError(
                f"function {func_name!r} takes {len(func.params)} inputs "
                f"({', '.join(func.params)}), got {len(keyed)}"
            )
        kept = self.inputs.get(func.name)
        current: list[object] = [None] * len(func.params) if every or kept is None else kept
        for key, value in keyed:
            if isinstance(key, str):
                index = self.get_input_index(key, func_name)
                if index < 0:
                    raise InputNotFoundError(f"function {func_name!r} has no input {key!r}")
            elif isinstance(key, int | np.integer) and 0 <= int(key) < len(func.params):
                index = int(key)
            else:
                raise InputIndexError(f"function {func_name!r} has no input {key!r}")
            current[index] = self._convert(value, interp.devices[func.param_devices[index]], index)
        self.inputs[func.name] = current

    def get_input_index(self, input_name: str, func_name: str = "main") -> int:
        """The index of parameter ``input_name`` of ``func_name``, or -1."""
        func = self.exe.function(func_name)
        return func.params.index(input_name) if input_name in func.params else -1

    # -- running ------------------------------------------------------------------------
    def invoke(self, func_name: str) -> object:
        """Run ``func_name`` on the inputs set; returns an NDArray or an ADT."""
        with self._entered("invoke"):
            return self._invoke(func_name)

    def _invoke(self, func_name: str) -> object:
        interp = self._interp()
        func = self.exe.function(func_name)
        args = self.inputs.get(func.name, [])
        if func.params and (len(args) != len(func.params) or any(a is None for a in args)):
            raise InputNotFoundError(
                f"set the inputs of {func_name!r} ({', '.join(func.params)}) before invoking it"
            )
        self.result = interp.run(func.index, args)
        return self.result

    def invoke_stateful(self, func_name: str) -> None:
        """Run ``func_name``; read the result with ``get_output``."""
        with self._entered("invoke_stateful"):
            self._invoke(func_name)

    def invoke_return_to_device(
        self, func_name: str, dev_type: int, dev_id: int, *inputs: object
    ) -> object:
        """Set the inputs, run, and return the result copied to ``(dev_type, dev_id)``."""
        with self._entered("invoke_return_to_device"):
            self._bind_inputs(func_name, list(enumerate(inputs)), True)
            result = self._invoke(func_name)
            return _to_device(result, Device(int(dev_type), int(dev_id)))

    def get_num_outputs(self) -> int:
        """The number of fields of the last result (1 for a tensor)."""
        with self._entered("get_num_outputs"):
            return len(self.result.fields) if isinstance(self.result, ADT) else 1

    def get_output(self, index: int) -> NDArray:
        """Field ``index`` of the last result (which must be a tensor)."""
        with self._entered("get_output"):
            return self._get_output(index)

    def _get_output(self, index: int) -> NDArray:
        result = self.result
        value = (
            result.fields[index] if isinstance(result, ADT) and 0 <= index < len(result) else None
        )
        if not isinstance(result, ADT) and index == 0:
            value = result
        if not isinstance(value, NDArray):
            raise InputIndexError(
                f"output {index} is not a tensor of the last result "
                f"({self.get_num_outputs()} outputs)"
            )
        return value


def _to_device(value: object, dev: Device) -> object:
    if isinstance(value, ADT):
        return ADT(value.tag, [_to_device(v, dev) for v in value.fields])
    if isinstance(value, NDArray) and value.device != dev:
        return value.copyto(dev)
    return value
