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

import struct
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
from tvmrt.runtime.vm.executable import VMExecutable
from tvmrt.runtime.vm.machine import VirtualMachineModule, bound_index
from tvmrt.runtime.vm.native import NativeVM

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
    exe, device, memory_cfg, engine
        As :class:`~tvmrt.runtime.vm.VirtualMachine`: on the C VM, which records each
        kernel call and timed instruction with its own times (no Python runs between the
        calls), or on the Python interpreter, whose hooks time them from Python.
    dump_root
        The folder :attr:`dump_path` names (tvmrt; the VM writes no dump files).
    """

    def __init__(
        self,
        exe: Executable | Module,
        device: Device | Sequence[Device],
        memory_cfg: object = None,
        dump_root: str | None = None,
        *,
        engine: str | None = None,
    ) -> None:
        super().__init__(exe, device, memory_cfg, engine=engine)
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
        for _ in range(_WARMUP_RUNS):
            self._invoke(func_name)
        if isinstance(self.module, NativeVM):
            return self._profile_native(func_name)
        return self._profile_python(func_name)

    def _profile_python(self, func_name: str) -> Report:
        """One timed run on the Python interpreter, through its kernel and instruction hooks."""
        machine = self.module
        assert isinstance(machine, VirtualMachineModule)
        interp = machine._interp()
        data = machine.exe.data
        prof = Profiler(list(dict.fromkeys(interp.devices)), {"Executor": "VM"})

        def timed(
            index: int, fn: Callable[..., object], fn_args: Sequence[object], arrays: list[NDArray]
        ) -> None:
            shapes = ", ".join(_shape_string(a.dtype, a.shape) for a in arrays)
            dev = arrays[-1].device if arrays else interp.devices[0]
            prof.start_call(data.primitive_names[index], dev, _kernel_metrics(data, index, shapes))
            try:
                fn(*fn_args)
            finally:
                prof.stop_call()

        interp.kernel_hook = timed
        interp.instruction_hook = _InstructionRows(prof, interp.devices, data.host_device_index)
        prof.start()
        try:
            self._invoke(func_name)
            self._ran = True
        finally:
            interp.kernel_hook = interp.instruction_hook = None
            prof.stop()
        return prof.report()

    def _profile_native(self, func_name: str) -> Report:
        """One timed run on the C VM, which records each kernel call and timed instruction
        (what its row shows and the time the work alone took, vm_profile.c); the rows are
        made from the record after the run."""
        machine = self.module
        assert isinstance(machine, NativeVM)
        exe = self._exec.mod
        assert isinstance(exe, VMExecutable)
        data = exe.data
        given = self._given_devices(self._device)
        devices = []  # by virtual device: the C VM's init bound every one (the C VM runs)
        for dev_type, _id, _scope in data.virtual_devices:
            at = bound_index(given, dev_type)
            assert at is not None
            devices.append(given[at])
        host = _host_device(devices, data.host_device_index)
        prof = Profiler(list(dict.fromkeys(devices)), {"Executor": "VM"})
        machine.profile_start()
        prof.start()
        try:
            self._invoke(func_name)
            end = prof.now_ns()
            self._ran = True
        finally:
            record = bytes(machine.profile_stop())
        for kind, index, dev_type, dev_id, t0, t1, text in _events(record):
            if kind == _KERNEL:
                dev = Device(dev_type, dev_id) if dev_type >= 0 else devices[0]
                name = data.primitive_names[index]
                metrics = _kernel_metrics(data, index, text)
            else:
                name, key = _INSTRUCTIONS[index]
                dev = devices[dev_type] if dev_type >= 0 else host
                metrics = {key: text} if key else {}
            prof.record_call(name, dev, t0, t1, metrics)
        prof.stop(at_ns=end)
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


# the C VM's profile record (src/tvmrt/_native/runtime/vm_profile.c): a u64 count, then
# that many events (kind, index, device type, device id: i32; start, stop: u64 ns; the
# offset and length of its text: u32), then the text
_KERNEL = 0  # an event's kind: a kernel call (1: an instruction)
_EVENT = struct.Struct("<4i2Q2I")


def _events(record: bytes) -> list[tuple[int, int, int, int, int, int, str]]:
    """The C VM's events, each with its text."""
    (count,) = struct.unpack_from("<Q", record)
    text = memoryview(record)[8 + count * _EVENT.size :]
    return [
        (kind, index, dev_type, dev_id, t0, t1, bytes(text[off : off + n]).decode())
        for kind, index, dev_type, dev_id, t0, t1, off, n in _EVENT.iter_unpack(
            record[8 : 8 + count * _EVENT.size]
        )
    ]


# the instructions TVM's profiler times (VirtualMachineDebug::OpStartHook): each one's row
# name and the metric key its shape goes under ("" for none)
_INSTRUCTIONS: dict[int, tuple[str, str]] = {
    op.ALLOC_STORAGE: ("VM::AllocStorage", "VM::Argument Shapes"),
    op.ALLOC_TENSOR: ("VM::AllocTensor", "Argument Shapes"),
    op.ALLOC_TENSOR_REG: ("VM::AllocTensorReg", "Argument Shapes"),
    op.RESHAPE_TENSOR: ("VM::ReshapeTensor", ""),
    op.DEVICE_COPY: ("VM::DeviceCopy", ""),
    op.KILL_REGISTER: ("VM::UnknownOp", ""),
}


def _host_device(devices: Sequence[Device], host_index: int) -> Device:
    """The device of the instructions that name none (the executable's host device)."""
    return devices[host_index] if 0 <= host_index < len(devices) else devices[0]


def _kernel_metrics(data: Any, index: int, shapes: str) -> dict[str, Metric]:
    """A kernel row's metrics: its layout attributes and hash (the executable's) and the
    ``Argument Shapes`` of the tensors it was called with."""
    attrs = data.primitive_attrs.get(index, {})
    metrics: dict[str, Metric] = {k: v for k, v in attrs.items() if "layout" in k}
    if "hash" in attrs:
        metrics["Hash"] = attrs["hash"]
    metrics["Argument Shapes"] = shapes
    return metrics


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
        self._host = _host_device(devices, host_index)

    def start(self, ins: tuple[Any, ...], regs: list[object]) -> None:
        o = ins[0]
        device = self._host  # KillRegister, ReshapeTensor
        shapes = ""
        if o == op.ALLOC_STORAGE:  # (op, size_reg, nbytes, alignment, dev, dst, dtype, shape)
            dims = ins[7] or _ints(regs[ins[1]])  # a dynamic size: its register's value
            device = self._devices[ins[4]]
            shapes = _shape_string(ins[6], dims)
        elif o == op.ALLOC_TENSOR:  # (op, storage, offset, shape, dtype, nbytes, dst)
            device = getattr(regs[ins[1]], "device", self._host)
            shapes = _shape_string(ins[4], ins[3])
        elif o == op.ALLOC_TENSOR_REG:  # (op, storage, offset, shape_reg, dtype, dst)
            device = getattr(regs[ins[1]], "device", self._host)
            shapes = _shape_string(ins[4], _ints(regs[ins[3]]))
        elif o == op.DEVICE_COPY:  # (op, src, src_dev, dst_dev, dst)
            device = self._devices[ins[3]]
        name, key = _INSTRUCTIONS.get(o, _INSTRUCTIONS[op.KILL_REGISTER])
        self._prof.start_call(name, device, {key: shapes} if key else {})

    def stop(self) -> None:
        self._prof.stop_call()
