"""TVM's ``tvm.runtime.vm`` Python face: ``Executable`` and ``VirtualMachine``.

Thin, as TVM's own ``python/tvm/runtime/vm.py`` (v0.16): each method calls one packed
function of the ``VMExecutable`` or ``VirtualMachine`` module (``Executable`` is in
:mod:`.executable_api`).

``VirtualMachine`` is also a :class:`~tvmrt.runtime.executor.protocol.Executor` (tvmrt
extension) running ``main``. A VM function has no static input shapes or dtypes, so
:attr:`VirtualMachine.inputs` gives each parameter with shape ``()`` and dtype ``""``
("given by the data"); a tuple-typed parameter ``p`` is set field by field as ``p.0``,
``p.1``, ... (the keys of the relayvm goldens). The outputs are the fields of the returned
tuple, ``output_0``, ``output_1``, ..., known after the first run.

The VM runs on the C runtime's interpreter (:mod:`.native`) when the device is the CPU,
the executable came from its file and nothing needs Python (the profiler); otherwise on
tvmrt's Python interpreter (:mod:`.machine`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from tvmrt.binfmt.files import file_identity
from tvmrt.error import ArgumentTypeError, InputNotFoundError, TVMError, UnsupportedError
from tvmrt.runtime.benchmark import BenchmarkResult
from tvmrt.runtime.device import Device, cpu
from tvmrt.runtime.executor.protocol import TensorInfo
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray, array
from tvmrt.runtime.object import Object
from tvmrt.runtime.relax_vm import VirtualMachine as RelaxVirtualMachine
from tvmrt.runtime.relax_vm import is_relax_executable
from tvmrt.runtime.vm.executable_api import Executable, convert, convert_input
from tvmrt.runtime.vm.native import library_refusal, native_module, native_source

__all__ = ["DYNAMIC_DTYPE", "Executable", "VirtualMachine", "Module", "Object", "convert"]

DYNAMIC_DTYPE = ""  # TensorInfo.dtype of an input whose shape and dtype the data gives
_KDLCPU = 1  # the CPU's device type: the C VM runs there
_FIELD = re.compile(r"^(?P<param>.+)\.(?P<index>\d+)$")


def _identity(path: str) -> tuple[int, int, int, int] | None:
    """``file_identity`` of ``path``, None when it is gone."""
    try:
        return file_identity(path)
    except OSError:
        return None


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
    engine
        tvmrt: ``"native"`` (the Relay VM in C, ``libtvmrt_runtime``; an error saying why
        if it cannot run this VM), ``"python"`` (tvmrt's Python interpreter), or None: the
        C VM when it can, else the interpreter (``TVMRT_VM_ENGINE`` gives the default).
        :attr:`engine` and :attr:`engine_reason` say which runs and why
        (docs/c_runtime.md, "The Relay VM from Python").
    """

    NAIVE_ALLOCATOR = 1
    POOLED_ALLOCATOR = 2

    def __new__(
        cls,
        exe: Executable | Module,
        device: Device | Sequence[Device] | None = None,
        memory_cfg: object = None,
        *,
        engine: str | None = None,
        **subclass_kwargs: Any,  # a subclass's own (the profiler's dump_root)
    ) -> Any:
        # TVM 0.27's tvm.runtime.vm.VirtualMachine runs Relax executables: so does this
        if isinstance(exe, Module) and is_relax_executable(exe):
            if device is None:
                raise ArgumentTypeError("VirtualMachine needs a device (or a list of devices)")
            return RelaxVirtualMachine(exe, device, memory_cfg)  # type: ignore[arg-type]
        return super().__new__(cls)

    def __init__(
        self,
        exe: Executable | Module,
        device: Device | Sequence[Device],
        memory_cfg: object = None,
        *,
        engine: str | None = None,
    ) -> None:
        mod = exe.mod if isinstance(exe, Executable) else exe
        if not isinstance(mod, Module) or mod.type_key != "VMExecutable":
            raise ArgumentTypeError(
                f"VirtualMachine needs an Executable or a VMExecutable module, got {exe!r}"
            )
        if engine is None:  # tvmrt: TVMRT_VM_ENGINE chooses for VMs made without engine=
            engine = os.environ.get("TVMRT_VM_ENGINE") or None
        if engine not in (None, "native", "python"):
            raise ArgumentTypeError(
                f"engine (or TVMRT_VM_ENGINE) must be unset, 'native' or 'python', got {engine!r}"
            )
        self._exec = exe if isinstance(exe, Executable) else Executable(mod)
        init_args = self._init_args(device, memory_cfg)
        self.module: Any  # the VirtualMachine module: the C VM's, or the Python interpreter's
        self.engine, self.engine_reason = "python", self._native_refusal(mod, init_args, engine)
        if not self.engine_reason:
            try:
                late = [path for path, _ in getattr(mod, "late_bound_files", ())]
                self.module = native_module(native_source(mod), init_args, late)
                self.engine, self.engine_reason = "native", "CPU executable loaded from its file"
            except TVMError as exc:
                if engine == "native":
                    raise
                self.engine_reason = f"the C runtime refused it: {exc}"
        elif engine == "native":
            raise UnsupportedError(f"the Relay VM cannot run in C here: {self.engine_reason}")
        if self.engine == "python":
            self.module = mod["vm_load_executable"]()
            self.module["init"](*init_args)
        self._init = self.module["init"]
        self._invoke = self.module["invoke"]
        self._invoke_stateful = self.module["invoke_stateful"]
        self._get_output = self.module["get_output"]
        self._get_num_outputs = self.module["get_num_outputs"]
        self._get_input_index = self.module["get_input_index"]
        self._set_input = self.module["set_input"]
        self._set_one_input = self.module["set_one_input"]
        self._one_call = self.module.invoke_return_to_device if self.engine == "native" else None
        self._device = device
        self._memory_cfg = memory_cfg
        self._engine_wanted = engine
        self._functions: dict[str, bool] = {}
        self._given: dict[str, object] = {}  # Executor inputs of main, set at run
        self._ran = False

    def _native_refusal(self, mod: Module, init_args: list[int], engine: str | None) -> str:
        """Why the C VM cannot run this VM ("" if it can); ``engine`` as given."""
        if engine == "python":
            return "the Python engine was asked for"
        if any(t != cpu().device_type for t in init_args[0::3]):
            return "a device other than the CPU is given (the C runtime runs CPU kernels only)"
        if getattr(mod, "changed", ""):
            return f"the executable changed after loading: {getattr(mod, 'changed', '')}"
        for path, seen in getattr(mod, "late_bound_files", ()):
            if _identity(path) != seen:
                return f"the late-bound constants file {path!r} changed after it was loaded"
        source = native_source(mod)
        if source is None:
            return "the executable was not loaded from a file (vm.so, or code.ro and a lib.so)"
        return library_refusal(source, mod if source[0] == "so" else mod.imported_modules[0])

    @staticmethod
    def _given_devices(dev: Device | Sequence[Device]) -> list[Device]:
        """The devices ``init`` is given: ``dev``, and a CPU if it has none."""
        devs = [dev] if isinstance(dev, Device) else list(dev)
        if not devs or not all(isinstance(d, Device) for d in devs):
            raise ArgumentTypeError("device is expected to be a Device or a list of Devices")
        if not any(d.device_type == cpu().device_type for d in devs):
            devs.append(cpu())
        return devs

    def _init_args(self, dev: Device | Sequence[Device], memory_cfg: object) -> list[int]:
        """``init``'s (device type, device id, allocator) triples; a CPU is added."""
        devs = self._given_devices(dev)
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
        return args

    def set_input(self, func_name: int | str, *args: object, **kwargs: object) -> None:
        """Set the inputs of ``func_name``, positionally or by parameter name.

        As an :class:`~tvmrt.runtime.executor.protocol.Executor` (tvmrt extension),
        ``set_input(key, value)`` with a key that names no function keeps ``value`` for
        input ``key`` of ``main`` (a parameter name or index, or ``p.N``: field ``N`` of
        the tuple parameter ``p``) until :meth:`run`; a function's name wins.
        """
        if isinstance(func_name, int) or not self._is_function(func_name):
            if kwargs or len(args) != 1:
                raise ArgumentTypeError(
                    f"{func_name!r} names no function: set_input(key, value) sets one input "
                    "of 'main'"
                )
            (value,) = args
            self._given[self._main_key(func_name)] = (
                value if isinstance(value, NDArray) else array(np.asarray(value))
            )
            return
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
        if self._one_call is not None and args and not kwargs and self._is_function(func_name):
            inputs = [convert_input(a) for a in args]  # the C VM: set and run in one call
            return self._one_call(func_name, _KDLCPU, 0, *inputs)
        if args or kwargs:
            self.set_input(func_name, *args, **kwargs)
        return self._invoke(func_name)

    def run(self, *args: object, **kwargs: object) -> Any:
        """``invoke("main", ...)``; without arguments, on the inputs kept by
        ``set_input(key, value)`` if there are any (tvmrt)."""
        if not args and not kwargs and self._given:
            args = tuple(self._arguments())
        result = self.invoke("main", *args, **kwargs)
        self._ran = True
        return result

    def invoke_stateful(self, func_name: str, *args: object, **kwargs: object) -> None:
        """Run ``func_name``; read the result with :meth:`get_outputs`."""
        if args or kwargs:
            self.set_input(func_name, *args, **kwargs)
        self._invoke_stateful(func_name)
        self._ran = True

    def invoke_with_outputs(
        self,
        func_name: str,
        input_args: Mapping[str, object] | None,
        output_args: Sequence[NDArray],
    ) -> None:
        """Run ``func_name`` on ``input_args`` (by name; None: the inputs set before) and
        write its outputs into ``output_args`` (TVM v0.19's call).

        TVM's VM writes into the given tensors directly; tvmrt runs the function and copies
        each output in, after checking that count, shapes and dtypes match.
        """
        if input_args:
            self.set_input(func_name, **input_args)
        self._invoke_stateful(func_name)
        self._ran = True
        results = self.get_outputs()
        if len(results) != len(output_args):
            raise ArgumentTypeError(
                f"{func_name!r} has {len(results)} outputs; {len(output_args)} output tensors given"
            )
        for i, (result, out) in enumerate(zip(results, output_args, strict=True)):
            if not isinstance(out, NDArray) or (out.shape, out.dtype) != (
                result.shape,
                result.dtype,
            ):
                raise ArgumentTypeError(
                    f"output {i} of {func_name!r} is a {result.dtype}{list(result.shape)} "
                    f"tensor; the output tensor given is {out!r}"
                )
            result.copyto(out)

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

    # -- tvmrt's Executor interface: main, its parameters by name --------------------------
    def _is_function(self, name: str) -> bool:
        known = self._functions.get(name)
        if known is None:
            known = self._functions[name] = int(self._exec.mod["get_function_arity"](name)) >= 0
        return known

    @property
    def main_params(self) -> list[str]:
        """The parameter names of ``main`` (tvmrt)."""
        return self._exec.get_function_params("main")

    def _main_key(self, key: int | str) -> str:
        params = self.main_params
        if isinstance(key, int) and 0 <= key < len(params):
            return params[key]
        if isinstance(key, str):
            match = _FIELD.match(key)
            if key in params or (match and match["param"] in params):
                return key
        raise InputNotFoundError(
            f"the Relay VM function 'main' has no input {key!r}; its inputs are "
            f"{', '.join(params)} (a tuple input p is given as p.0, p.1, ...)"
        )

    def _arguments(self) -> list[object]:
        args: list[object] = []
        for p in self.main_params:
            if p in self._given:
                args.append(self._given[p])
                continue
            fields: list[object] = []
            while f"{p}.{len(fields)}" in self._given:
                fields.append(self._given[f"{p}.{len(fields)}"])
            if not fields:
                raise InputNotFoundError(f"input {p!r} of the Relay VM function 'main' is not set")
            args.append(tuple(fields))
        return args

    @property
    def inputs(self) -> list[TensorInfo]:
        """``main``'s parameters; their shapes and dtypes come with the data."""
        return [TensorInfo(p, (), DYNAMIC_DTYPE) for p in self.main_params]

    @property
    def outputs(self) -> list[TensorInfo]:
        """The outputs of the last run (none before the first)."""
        infos = []
        for i in range(int(self._get_num_outputs()) if self._ran else 0):
            arr = self._get_output(i)
            infos.append(TensorInfo(f"output_{i}", tuple(arr.shape), str(arr.dtype)))
        return infos

    def output_labels(self) -> list[str]:
        """``output_0``, ``output_1``, ...: the fields of the last result."""
        return [t.name for t in self.outputs]

    def get_input(self, key: int | str) -> NDArray:
        """The array kept for input ``key`` of ``main`` (tvmrt)."""
        name = self._main_key(key)
        value = self._given.get(name)
        if not isinstance(value, NDArray):
            raise InputNotFoundError(f"input {name!r} of 'main' is not set")
        return value

    def get_num_inputs(self) -> int:
        """The number of ``main``'s parameters (tvmrt)."""
        return len(self.main_params)

    def get_output(self, index: int) -> NDArray:
        """Field ``index`` of the last result (tvmrt)."""
        count = int(self._get_num_outputs()) if self._ran else 0
        if not 0 <= index < count:
            raise InputNotFoundError(f"output {index} does not exist: the last run gave {count}")
        return self._get_output(index)  # type: ignore[no-any-return]

    def weight_problems(self, given: Collection[str]) -> list[str]:
        """None: the weights are the executable's constants."""
        return []

    def replicate(self, count: int) -> list[VirtualMachine]:
        """``count`` more VMs over the same executable (its constants are shared)."""
        return [
            type(self)(self._exec, self._device, self._memory_cfg, engine=self._engine_wanted)
            for _ in range(count)
        ]
