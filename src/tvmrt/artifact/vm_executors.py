"""The Relay VM as an :class:`~tvmrt.artifact.model.Executor`, and its kernel profiler.

The model is the executable's ``main``. A VM function has no static input shapes or
dtypes, so :attr:`VMExecutorAdapter.inputs` gives each parameter with shape ``()`` and
dtype ``""`` ("given by the data"); a tuple-typed parameter ``p`` is set field by field
as ``p.0``, ``p.1``, ... (the keys of the relayvm goldens). The outputs are the fields of
the returned tuple, ``output_0``, ``output_1``, ..., known after the first run.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Collection, Sequence

import numpy as np

from tvmrt.artifact.model import Executor, GraphTiming, TensorInfo
from tvmrt.error import InputNotFoundError, UnsupportedError
from tvmrt.runtime.device import Device
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray, array
from tvmrt.runtime.profiler_vm import VirtualMachineProfiler
from tvmrt.runtime.profiling import Report
from tvmrt.runtime.vm import Executable, VirtualMachine

__all__ = ["VMExecutorAdapter", "VMProfilingAdapter", "DYNAMIC_DTYPE"]

DYNAMIC_DTYPE = ""  # TensorInfo.dtype of an input whose shape and dtype the data gives
_FIELD = re.compile(r"^(?P<param>.+)\.(?P<index>\d+)$")


class VMExecutorAdapter:
    """A Relay VM executable's ``main`` behind the Executor interface.

    Parameters
    ----------
    exe
        The loaded ``VMExecutable`` module (from ``vm.so`` or ``load_exec``).
    device
        Where the kernels run (a CPU is added for shape functions, as TVM does).
    """

    def __init__(self, exe: Module, device: Device) -> None:
        self.exe_module = exe
        self.executable = Executable(exe)
        self.device = device
        self.vm = self._make_vm()
        self.params = self.executable.get_function_params("main")
        self._given: dict[str, object] = {}
        self._outputs: list[NDArray] = []

    def _make_vm(self) -> VirtualMachine:
        return VirtualMachine(self.executable, self.device)

    @property
    def inputs(self) -> Sequence[TensorInfo]:
        """``main``'s parameters; their shapes and dtypes come with the data."""
        return [TensorInfo(p, (), DYNAMIC_DTYPE) for p in self.params]

    @property
    def outputs(self) -> Sequence[TensorInfo]:
        """The outputs of the last run (none before the first)."""
        return [
            TensorInfo(f"output_{i}", tuple(o.shape), str(o.dtype))
            for i, o in enumerate(self._outputs)
        ]

    def output_labels(self) -> list[str]:
        """``output_0``, ``output_1``, ...: the fields of the last result."""
        return [f"output_{i}" for i in range(len(self._outputs))]

    def _key(self, key: int | str) -> str:
        if isinstance(key, int) and 0 <= key < len(self.params):
            return self.params[key]
        if isinstance(key, str):
            match = _FIELD.match(key)
            if key in self.params or (match and match["param"] in self.params):
                return key
        raise InputNotFoundError(
            f"the Relay VM function 'main' has no input {key!r}; its inputs are "
            f"{', '.join(self.params)} (a tuple input p is given as p.0, p.1, ...)"
        )

    def set_input(self, key: int | str, value: object) -> None:
        """Keep ``value`` for input ``key`` (a param name or index, or ``p.N``)."""
        name = self._key(key)
        self._given[name] = value if isinstance(value, NDArray) else array(np.asarray(value))

    def get_input(self, key: int | str) -> NDArray:
        """The array set for input ``key``."""
        name = self._key(key)
        if name not in self._given:
            raise InputNotFoundError(f"input {name!r} of 'main' is not set")
        value = self._given[name]
        assert isinstance(value, NDArray)
        return value

    def get_input_index(self, name: str) -> int:
        """The position of ``name`` among ``main``'s parameters, or -1."""
        return self.params.index(name) if name in self.params else -1

    def get_num_inputs(self) -> int:
        """The number of ``main``'s parameters."""
        return len(self.params)

    def _arguments(self) -> list[object]:
        args: list[object] = []
        for p in self.params:
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

    def run(self) -> None:
        """Invoke ``main`` once on the inputs set."""
        self.vm.set_input("main", *self._arguments())
        self.vm.invoke_stateful("main")
        self._outputs = self.vm.get_outputs()

    def get_output(self, index: int) -> NDArray:
        """Field ``index`` of the last result."""
        if not 0 <= index < len(self._outputs):
            raise InputNotFoundError(
                f"output {index} does not exist: the last run gave {len(self._outputs)}"
            )
        return self._outputs[index]

    def weight_problems(self, given: Collection[str]) -> list[str]:
        """None: the weights are the executable's constants."""
        return []

    def replicate(self, count: int) -> list[Executor]:
        """``count`` more VMs over the same executable (its constants are shared)."""
        return [VMExecutorAdapter(self.exe_module, self.device) for _ in range(count)]


class VMProfilingAdapter(VMExecutorAdapter):
    """A Relay VM that times each kernel call (``tvmrt profile``)."""

    def __init__(self, exe: Module, device: Device, dump_root: str | None = None) -> None:
        super().__init__(exe, device)
        self._dump_root = dump_root or tempfile.mkdtemp(prefix="tvmrt_vm_profile_")
        self._last: Report | None = None

    def _make_vm(self) -> VirtualMachine:
        return VirtualMachineProfiler(self.executable, self.device)

    @property
    def dump_path(self) -> str:
        """A folder for the profile (the VM writes no dump files)."""
        return self._dump_root

    def run_timed(self, number: int, repeat: int) -> str:
        """Time ``repeat`` x ``number`` invokes of ``main``, then one run kernel by kernel.

        Returns the timing summary and the kernels' table (TVM's ``Report.table()``).
        """
        self.vm.set_input("main", *self._arguments())
        result = self.vm.benchmark(self.device, repeat=repeat, number=number)
        table = self.profile().table()
        return f"{str(result).rstrip()}\n\nKernels of one run:\n{table.rstrip()}"

    def profile(self) -> Report:
        """One more run with every kernel call timed: TVM's ``Report``."""
        vm = self.vm
        assert isinstance(vm, VirtualMachineProfiler)
        report = vm.profile(*self._arguments(), func_name="main")
        self._outputs = vm.get_outputs()
        return report

    def node_timing(self) -> GraphTiming | None:
        """None: a VM has no graph nodes."""
        return None

    def replicate(self, count: int) -> list[Executor]:
        """Not offered: load without debug to run several executors."""
        raise UnsupportedError(
            "a debug (profiling) executor is not replicated: load the artifact without "
            "debug to run it on several executors"
        )
