"""The Relax virtual machine's Python face (TVM's ``tvm.runtime.relax_vm`` / ``tvm.relax``).

:class:`VirtualMachine` is TVM v0.19's class, over the C runtime's ``relax.VirtualMachine``
module (``_native/runtime/relax_vm.c``), which runs every era's executable (TVM 0.16 to
0.27, bytecode mode): ``vm["main"](*args)``, ``set_input`` / ``invoke_stateful`` /
``get_outputs``, ``save_function``, ``invoke_closure``, ``set_instrument``,
``time_evaluator`` and ``profile``. It is also tvmrt's
:class:`~tvmrt.runtime.executor.protocol.Executor` (``tvmrt run``, ``bench``, ``serve``):
``main``'s parameters are its inputs, read with their shapes and dtypes from the
executable's own checks (a symbolic dimension is -1), and the result's tensors, a tuple
flattened depth first, its outputs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from enum import IntEnum
from typing import Any

import numpy as np

from tvmrt.error import ArgumentTypeError, InputNotFoundError, InvalidArgumentError
from tvmrt.runtime.benchmark import BenchmarkResult
from tvmrt.runtime.container import Array
from tvmrt.runtime.device import Device, cpu
from tvmrt.runtime.device_type import RPC_SESS_MASK
from tvmrt.runtime.dtype import DataType
from tvmrt.runtime.executor.protocol import TensorInfo
from tvmrt.runtime.module import Module
from tvmrt.runtime.native_module import NativeModule
from tvmrt.runtime.ndarray import NDArray, array
from tvmrt.runtime.object import ShapeTuple
from tvmrt.runtime.profiling import Report

__all__ = ["VMInstrumentReturnKind", "VirtualMachine", "describe", "is_relax_executable"]

RELAX_KINDS = ("relax.Executable", "relax.VMExecutable")


class VMInstrumentReturnKind(IntEnum):
    """What an instrument returns before a call (TVM's ``VMInstrumentReturnKind``)."""

    NO_OP = 0
    SKIP_RUN = 1  # skip the following call, only valid in before


def is_relax_executable(mod: object) -> bool:
    """Whether ``mod`` is a Relax VM executable module (``load_module("model.so")``)."""
    return isinstance(mod, NativeModule) and mod.type_key in RELAX_KINDS


def _is_remote(mod: object) -> bool:
    """Whether ``mod`` is a module of an RPC session (a server's executable or VM): its
    packed functions are called there, so what it is is known only by calling them."""
    return isinstance(mod, Module) and mod.type_key == "rpc"


def describe(mod: Module) -> dict[str, Any]:
    """What the C runtime read from an executable (tvmrt): era, functions, their parameters
    and signatures, the names the function table resolves and what provides each."""
    if not (is_relax_executable(mod) or _is_remote(mod)):
        raise ArgumentTypeError(f"{mod!r} is not a Relax VM executable")
    described: dict[str, Any] = json.loads(str(mod["describe"]()))
    return described


def _dims(sig: Mapping[str, Any]) -> tuple[int, ...]:
    shape = sig.get("shape")
    if shape is not None:
        return tuple(int(d) for d in shape)
    ndim = int(sig.get("ndim", -1))
    return tuple([-1] * ndim) if ndim >= 0 else ()


class VirtualMachine:
    """A Relax VM running one executable (TVM v0.19's ``relax.VirtualMachine``).

    Parameters
    ----------
    rt_mod
        The executable: ``load_module("model.so")`` of what ``export_library`` wrote.
    device
        One device or a list; a CPU is added last if it is not (shape functions run there).
    memory_cfg
        ``None``/``"pooled"``, ``"naive"``, or a dict device -> either.
    profile
        Accepted as in TVM 0.19 (``profile()`` works either way in tvmrt).
    """

    NAIVE_ALLOCATOR = 1
    POOLED_ALLOCATOR = 2

    def __init__(
        self,
        rt_mod: Module,
        device: Device | Sequence[Device],
        memory_cfg: str | Mapping[Device, str] | None = None,
        profile: bool = False,
    ) -> None:
        if not (is_relax_executable(rt_mod) or _is_remote(rt_mod)):
            raise ArgumentTypeError(
                f"relax.VirtualMachine needs a Relax VM executable (load_module of a "
                f"model.so that relax.build / tvm.compile exported), got {rt_mod!r}"
            )
        load = "vm_profiler_load_executable" if profile else "vm_load_executable"
        self._exec = rt_mod
        self.module: Module = rt_mod[load]()
        self._invoke_closure = self.module["invoke_closure"]
        self._save_function = self.module["save_function"]
        self._set_input = self.module["set_input"]
        self._invoke_stateful = self.module["invoke_stateful"]
        self._get_output = self.module["get_output"]
        self._get_output_arity = self.module["get_output_arity"]
        self._get_function_arity = self.module["get_function_arity"]
        self._get_function_param_name = self.module["get_function_param_name"]
        self._set_instrument = self.module["set_instrument"]
        self._device, self._memory_cfg = device, memory_cfg
        self._setup_device(device, memory_cfg)
        self._described: dict[str, Any] | None = None
        self._given: dict[str, object] = {}  # Executor inputs of main, set at run
        self._last: list[NDArray] = []

    def _setup_device(self, dev: Device | Sequence[Device], memory_cfg: object) -> None:
        devs: list[Device] = list(dev) if isinstance(dev, list | tuple) else [dev]  # type: ignore[list-item]
        if not devs or not all(isinstance(d, Device) for d in devs):
            raise ArgumentTypeError("dev is expected to be Device or List[Device]")
        session = devs[0].device_type // RPC_SESS_MASK * RPC_SESS_MASK  # 0: local
        if devs[-1].device_type % RPC_SESS_MASK != cpu().device_type:
            devs.append(Device(session + cpu().device_type, 0))  # shape functions run there
        self._host = devs[-1]  # where the face puts the arrays it makes (an RPC session's CPU)
        default = self.POOLED_ALLOCATOR
        cfg: Mapping[Any, Any] = {}
        if memory_cfg is None:
            pass
        elif isinstance(memory_cfg, str):
            if memory_cfg not in ("naive", "pooled"):
                raise InvalidArgumentError(
                    f"memory_cfg must be 'naive' or 'pooled', got {memory_cfg!r}"
                )
            if memory_cfg == "naive":
                default = self.NAIVE_ALLOCATOR
        elif isinstance(memory_cfg, Mapping):
            cfg = memory_cfg
        else:
            raise ArgumentTypeError(
                f"memory_cfg is expected be string or dictionary, but received {type(memory_cfg)}"
            )
        init_args: list[int] = []
        names = {"naive": self.NAIVE_ALLOCATOR, "pooled": self.POOLED_ALLOCATOR}
        for d in devs:
            kind = cfg.get(d)
            alloc = int(kind) if isinstance(kind, int) else names.get(str(kind), default)
            init_args += [d.device_type % RPC_SESS_MASK, d.device_id, alloc]
        self.module["vm_initialization"](*init_args)

    # -- TVM's calls ---------------------------------------------------------------------
    def __getitem__(self, key: str) -> Callable[..., Any]:
        return self.module[key]

    def invoke_closure(self, closure: object, *args: Any) -> Any:
        """Invoke a closure (a ``VMClosure`` the VM returned) on ``args``."""
        return self._invoke_closure(closure, *args)

    def save_function(
        self,
        func_name: str,
        saved_name: str,
        *args: Any,
        include_return: bool = True,
        **kwargs: Any,
    ) -> None:
        """Save ``func_name`` bound to ``args`` as ``saved_name`` (``vm[saved_name]()``)."""
        if kwargs:
            args = tuple(self._convert_func_named_args(func_name, args, **kwargs))
        cargs: list[Any] = []
        for arg in args:
            self._convert(arg, cargs)
        self._save_function(func_name, saved_name, int(include_return), *cargs)

    def _convert(self, arg: Any, cargs: list[Any]) -> None:
        """TVM's argument conversion: numpy arrays and numbers become CPU NDArrays."""
        if isinstance(arg, NDArray | str) or hasattr(arg, "handle"):
            cargs.append(arg)
        elif isinstance(arg, np.ndarray):
            cargs.append(array(arg, device=self._host))
        elif isinstance(arg, tuple | list):
            fields: list[Any] = []
            for field in arg:
                self._convert(field, fields)
            cargs.append(tuple(fields))
        elif isinstance(arg, bool | int | float | np.number):
            dtype = (
                "float16"
                if isinstance(arg, np.float16)
                else "int32"
                if isinstance(arg, bool | int | np.integer)
                else "float32"
            )
            cargs.append(array(np.array(arg, dtype=dtype), device=self._host))
        else:
            raise ArgumentTypeError(f"Unsupported type: {type(arg)}")

    def _convert_func_named_args(self, func_name: str, args: Any, **kwargs: Any) -> list[Any]:
        params = self.function_params(func_name)
        new_args: list[Any] = [None] * len(params)
        count = 0
        for key, value in kwargs.items():
            if key not in params:
                raise InputNotFoundError(f"function {func_name!r} has no parameter {key!r}")
            new_args[params.index(key)] = value
            count += 1
        if len(args) + count != len(params):
            raise InvalidArgumentError(
                f"{func_name!r} takes {len(params)} arguments ({', '.join(params)}), got "
                f"{len(args) + count}"
            )
        it = iter(args)
        return [next(it) if a is None else a for a in new_args]

    def function_params(self, func_name: str) -> list[str]:
        """The parameter names of ``func_name`` (TVM's ``get_function_param_name``)."""
        arity = int(self._get_function_arity(func_name))
        return [str(self._get_function_param_name(func_name, i)) for i in range(arity)]

    def set_input(self, func_name: int | str, *args: Any, **kwargs: Any) -> None:
        """Set the inputs of ``func_name`` for :meth:`invoke_stateful` (copied to the VM's
        device); ``set_input(key, value)`` with a key of ``main`` (a name or an index) keeps
        one input for :meth:`run` (tvmrt's Executor call)."""
        main_key = isinstance(func_name, int) or self._is_main_key(func_name)
        if not kwargs and len(args) == 1 and main_key:
            key, value = self._main_key(func_name), args[0]
            if not isinstance(value, NDArray):  # copied now, to the host, in main's dtype
                want = next((t.dtype for t in self.inputs if t.name == key), "")
                dtype = DataType(want).numpy_dtype if want else None
                value = array(np.asarray(value, dtype=dtype), self._host)
            self._given[key] = value
            return
        if isinstance(func_name, int):
            raise InvalidArgumentError(f"set_input({func_name}, ...) sets one input of 'main'")
        cargs: list[Any] = []
        if kwargs:
            args = tuple(self._convert_func_named_args(func_name, args, **kwargs))
        for arg in args:
            self._convert(arg, cargs)
        self._set_input(func_name, *cargs)

    def invoke_stateful(self, func_name: str) -> None:
        """Run ``func_name`` on the inputs :meth:`set_input` gave; see :meth:`get_outputs`."""
        self._invoke_stateful(func_name)

    def get_outputs(self, func_name: str) -> Any:
        """The result of the last :meth:`invoke_stateful` of ``func_name`` (a tuple of its
        fields, nested, for a tuple)."""

        def rec(*idx: int) -> Any:
            arity = int(self._get_output_arity(func_name, *idx))
            if arity == -1:
                return self._get_output(func_name, *idx)
            return tuple(rec(*idx, i) for i in range(arity))

        return rec()

    def set_instrument(self, instrument: Callable[..., Any]) -> None:
        """Call ``instrument(func, func_symbol, before_run, ret_value, *args)`` around every
        Call instruction (its answer before a call may be ``VMInstrumentReturnKind``)."""
        self._set_instrument(instrument)

    def time_evaluator(
        self,
        func_name: str,
        dev: Device,
        number: int = 10,
        repeat: int = 1,
        min_repeat_ms: int = 0,
        cooldown_interval_ms: int = 0,
        repeats_to_cooldown: int = 1,
        f_preproc: str = "",
    ) -> Callable[..., BenchmarkResult]:
        """An evaluator timing ``vm[func_name]`` (TVM's ``Module.time_evaluator``)."""
        return self.module.time_evaluator(
            func_name,
            dev,
            number=number,
            repeat=repeat,
            min_repeat_ms=min_repeat_ms,
            cooldown_interval_ms=cooldown_interval_ms,
            repeats_to_cooldown=repeats_to_cooldown,
            f_preproc=f_preproc,
        )

    def profile(self, func_name: str, *args: Any) -> Report:
        """Run ``func_name`` once to warm up, then once timing every call: TVM's Report."""
        cargs: list[Any] = []
        for arg in args:
            self._convert(arg, cargs)
        return Report.from_json(str(self.module["profile"](func_name, *cargs)))

    # -- tvmrt's Executor interface: main, its parameters by name --------------------------
    def describe(self) -> dict[str, Any]:
        """:func:`describe` of this VM's executable (tvmrt)."""
        if self._described is None:
            self._described = describe(self._exec)
        return self._described

    def _main(self) -> dict[str, Any]:
        for fn in self.describe()["functions"]:
            if fn["name"] == "main" and fn["kind"] in ("vm", "vm_tir"):
                return dict(fn)
        raise InputNotFoundError("the Relax executable has no function 'main'")

    @property
    def main_params(self) -> list[str]:
        """The parameter names of ``main`` (tvmrt)."""
        return [str(p) for p in self._main()["params"]]

    def _is_main_key(self, key: object) -> bool:
        return isinstance(key, str) and key in self.main_params and not self._has_function(key)

    def _has_function(self, name: str) -> bool:
        return any(fn["name"] == name for fn in self.describe()["functions"])

    def _main_key(self, key: int | str) -> str:
        params = self.main_params
        if isinstance(key, int) and 0 <= key < len(params):
            return params[key]
        if isinstance(key, str) and key in params:
            return key
        raise InputNotFoundError(
            f"the Relax function 'main' has no input {key!r}; its inputs are {', '.join(params)}"
        )

    @property
    def inputs(self) -> list[TensorInfo]:
        """``main``'s tensor parameters, with the shapes and dtypes its checks name (-1 where
        a dimension is symbolic, "" where the executable checks no dtype)."""
        main = self._main()
        sigs = main.get("signature") or [{} for _ in main["params"]]
        return [
            TensorInfo(str(name), _dims(sig), str(sig.get("dtype", "")))
            for name, sig in zip(main["params"], sigs, strict=True)
        ]

    @property
    def outputs(self) -> list[TensorInfo]:
        """The last run's tensors (a tuple flattened), else what ``main`` declares."""
        if self._last:
            return [
                TensorInfo(f"output_{i}", tuple(a.shape), str(a.dtype))
                for i, a in enumerate(self._last)
            ]
        returns = self._main().get("returns", {})
        if returns.get("kind") == "tensor":
            return [TensorInfo("output_0", _dims(returns), str(returns.get("dtype", "")))]
        return []

    def output_labels(self) -> list[str]:
        """``output_0``, ``output_1``, ...: the result's tensors, depth first."""
        return [t.name for t in self.outputs]

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """``vm["main"](...)``; without arguments, on the inputs :meth:`set_input` kept."""
        if not args and not kwargs:
            args = tuple(self._arguments())
        elif kwargs:
            args = tuple(self._convert_func_named_args("main", args, **kwargs))
        if _is_remote(self.module):  # results stay on the server: read them by index
            self._set_input("main", *args)
            self._invoke_stateful("main")
            result = self.get_outputs("main")
            self._last = _flatten(result, self._remote_shape)
            return result
        result = self.module["main"](*args)
        self._last = _flatten(result)
        return result

    def _remote_shape(self, value: object) -> object:
        """A server's ShapeTuple (a remote object) as a local one, through TVM's globals."""
        find = getattr(self.module, "remote_global_func", None)
        if find is None or isinstance(value, NDArray | int | float):
            return value
        size, elem = find("runtime.GetShapeTupleSize"), find("runtime.GetShapeTupleElem")
        return ShapeTuple([int(elem(value, i)) for i in range(int(size(value)))])

    def _arguments(self) -> list[object]:
        out: list[object] = []
        for p in self.main_params:
            if p not in self._given:
                raise InputNotFoundError(f"input {p!r} of the Relax function 'main' is not set")
            value = self._given[p]
            out.append(
                value if isinstance(value, NDArray) else array(np.asarray(value), self._host)
            )
        return out

    def get_input(self, key: int | str) -> NDArray:
        """The array kept for input ``key`` of ``main`` (tvmrt)."""
        name = self._main_key(key)
        value = self._given.get(name)
        if value is None:
            raise InputNotFoundError(f"input {name!r} of 'main' is not set")
        return value if isinstance(value, NDArray) else array(np.asarray(value), self._host)

    def get_input_index(self, name: str) -> int:
        """The index of ``main``'s parameter ``name`` (tvmrt)."""
        return self.main_params.index(self._main_key(name))

    def get_num_inputs(self) -> int:
        """The number of ``main``'s parameters (tvmrt)."""
        return len(self.main_params)

    def get_output(self, index: int) -> NDArray:
        """Tensor ``index`` of the last result, a tuple flattened depth first (tvmrt)."""
        if not 0 <= index < len(self._last):
            raise InputNotFoundError(
                f"output {index} does not exist: the last run gave {len(self._last)}"
            )
        return self._last[index]

    def weight_problems(self, given: Collection[str]) -> list[str]:
        """None: a Relax model's weights are its constants or its parameters."""
        return []

    def replicate(self, count: int) -> list[VirtualMachine]:
        """``count`` more VMs over the same executable (its constants are shared)."""
        return [type(self)(self._exec, self._device, self._memory_cfg) for _ in range(count)]


def _flatten(value: Any, local: Callable[[object], object] | None = None) -> list[NDArray]:
    """The tensors of a result, depth first; a shape as an int64 tensor, a number as a
    0-d one (``local`` makes a remote object local first)."""
    if local is not None and not isinstance(value, tuple | list):
        value = local(value)
    if isinstance(value, NDArray):
        return [value]
    if isinstance(value, ShapeTuple):
        return [array(np.array(tuple(value), dtype="int64"))]
    if isinstance(value, Array | tuple | list):
        return [a for item in value for a in _flatten(item, local)]
    if isinstance(value, bool | int | float):
        return [array(np.array(value))]
    return []
