"""TVM's ``tvm.runtime.profiler_vm``: a Relay VM that times every kernel it calls.

``VirtualMachineProfiler(exe, dev).profile(*args, func_name="main")`` runs the function three
times to warm up, then once timed, and returns a :class:`~tvmrt.runtime.profiling.Report`
(TVM's ``src/runtime/vm/profiler/vm.cc``), in the order things ran:

* one row per kernel call, named as the kernel, with its ``Hash``, layout attributes and
  ``Argument Shapes``;
* one row per VM instruction TVM times: ``VM::AllocStorage`` (its ``VM::Argument Shapes``,
  TVM's key for it: the dtype hint and the static shape, or the size in bytes),
  ``VM::AllocTensor`` and ``VM::AllocTensorReg`` (``Argument Shapes``, on the storage's
  device), ``VM::ReshapeTensor`` (host device), ``VM::DeviceCopy`` (destination device) and
  ``VM::UnknownOp`` for ``KillRegister``. ``LoadConst`` is timed by TVM only when it copies
  a constant the first time, which the warm-up runs have done (and tvmrt places constants
  when the VM is made), so neither reports it.

Control flow, moves and calls are not rows; their time is the difference between ``Total``
and the rows.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from typing import Any

from tvmrt.error import UnsupportedError
from tvmrt.runtime.device import Device
from tvmrt.runtime.executor.protocol import not_replicated
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.profiling import Metric, Profiler, Report
from tvmrt.runtime.vm import opcodes as op
from tvmrt.runtime.vm.api import Executable, VirtualMachine
from tvmrt.runtime.vm.machine import VirtualMachineModule

_WARMUP_RUNS = 3  # VirtualMachineDebug's "profile" invokes the function 3 times first

__all__ = ["VirtualMachineProfiler", "enabled"]


def enabled() -> bool:
    """Whether the VM profiler is available (always, in tvmrt)."""
    return True


class VirtualMachineProfiler(VirtualMachine):
    """A :class:`~tvmrt.runtime.vm.VirtualMachine` with :meth:`profile`.

    It is also a :class:`~tvmrt.runtime.executor.protocol.ProfilingExecutor` (tvmrt):
    ``run_timed`` times ``main``, then reports one run kernel by kernel.

    Parameters
    ----------
    exe, device, memory_cfg
        As :class:`~tvmrt.runtime.vm.VirtualMachine`.
    dump_root
        The folder :attr:`dump_path` names (tvmrt; the VM writes no dump files).
    """

    python_only = "the profiler times each kernel call inside the Python interpreter"

    def __init__(
        self,
        exe: Executable | Module,
        device: Device | Sequence[Device],
        memory_cfg: object = None,
        dump_root: str | None = None,
    ) -> None:
        super().__init__(exe, device, memory_cfg)
        self._dump_root = dump_root

    def profile(
        self, *args: object, func_name: str = "main", collectors: object = None, **kwargs: object
    ) -> Report:
        """Run ``func_name`` three times, then once timed (after setting inputs if given);
        the report of the timed run: its kernel calls and VM instructions.

        Without inputs, ``main`` runs on those kept by ``set_input(key, value)`` if any.
        """
        if collectors:
            raise UnsupportedError("metric collectors (PAPI, ...) are not supported by tvmrt")
        if not args and not kwargs and func_name == "main" and self._given:
            args = tuple(self._arguments())
        if args or kwargs:
            self.set_input(func_name, *args, **kwargs)
        machine = self.module
        assert isinstance(machine, VirtualMachineModule)
        interp = machine._interp()
        data = machine.exe.data
        devices = list(dict.fromkeys(interp.devices))
        prof = Profiler(devices, {"Executor": "VM"})

        def timed(
            index: int, fn: Callable[..., object], fn_args: Sequence[object], arrays: list[NDArray]
        ) -> None:
            attrs = data.primitive_attrs.get(index, {})
            metrics: dict[str, Metric] = {k: v for k, v in attrs.items() if "layout" in k}
            if "hash" in attrs:
                metrics["Hash"] = attrs["hash"]
            metrics["Argument Shapes"] = ", ".join(
                f"{a.dtype}[{', '.join(str(d) for d in a.shape)}]" for a in arrays
            )
            dev = arrays[-1].device if arrays else devices[0]
            prof.start_call(data.primitive_names[index], dev, metrics)
            try:
                fn(*fn_args)
            finally:
                prof.stop_call()

        for _ in range(_WARMUP_RUNS):
            machine.invoke(func_name)
        interp.kernel_hook = timed
        interp.instruction_hook = _InstructionRows(prof, interp.devices, data.host_device_index)
        prof.start()
        try:
            machine.invoke(func_name)
            self._ran = True
        finally:
            interp.kernel_hook = interp.instruction_hook = None
            prof.stop()
        return prof.report()

    # -- tvmrt's ProfilingExecutor interface -------------------------------------------------
    @property
    def dump_path(self) -> str:
        """A folder for the profile (the VM writes no dump files)."""
        if self._dump_root is None:
            self._dump_root = tempfile.mkdtemp(prefix="tvmrt_vm_profile_")
        return self._dump_root

    def run_timed(self, number: int, repeat: int) -> str:
        """Time ``repeat`` x ``number`` invokes of ``main``, then one run kernel by kernel.

        Returns the timing summary and the kernels' table (TVM's ``Report.table()``).
        """
        device = self._device if isinstance(self._device, Device) else self._device[0]
        result = self.benchmark(device, *self._arguments(), repeat=repeat, number=number)
        table = self.profile().table()
        return f"{str(result).rstrip()}\n\nKernels of one run:\n{table.rstrip()}"

    def node_timing(self) -> None:
        """None: a VM has no graph nodes."""
        return None

    def replicate(self, count: int) -> list[VirtualMachine]:
        """Not offered: load without debug to run several executors.

        Raises
        ------
        UnsupportedError
            Always.
        """
        raise not_replicated()


def _shape_string(dtype: object, dims: Sequence[object]) -> str:
    """TVM's ``profiling::ShapeString``: ``float32[1, 3, 16, 16]``."""
    return f"{dtype}[{', '.join(str(d) for d in dims)}]"


