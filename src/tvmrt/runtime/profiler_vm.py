"""TVM's ``tvm.runtime.profiler_vm``: a Relay VM that times every kernel it calls.

``VirtualMachineProfiler(exe, dev).profile(*args, func_name="main")`` runs the function
once with each ``InvokePacked`` timed and returns a :class:`~tvmrt.runtime.profiling.Report`
(TVM's ``src/runtime/vm/profiler/vm.cc``): one row per kernel call with its ``Hash``,
layout attributes and ``Argument Shapes``. The VM's own instructions (allocation, control
flow) are not rows; their time is the difference between ``Total`` and the rows.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence

from tvmrt.error import UnsupportedError
from tvmrt.runtime.device import Device
from tvmrt.runtime.executor.protocol import not_replicated
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.profiling import Metric, Profiler, Report
from tvmrt.runtime.vm.api import Executable, VirtualMachine
from tvmrt.runtime.vm.machine import VirtualMachineModule

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
        """Run ``func_name`` once (after setting inputs if given); the kernels' report.

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

        interp.kernel_hook = timed
        prof.start()
        try:
            machine.invoke(func_name)
            self._ran = True
        finally:
            interp.kernel_hook = None
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
