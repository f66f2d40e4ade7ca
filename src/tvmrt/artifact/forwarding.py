"""The part of the :class:`~tvmrt.artifact.model.Executor` interface that every adapter
over a TVM-style executor face passes straight through.

The graph executor's ``GraphModule`` (local or on an RPC server) and the AOT executor's
``AotModule`` all offer TVM's ``set_input`` / ``get_input`` / ``get_input_index`` /
``get_num_inputs`` / ``run`` / ``get_output``; an adapter inherits
:class:`ModuleForwarding`, sets ``self.module``, and writes only what differs (inputs,
outputs, labels, weights, replication). A profiling adapter over TVM's debug executor
(local or remote) also inherits :class:`DebugForwarding` and sets ``self.debug_module``.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any, Protocol

from tvmrt.contrib.debugger.debug_executor import GraphModuleDebug
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.profiling import Report

__all__ = ["DebugForwarding", "ExecutorFace", "ModuleForwarding"]


class ExecutorFace(Protocol):
    """What :class:`ModuleForwarding` calls on the face it wraps."""

    def set_input(self, key: Any = None, value: Any = None, /) -> None: ...
    def get_input(self, index: Any, /) -> NDArray: ...
    def get_input_index(self, name: str, /) -> int: ...
    def get_num_inputs(self) -> int: ...
    def run(self) -> None: ...
    def get_output(self, index: int, /) -> NDArray: ...


class ModuleForwarding:
    """TVM's executor calls, forwarded to ``self.module``."""

    module: ExecutorFace

    def set_input(self, key: int | str, value: object) -> None:
        """As the face's ``set_input`` (an unknown name is an error)."""
        self.module.set_input(key, value)

    def get_input(self, key: int | str) -> NDArray:
        """As the face's ``get_input``."""
        return self.module.get_input(key)

    def get_input_index(self, name: str) -> int:
        """As the face's ``get_input_index``."""
        return self.module.get_input_index(name)

    def get_num_inputs(self) -> int:
        """As the face's ``get_num_inputs`` (params included)."""
        return self.module.get_num_inputs()

    def run(self) -> None:
        """Run the model once."""
        self.module.run()

    def get_output(self, index: int) -> NDArray:
        """Output ``index`` (a remote face's stays on its server; ``.numpy()`` copies it)."""
        return self.module.get_output(index)


class DebugForwarding:
    """The profiling calls of a graph run by TVM's debug executor, forwarded to
    ``self.debug_module``; put it before :class:`ModuleForwarding` in the bases so that
    :meth:`run` stays untimed."""

    debug_module: GraphModuleDebug

    @property
    def dump_path(self) -> str:
        """The debug dump folder (``<dump_root>/_tvmdbg_device_CPU_0``; local for a remote
        graph)."""
        return self.debug_module.dump_path

    def run(self) -> None:
        """Run the graph once, untimed (the debug executor's ``run`` times every node)."""
        self.debug_module["run"]()

    def run_timed(self, number: int, repeat: int) -> str:
        """Time every node (``GraphModuleDebug.run``); returns the table it prints."""
        table = io.StringIO()
        with contextlib.redirect_stdout(table):
            self.debug_module.run(number=number, repeat=repeat)
        return table.getvalue().rstrip("\n")

    def profile(self) -> Report:
        """TVM's per-kernel ``Report`` (``GraphModuleDebug.profile``; made on the server
        for a remote graph)."""
        return self.debug_module.profile()
