"""``DebugResult``: the debug executor's dump files and console table (TVM's ``debug_result.py``).

Files written into the dump path, in TVM v0.19's formats:

* ``_tvmdbg_graph_dump.json`` at construction: the graph with its nodes rewritten for
  viewers (``op`` is the kernel name or ``"param"``, ``inputs`` are node names, ``shape`` and
  ``attrs["T"]`` describe the node's first output);
* ``output_tensors.params`` after a debug run: every node output, in the params format,
  keyed ``"<node name>____topo-index:<node index>____output-num:<output index>"``;
* ``_tvmdbg_execution_trace.json`` after a debug run: a Chrome trace with one begin/end
  event pair per node, laid end to end from the mean of its measurements.

Where tvmrt departs from TVM, on purpose:

* :meth:`DebugResult.update_output_tensors` replaces the stored outputs; TVM appends to
  them, so its dumps after a second ``run()`` still show the first run's tensors.
* ``Time(%)`` is 0 when every node took zero time (TVM divides by zero and prints ``nan``).
* The table works before any run (shapes come from the graph, there are no rows).
"""

# SPDX-License-Identifier: Apache-2.0
# Derived from apache/tvm python/tvm/contrib/debugger/debug_result.py (v0.19).

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from tvmrt.error import ArgumentTypeError, InvalidArgumentError
from tvmrt.runtime.graph_executor.graph import Graph, parse_graph
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.params import save_param_dict

__all__ = [
    "DebugResult",
    "GRAPH_DUMP_FILE_NAME",
    "CHROME_TRACE_FILE_NAME",
    "OUTPUT_TENSORS_FILE_NAME",
]

GRAPH_DUMP_FILE_NAME = "_tvmdbg_graph_dump.json"
CHROME_TRACE_FILE_NAME = "_tvmdbg_execution_trace.json"
OUTPUT_TENSORS_FILE_NAME = "output_tensors.params"

_HEADER = (
    "Node Name",
    "Ops",
    "Time(us)",
    "Time(%)",
    "Shape",
    "Inputs",
    "Outputs",
    "Measurements(us)",
)
_DASHES = tuple("-" * len(h) for h in _HEADER)


