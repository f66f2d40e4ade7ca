"""TVM's ``tvm.runtime.profiler_vm``: a Relay VM that times every kernel it calls.

``VirtualMachineProfiler(exe, dev).profile(*args, func_name="main")`` runs the function
once with each ``InvokePacked`` timed and returns a :class:`~tvmrt.runtime.profiling.Report`
(TVM's ``src/runtime/vm/profiler/vm.cc``): one row per kernel call with its ``Hash``,
layout attributes and ``Argument Shapes``. The VM's own instructions (allocation, control
flow) are not rows; their time is the difference between ``Total`` and the rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tvmrt.error import UnsupportedError
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.profiling import Metric, Profiler, Report
from tvmrt.runtime.vm.api import VirtualMachine
from tvmrt.runtime.vm.machine import VirtualMachineModule

__all__ = ["VirtualMachineProfiler", "enabled"]


def enabled() -> bool:
    """Whether the VM profiler is available (always, in tvmrt)."""
    return True


class VirtualMachineProfiler(VirtualMachine):
    """A :class:`~tvmrt.runtime.vm.VirtualMachine` with :meth:`profile`."""

    def profile(
        self, *args: object, func_name: str = "main", collectors: object = None, **kwargs: object
    ) -> Report:
        """Run ``func_name`` once (after setting inputs if given); the kernels' report."""
        if collectors:
            raise UnsupportedError("metric collectors (PAPI, ...) are not supported by tvmrt")
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
        finally:
            interp.kernel_hook = None
            prof.stop()
        return prof.report()
