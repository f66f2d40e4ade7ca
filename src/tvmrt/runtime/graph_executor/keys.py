"""Input and output keys of a graph executor: names, indices, entries and info.

Inputs are found by name or index, outputs by index, ``"name:i"`` or a bare node name;
each miss has one error (see :mod:`~tvmrt.runtime.graph_executor.checks`).
"""

from __future__ import annotations

from collections import defaultdict

from tvmrt.runtime.graph_executor.checks import check_index, unknown_input, unknown_output
from tvmrt.runtime.graph_executor.graph import Graph
from tvmrt.runtime.object import ShapeTuple

__all__ = ["GraphKeys", "output_info"]


class GraphKeys:
    """Key resolution and input/output info over ``self.graph`` (mixed into the executor)."""

    graph: Graph
    _input_map: dict[str, int]
    _output_map: dict[str, int]
    _param_names: set[str]

    def _init_keys(self, graph: Graph) -> None:
        self._input_map = {graph.nodes[nid].name: i for i, nid in enumerate(graph.arg_nodes)}
        self._output_map = {
            f"{graph.nodes[h.node_id].name}:{h.index}": i for i, h in enumerate(graph.heads)
        }
        self._param_names = set()

    @property
    def input_names(self) -> list[str]:
        """Names of ``arg_nodes`` (inputs and params), by input index."""
        return [self.graph.nodes[nid].name for nid in self.graph.arg_nodes]

    def has_input(self, name: str) -> bool:
        """Whether the graph has an input (data or weight) called ``name``."""
        return name in self._input_map

    def input_index(self, key: int | str) -> int:
        """Input index of a name or index.

        Raises InputNotFoundError (a LookupError) for an unknown name, InputIndexError
        (also an IndexError) for an index out of range, ArgumentTypeError (a TypeError)
        for any other key.
        """
        if isinstance(key, str):
            index = self._input_map.get(key)
            if index is None:
                raise unknown_input(key, self.input_names)
            return index
        return check_index("input", key, len(self.graph.arg_nodes))

    def input_entry(self, key: int | str) -> int:
        """Entry id of an input."""
        return self.graph.entry_id(self.graph.arg_nodes[self.input_index(key)])

    def output_index(self, key: int | str) -> int:
        """Output index of an index, an ``"name:i"`` key or a bare node name (last wins)."""
        heads = self.graph.heads
        if isinstance(key, str):
            if key in self._output_map:
                return self._output_map[key]
            matches = [i for i, h in enumerate(heads) if self.graph.nodes[h.node_id].name == key]
            if not matches:
                raise unknown_output(key, list(self._output_map))
            return matches[-1]
        return check_index("output", key, len(heads))

    def output_entry(self, key: int | str) -> int:
        """Entry id of an output."""
        head = self.graph.heads[self.output_index(key)]
        return self.graph.entry_id(head.node_id, head.index)

    def _input_label(self, eid: int) -> str:
        return repr(self.graph.nodes[self._node_of_entry(eid)].name)

    def _node_of_entry(self, eid: int) -> int:
        row = self.graph.node_row_ptr
        lo, hi = 0, len(row) - 1
        while lo < hi - 1:  # largest nid with row[nid] <= eid
            mid = (lo + hi) // 2
            if row[mid] <= eid:
                lo = mid
            else:
                hi = mid
        return lo

    def input_info(self) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
        """Shapes and dtypes of inputs not loaded by :meth:`load_params`."""
        shapes: dict[str, tuple[int, ...]] = {}
        dtypes: dict[str, str] = {}
        for nid in self.graph.arg_nodes:
            name = self.graph.nodes[nid].name
            if name in self._param_names:
                continue
            eid = self.graph.entry_id(nid)
            shapes[name] = ShapeTuple(self.graph.shapes[eid])  # TVM returns ShapeTuples
            dtypes[name] = str(self.graph.dltypes[eid])
        return shapes, dtypes

    def output_info(self) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
        """Shapes and dtypes of outputs, keyed by node name (``"name:i"`` when it has several)."""
        return output_info(self.graph)


def output_info(g: Graph) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
    """Shapes and dtypes of ``g``'s outputs, keyed as the executor's ``get_output_info``."""
    counts: dict[int, int] = defaultdict(int)
    for h in g.heads:
        counts[h.node_id] += 1
    shapes: dict[str, tuple[int, ...]] = {}
    dtypes: dict[str, str] = {}
    for h in g.heads:
        name = g.nodes[h.node_id].name
        key = name if counts[h.node_id] == 1 else f"{name}:{h.index}"
        eid = g.entry_id(h.node_id, h.index)
        shapes[key] = ShapeTuple(g.shapes[eid])
        dtypes[key] = str(g.dltypes[eid])
    return shapes, dtypes
