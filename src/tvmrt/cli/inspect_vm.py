"""``tvmrt inspect`` text for a Relay VM executable: functions, opcodes, constants."""

from __future__ import annotations

from tvmrt.artifact.report import RelayVMReport

__all__ = ["relay_vm_lines"]


def relay_vm_lines(vm: RelayVMReport) -> list[str]:
    """The lines describing the report's ``library.relay_vm``."""
    lines = [f"relay VM: executable of TVM {vm.version}, {len(vm.functions)} function(s)"]
    for func in vm.functions:
        lines.append(
            f"  {func.name}({', '.join(func.params)}): arity {func.arity}, "
            f"{func.instructions} instructions, {func.registers} registers"
        )
    opcodes = ", ".join(f"{name} {count}" for name, count in vm.opcodes.items())
    lines.append(f"  opcodes: {opcodes}")
    lines.append(f"  kernels: {len(vm.kernels)}")
    consts = vm.constants
    late = f", late-bound: {', '.join(consts.late_bound)}" if consts.late_bound else ""
    lines.append(f"  constants: {consts.count} ({consts.bytes} bytes){late}")
    return lines