class DebugResult:
    """Formats and dumps what a debug run collected: graph, per-node times and outputs.

    Parameters
    ----------
    graph_json
        The graph JSON text; its rewritten form is dumped at once.
    dump_path
        Existing folder that receives the dump files.

    Raises
    ------
    GraphFormatError
        If the graph JSON is malformed.
    """

    def __init__(self, graph_json: str, dump_path: str | os.PathLike[str]) -> None:
        self._dump_path = os.fspath(dump_path)
        self._output_tensor_list: list[NDArray] = []
        self._time_list: list[list[float]] = []
        graph = parse_graph(graph_json)
        json_obj = self._parse_graph(graph_json, graph)
        self._dump_graph_json(json_obj)

    # -- the graph ---------------------------------------------------------------------
    def _parse_graph(self, graph_json: str, graph: Graph) -> dict[str, Any]:
        json_obj: dict[str, Any] = json.loads(graph_json)
        self._nodes_list: list[dict[str, Any]] = json_obj["nodes"]
        self._shapes_list: list[list[int]] = [list(s) for s in graph.shapes]
        self._dtype_list: list[str] = [str(t) for t in graph.dltypes]
        self._update_graph_json(graph)
        return json_obj

    def _update_graph_json(self, graph: Graph) -> None:
        """Rewrite the node dicts in place, walking entries by entry id (TVM >= 0.12)."""
        for nid, node in enumerate(self._nodes_list):
            if node["op"] == "null":
                node["attrs"] = {}
                node["op"] = "param"
                node["inputs"] = []
            else:  # tvm_op: parse_graph rejected every other op
                # "attr" is NNVM's old spelling, which the parser accepts too
                attrs = node["attrs"] if "attrs" in node else node.pop("attr")
                node["attrs"] = dict(attrs)
                node["inputs"] = [self._nodes_list[ref[0]]["name"] for ref in node["inputs"]]
                node["op"] = node["attrs"]["func_name"]
            eid = graph.entry_id(nid)
            if eid == graph.node_row_ptr[nid + 1]:
                continue  # a __nop without outputs has no type or shape to show
            node["attrs"]["T"] = f"type: {self._dtype_list[eid]}"
            node["shape"] = self._shapes_list[eid]

    def _dump_graph_json(self, graph: dict[str, Any]) -> None:
        with open(os.path.join(self._dump_path, GRAPH_DUMP_FILE_NAME), "w") as outfile:
            json.dump(graph, outfile, indent=4, sort_keys=False)

    def get_graph_nodes(self) -> list[dict[str, Any]]:
        """The rewritten node dicts, in graph order."""
        return self._nodes_list

    def get_graph_node_shapes(self) -> list[list[int]]:
        """Shape of every entry (output tensor), by entry id."""
        return self._shapes_list

    def get_graph_node_output_num(self, node: dict[str, Any]) -> int:
        """Number of outputs of a rewritten node dict (1 for params)."""
        return 1 if node["op"] == "param" else int(node["attrs"]["num_outputs"])

    def get_graph_node_dtypes(self) -> list[str]:
        """Dtype of every entry, by entry id."""
        return self._dtype_list

    # -- collected data ----------------------------------------------------------------
    @property
    def time_list(self) -> list[list[float]]:
        """Seconds per node (params included) and per repeat, from the last debug run."""
        return self._time_list

    @time_list.setter
    def time_list(self, times: Sequence[Sequence[float]]) -> None:
        self._time_list = [[float(t) for t in node_times] for node_times in times]

    def update_output_tensors(self, tensors: Sequence[NDArray]) -> None:
        """Replace the stored node outputs (one per entry, in graph order)."""
        if isinstance(tensors, NDArray) or not isinstance(tensors, Sequence):
            raise ArgumentTypeError(
                f"tensors must be a list of NDArrays (one per node output), "
                f"got {type(tensors).__name__}"
            )
        self._output_tensor_list = list(tensors)

    def get_output_tensors(self) -> dict[str, NDArray]:
        """Node outputs keyed ``"<name>____topo-index:<i>____output-num:<j>"``.

        Raises
        ------
        ValueError
            If fewer outputs were stored than the graph has entries (no debug run yet).
        """
        needed = sum(self.get_graph_node_output_num(n) for n in self._nodes_list)
        if len(self._output_tensor_list) < needed:
            raise InvalidArgumentError(
                f"the graph has {needed} node outputs but {len(self._output_tensor_list)} "
                "were collected; call run() on the debug module first"
            )
        eid = 0
        output_tensors = {}
        for i, node in enumerate(self._nodes_list):
            for j in range(self.get_graph_node_output_num(node)):
                # node names are not unique: the node index keeps the keys apart
                key = f"{node['name']}____topo-index:{i}____output-num:{j}"
                output_tensors[key] = self._output_tensor_list[eid]
                eid += 1
        return output_tensors

    # -- dumps -------------------------------------------------------------------------
    def dump_output_tensor(self) -> None:
        """Write every node output to ``output_tensors.params`` (TVM's params format)."""
        blob = save_param_dict(self.get_output_tensors())
        with open(os.path.join(self._dump_path, OUTPUT_TENSORS_FILE_NAME), "wb") as param_f:
            param_f.write(blob)

    def dump_chrome_trace(self) -> None:
        """Write the Chrome trace (``chrome://tracing``, Perfetto) of the last debug run."""
        events: list[dict[str, Any]] = []
        start_us = 0.0
        for node, times in zip(self._nodes_list, self._time_list, strict=False):
            duration_us = float(np.mean(times)) * 1e6 if times else 0.0
            for ts, ph in ((start_us, "B"), (start_us + duration_us, "E")):
                events.append({"ts": ts, "tid": 1, "pid": 1, "name": node["name"], "ph": ph})
            start_us += duration_us
        result = {"displayTimeUnit": "ns", "traceEvents": events}
        with open(os.path.join(self._dump_path, CHROME_TRACE_FILE_NAME), "w") as trace_f:
            json.dump(result, trace_f)

    # -- console table -----------------------------------------------------------------
    def get_debug_result(self, sort_by_time: bool = True) -> str:
        """The per-node timing table, one row per operator output.

        Parameters
        ----------
        sort_by_time
            Sort rows by time, longest first, and add a ``Total_time`` row.

        Returns
        -------
        str
            Lines joined by ``"\\n"``; every column is left-aligned and padded to its
            widest cell plus two spaces, so every line ends with at least two spaces.
        """
        means = [float(np.mean(t)) if t else 0.0 for t in self._time_list]
        total_time = sum(means)
        data: list[list[Any]] = []
        eid = 0
        for node, times, mean in zip(self._nodes_list, self._time_list, means, strict=False):
            num_outputs = self.get_graph_node_output_num(node)
            if node["op"] == "param":
                eid += num_outputs
                continue
            for _ in range(num_outputs):
                data.append(
                    [
                        node["name"],
                        node["op"],
                        round(mean * 1e6, 3),
                        round(mean / total_time * 100, 3) if total_time else 0.0,
                        self._shape_text(eid),
                        str(node["attrs"]["num_inputs"]),
                        str(node["attrs"]["num_outputs"]),
                        str([round(t * 1e6, 3) for t in times]),
                    ]
                )
                eid += 1
        if sort_by_time:
            data.sort(key=lambda row: row[2], reverse=True)  # stable, like sorted()
            data.append(["Total_time", "-", round(total_time * 1e6, 3), "-", "-", "-", "-", "-"])
        widths = [
            max([len(header), *(len(str(row[i])) for row in data)]) + 2
            for i, header in enumerate(_HEADER)
        ]
        lines = [_HEADER, _DASHES, *data]
        return "\n".join(
            "".join(str(cell).ljust(w) for cell, w in zip(line, widths, strict=True))
            for line in lines
        )

    def _shape_text(self, eid: int) -> str:
        if eid < len(self._output_tensor_list):
            return str(tuple(self._output_tensor_list[eid].shape))
        return str(tuple(self._shapes_list[eid]))

    def display_debug_result(self, sort_by_time: bool = True) -> None:
        """Print :meth:`get_debug_result`."""
        print(self.get_debug_result(sort_by_time))
