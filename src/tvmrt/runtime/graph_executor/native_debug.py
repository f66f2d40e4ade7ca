"""The C runtime's debug executor with TVM's ``profile`` and ``profile_rpc`` (issue 43).

``graph_debug.c`` gives the debug executor's timing and node functions; the two that return
TVM's ``Report`` are made here, from its ``profile_nodes`` (one run, each node's call timed
in C; the report is Python's: :func:`~tvmrt.runtime.graph_executor.debug.profile_recorded`). So
every function of TVM's debug executor is on the module itself, for
:class:`~tvmrt.contrib.debugger.debug_executor.GraphModuleDebug`, for a caller of
``factory["debug_create"]`` and for an RPC client of a server that made it.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from tvmrt.runtime.device import Device
from tvmrt.runtime.graph_executor.debug import check_no_collectors, profile_recorded
from tvmrt.runtime.graph_executor.graph import parse_graph
from tvmrt.runtime.graph_executor.memory import device_for_type
from tvmrt.runtime.native_module import NativeModule
from tvmrt.runtime.packed_func import PackedFunc
from tvmrt.runtime.profiling import Report

__all__ = ["DebugExecutor"]


class DebugExecutor(NativeModule):
    """A C-runtime debug executor module (``GraphExecutor``) whose ``profile`` and
    ``profile_rpc`` report each kernel call its ``profile_nodes`` timed.

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
        """TVM's ``profile``: 3 runs, then one run timing every kernel call (in C:
        ``profile_nodes``; the last node is then the last executed, as TVM)."""
        check_no_collectors(collectors)
        record, host = self["profile_nodes"], self._devices[0]

        def calls() -> list[tuple[int, int, int]]:
            blob = bytes(record())
            (count,) = struct.unpack_from("<q", blob)
            return [
                (n, t0, t1) for n, t0, t1 in struct.iter_unpack("<qQQ", blob[8 : 8 + 24 * count])
            ]

        graph, devices = self._graph, self._devices

        def node_device(nid: int) -> Device:  # its first output's device (the host if none)
            node, types = graph.nodes[nid], graph.device_types
            if types is None or not node.is_op or node.num_outputs == 0:
                return host
            return device_for_type(devices, types[graph.entry_id(nid, 0)])

        return profile_recorded(graph, devices, self["run"], calls, node_device)

    def _get_function(self, name: str) -> PackedFunc | None:
        if name == "profile":
            return PackedFunc(self.profile, name)
        if name == "profile_rpc":  # TVM's: the report as JSON, for a client across RPC
            return PackedFunc(lambda: self.profile(None).json(), name)
        return super()._get_function(name)
