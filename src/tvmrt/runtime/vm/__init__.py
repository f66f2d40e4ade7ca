"""The Relay VM: TVM's ``tvm.runtime.vm`` (``Executable``, ``VirtualMachine``) without TVM.

Runs the executables of ``relay.vm.compile`` (TVM 0.14-0.19): ``code.ro`` + ``lib.so``
through :meth:`Executable.load_exec`, or one ``vm.so`` through ``load_module``. The
pieces: ``format`` (the file), ``decode`` (operand checks and the decoded code),
``interpreter`` (the run loop), ``executable`` and ``machine`` (TVM's two modules), and
``api`` (this face). Limits on a run are :class:`VMLimits`.
"""

from __future__ import annotations

from tvmrt.runtime.module import Module
from tvmrt.runtime.object import Object
from tvmrt.runtime.vm.api import Executable, VirtualMachine, convert
from tvmrt.runtime.vm.interpreter import VMClosure, VMLimits

__all__ = ["Executable", "VirtualMachine", "VMClosure", "VMLimits", "Module", "Object", "convert"]
