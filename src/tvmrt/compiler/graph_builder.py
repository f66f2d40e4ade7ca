"""The graph :mod:`.emitter` builds: entries, nodes, params, written out as graph JSON.

:class:`GraphBuilder` collects ``null`` nodes (inputs and constants, deduplicated by
value) and ``tvm_op`` nodes in execution order; :meth:`GraphBuilder.finish` turns them
into the classic graph JSON with the conventions of TVM's Relay code generator
(``src/relay/backend/graph_executor_codegen.cc``): ``flatten_data`` ``"0"``, keys in the
order ``nodes, arg_nodes, heads, attrs, node_row_ptr``, a reshape kernel as a ``__nop``
sharing its input's storage unless it produces an output, an output that is an input or
a constant copied by the built-in ``__copy``, and storage ids from
:func:`tvmrt.runtime.graph_executor.storage.assign_storage_ids`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tvmrt.runtime.dtype import DataType
from tvmrt.runtime.graph_executor.storage import assign_storage_ids

__all__ = ["NOP", "COPY", "Entry", "Node", "Value", "GraphArtifact", "GraphBuilder", "flatten"]

NOP = "__nop"
COPY = "__copy"


@dataclass
class Entry:
    """One graph entry: producing node, output index, shape and dtype."""

    node_id: int
    index: int
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * DataType(self.dtype).itemsize


@dataclass
class Node:
    """One node being built: a ``null`` placeholder or a ``tvm_op`` kernel call."""

    op: str
    name: str
    inputs: list[Entry] = field(default_factory=list)
    outputs: list[Entry] = field(default_factory=list)
    func_name: str = ""
    attrs: dict[str, str] = field(default_factory=dict)
    reshape: bool = False  # a reshape-pattern kernel: a __nop unless its output is a head


@dataclass(frozen=True)
class GraphArtifact:
    """What :func:`emit_graph` produces.

    Attributes
    ----------
    graph
        The graph JSON as a dict (``json.dumps`` gives the file).
    params
        ``p0``, ``p1``, ... → the constant's array.
    kernels
        Names of the PrimFuncs the graph calls (``__nop`` excluded), in first-use order.
    input_names, input_shapes, input_dtypes
        The graph inputs that are not params.
    output_shapes, output_dtypes
        Per head.
    kernel_args
        Per kernel, ``(shape, dtype)`` of its arguments (inputs, then outputs).
    """

    graph: dict[str, Any]
    params: dict[str, np.ndarray[Any, Any]]
    kernels: tuple[str, ...]
    input_names: tuple[str, ...]
    input_shapes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[str, ...]
    output_shapes: tuple[tuple[int, ...], ...]
    output_dtypes: tuple[str, ...]
    kernel_args: dict[str, tuple[tuple[tuple[int, ...], str], ...]] = field(default_factory=dict)

    @property
    def json(self) -> str:
        """The graph JSON text."""
        return json.dumps(self.graph, indent=2)

    @property
    def num_nops(self) -> int:
        """How many ``__nop`` nodes the graph has."""
        return sum(
            n["op"] == "tvm_op" and n["attrs"]["func_name"] == NOP for n in self.graph["nodes"]
        )


Value = Entry | list["Value"]  # a tensor entry, or a (nested) tuple of values


def flatten(value: Value) -> list[Entry]:
    """The entries of a (nested) tuple value, in order."""
    if isinstance(value, Entry):
        return [value]
    return [e for v in value for e in flatten(v)]


class GraphBuilder:
    """Nodes and params of a graph under construction, in execution order.

    Parameters
    ----------
    output_names
        Names of the model outputs: a kernel node producing exactly one of them is named
        after it (see :meth:`finish`).
    """

    def __init__(self, output_names: list[str]) -> None:
        self.nodes: list[Node] = []
        self.params: dict[str, np.ndarray[Any, Any]] = {}
        self._param_of: dict[tuple[str, tuple[int, ...], str], Entry] = {}
        self._names: set[str] = set()
        self.output_names = output_names

    def fresh(self, base: str) -> str:
        """``base``, or ``base_<k>`` if taken: a node name not used yet."""
        name, k = base, 1
        while name in self._names:
            name, k = f"{base}_{k}", k + 1
        self._names.add(name)
        return name

    def null(self, name: str, shape: tuple[int, ...], dtype: str) -> Entry:
        """A new ``null`` node (an input or a param) named ``name`` or a fresh variant."""
        node = Node("null", self.fresh(name))
        entry = Entry(len(self.nodes), 0, shape, dtype)
        node.outputs.append(entry)
        self.nodes.append(node)
        return entry

    def param(self, arr: np.ndarray[Any, Any], dtype: str) -> Entry:
        """The ``null`` node of a constant: ``p0``, ``p1``, ...; equal constants share one."""
        key = (dtype, tuple(arr.shape), hashlib.sha256(arr.tobytes()).hexdigest())
        entry = self._param_of.get(key)
        if entry is None:
            k = len(self.params)
            while f"p{k}" in self._names or f"p{k}" in self.params:
                k += 1
            entry = self.null(f"p{k}", tuple(int(d) for d in arr.shape), dtype)
            self.params[self.nodes[entry.node_id].name] = arr
            self._param_of[key] = entry
        return entry

    def add_op(
        self,
        name: str,
        inputs: list[Entry],
        func_name: str,
        outputs: list[tuple[tuple[int, ...], str]],
    ) -> Node:
        """A new ``tvm_op`` node calling ``func_name`` with one entry per ``(shape, dtype)``."""
        nid = len(self.nodes)
        node = Node("tvm_op", self.fresh(name), inputs, func_name=func_name)
        node.outputs = [Entry(nid, i, s, d) for i, (s, d) in enumerate(outputs)]
        self.nodes.append(node)
        return node

    def finish(
        self, heads: list[Entry], inputs: list[tuple[str, tuple[int, ...], str]]
    ) -> GraphArtifact:
        """The graph JSON and params with outputs ``heads`` and ``inputs`` (name, shape, dtype)."""
        heads = [self._copy_if_null(e) for e in heads]
        head_ids = {(e.node_id, e.index) for e in heads}
        for node in self.nodes:
            if (
                node.op == "tvm_op"
                and node.reshape
                and (node.outputs[0].node_id, 0) not in head_ids
            ):
                node.func_name = NOP
        self._name_outputs(heads)
        graph = self._graph_dict(heads)
        kernels = tuple(
            dict.fromkeys(
                n.func_name
                for n in self.nodes
                if n.op == "tvm_op" and n.func_name not in (NOP, COPY)
            )
        )
        return GraphArtifact(
            graph=graph,
            params=self.params,
            kernels=kernels,
            input_names=tuple(n for n, _, _ in inputs),
            input_shapes=tuple(s for _, s, _ in inputs),
            input_dtypes=tuple(d for _, _, d in inputs),
            output_shapes=tuple(e.shape for e in heads),
            output_dtypes=tuple(e.dtype for e in heads),
            kernel_args={
                n.func_name: tuple((e.shape, e.dtype) for e in [*n.inputs, *n.outputs])
                for n in reversed(self.nodes)
                if n.func_name in kernels
            },
        )

    def _copy_if_null(self, entry: Entry) -> Entry:
        """An output that is an input or a constant gets a private copy (built-in ``__copy``)."""
        if self.nodes[entry.node_id].op != "null":
            return entry
        nid = len(self.nodes)
        node = Node("tvm_op", self.fresh("__copy"), [entry], func_name=COPY)
        node.outputs = [Entry(nid, 0, entry.shape, entry.dtype)]
        self.nodes.append(node)
        return node.outputs[0]

    def _name_outputs(self, heads: list[Entry]) -> None:
        """Name single-output kernel nodes after the model output they produce."""
        if len(self.output_names) != len(heads):
            return
        counts: dict[int, int] = {}
        for e in heads:
            counts[e.node_id] = counts.get(e.node_id, 0) + 1
        for name, e in zip(self.output_names, heads, strict=True):
            node = self.nodes[e.node_id]
            if node.op != "tvm_op" or len(node.outputs) != 1 or counts[e.node_id] != 1:
                continue
            if name in self._names:
                continue
            self._names.discard(node.name)
            node.name = name
            self._names.add(name)

    def _graph_dict(self, heads: list[Entry]) -> dict[str, Any]:
        row_ptr = [0]
        for node in self.nodes:
            row_ptr.append(row_ptr[-1] + len(node.outputs))

        def eid(e: Entry) -> int:
            return row_ptr[e.node_id] + e.index

        entries = [e for node in self.nodes for e in node.outputs]
        storage = assign_storage_ids(
            nbytes=[e.nbytes for e in entries],
            producers=[
                (
                    [eid(o) for o in n.outputs],
                    [eid(i) for i in n.inputs],
                    n.op == "null",
                    n.func_name == NOP,
                )
                for n in self.nodes
            ],
            heads=[eid(h) for h in heads],
        )
        nodes_json: list[dict[str, Any]] = []
        for node in self.nodes:
            item: dict[str, Any] = {"op": node.op, "name": node.name}
            if node.op == "tvm_op":
                attrs = {
                    "func_name": node.func_name,
                    "flatten_data": "0",
                    "num_inputs": str(len(node.inputs)),
                    "num_outputs": str(len(node.outputs)),
                }
                attrs.update(node.attrs)
                item["attrs"] = attrs
            item["inputs"] = [[i.node_id, i.index, 0] for i in node.inputs]
            nodes_json.append(item)
        return {
            "nodes": nodes_json,
            "arg_nodes": [i for i, n in enumerate(self.nodes) if n.op == "null"],
            "heads": [[h.node_id, h.index, 0] for h in heads],
            "attrs": {
                "dltype": ["list_str", [e.dtype for e in entries]],
                "shape": ["list_shape", [list(e.shape) for e in entries]],
                "storage_id": ["list_int", storage],
            },
            "node_row_ptr": row_ptr,
        }
