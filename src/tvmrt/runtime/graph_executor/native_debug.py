"""The C runtime's debug executor with TVM's ``profile`` and ``profile_rpc`` (issue 43).

``graph_debug.c`` gives the debug executor's timing and node functions; the two that return
TVM's ``Report`` are made here, over its ``execute_node`` (the report is Python's:
:func:`~tvmrt.runtime.graph_executor.debug.profile_graph`, the Python engine's too). So
every function of TVM's debug executor is on the module itself, for
:class:`~tvmrt.contrib.debugger.debug_executor.GraphModuleDebug`, for a caller of
``factory["debug_create"]`` and for an RPC client of a server that made it.
"""

from __future__ import annotations

from collections.abc import Sequence

from tvmrt.runtime.device import Device
from tvmrt.runtime.graph_executor.debug import check_no_collectors, profile_graph
from tvmrt.runtime.graph_executor.graph import parse_graph
from tvmrt.runtime.native_module import NativeModule
from tvmrt.runtime.packed_func import PackedFunc
from tvmrt.runtime.profiling import Report

__all__ = ["DebugExecutor"]


class DebugExecutor(NativeModule):
    """A C-runtime debug executor module (``GraphExecutor``) whose ``profile`` and
    ``profile_rpc`` time each kernel call through its ``execute_node``.

    Parameters
    ----------
    executor
        The module ``tvm.graph_executor_debug.create`` of the C runtime made.
    graph_json
        Its graph, for the report's rows (kernel names, argument shapes, layouts).
    devices
        Its devices; the first is the host.
    """

    def __init__(self, executor: NativeModule, graph_json: str, devices: Sequence[Device]) -> None:
        super().__init__(executor.handle, executor.source_file)  # one C module, one handle
        self.graph_json = graph_json
        self._graph = parse_graph(graph_json)
        self._devices = list(devices)

    def profile(self, collectors: Sequence[object] | None = None) -> Report:
        """TVM's ``profile``: 3 runs, then one run timing every kernel call."""
        check_no_collectors(collectors)
        execute, host = self["execute_node"], self._devices[0]
        timed = [nid for nid, node in enumerate(self._graph.nodes) if node.is_op]
        report = profile_graph(
            self._graph, self._devices, self["run"], execute, timed, lambda _: host
        )
        execute(len(self._graph.nodes) - 1)  # the last node is the last executed, as TVM
        return report

    def _get_function(self, name: str) -> PackedFunc | None:
        if name == "profile":
            return PackedFunc(self.profile, name)
        if name == "profile_rpc":  # TVM's: the report as JSON, for a client across RPC
            return PackedFunc(lambda: self.profile(None).json(), name)
        return super()._get_function(name)