def _ints(value: object) -> list[int]:
    """The integers a shape or size register holds (an int tensor), else none."""
    return value.numpy().reshape(-1).tolist() if isinstance(value, NDArray) else []


class _InstructionRows:
    """The interpreter's instruction hook: one profiler call per instruction TVM times, with
    the name, device and metrics of ``VirtualMachineDebug::OpStartHook``."""

    def __init__(self, prof: Profiler, devices: Sequence[Device], host_index: int) -> None:
        self._prof = prof
        self._devices = devices
        self._host = devices[host_index] if 0 <= host_index < len(devices) else devices[0]

    def start(self, ins: tuple[Any, ...], regs: list[object]) -> None:
        o = ins[0]
        name, device = "VM::UnknownOp", self._host  # KillRegister
        metrics: dict[str, Metric] = {}
        if o == op.ALLOC_STORAGE:  # (op, size_reg, nbytes, alignment, dev, dst, dtype, shape)
            dims = ins[7] or _ints(regs[ins[1]])  # a dynamic size: its register's value
            name, device = "VM::AllocStorage", self._devices[ins[4]]
            metrics["VM::Argument Shapes"] = _shape_string(ins[6], dims)
        elif o == op.ALLOC_TENSOR:  # (op, storage, offset, shape, dtype, nbytes, dst)
            name, device = "VM::AllocTensor", getattr(regs[ins[1]], "device", self._host)
            metrics["Argument Shapes"] = _shape_string(ins[4], ins[3])
        elif o == op.ALLOC_TENSOR_REG:  # (op, storage, offset, shape_reg, dtype, dst)
            name, device = "VM::AllocTensorReg", getattr(regs[ins[1]], "device", self._host)
            metrics["Argument Shapes"] = _shape_string(ins[4], _ints(regs[ins[3]]))
        elif o == op.RESHAPE_TENSOR:
            name = "VM::ReshapeTensor"
        elif o == op.DEVICE_COPY:  # (op, src, src_dev, dst_dev, dst)
            name, device = "VM::DeviceCopy", self._devices[ins[3]]
        self._prof.start_call(name, device, metrics)

    def stop(self) -> None:
        self._prof.stop_call()
