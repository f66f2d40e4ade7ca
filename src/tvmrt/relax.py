"""TVM's ``tvm.relax`` as a runtime needs it: the Relax virtual machine.

``relax.VirtualMachine(load_module("model.so"), dev)["main"](*args)`` runs an executable
that ``relax.build`` (TVM 0.16-0.19) or ``tvm.compile`` (0.20-0.27) exported, of any era,
on tvmrt's C runtime (:mod:`tvmrt.runtime.relax_vm`). tvmrt has no Relax compiler: building
stays with TVM.
"""

from __future__ import annotations

from tvmrt.runtime.relax_vm import VirtualMachine, VMInstrumentReturnKind

__all__ = ["VirtualMachine", "VMInstrumentReturnKind"]
