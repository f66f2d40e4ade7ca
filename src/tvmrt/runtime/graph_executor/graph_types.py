"""The parsed graph: ``Graph``, ``Node`` and ``NodeEntry`` (immutable; made by ``parse_graph``).

A graph is TVM's graph executor JSON after validation: nodes in execution order (``null``
placeholders for inputs and params, ``tvm_op`` kernel calls), the input nodes, the
outputs (``heads``) and one shape, dtype, storage id, device type and storage scope per
entry, an entry being one output of one node.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from tvmrt.runtime.dtype import DataType

__all__ = ["Graph", "Node", "NodeEntry", "MAX_ENTRY_BYTES", "NNVM_TYPE_FLAGS"]

# No machine addresses more than 2**48 bytes (x86-64 and AArch64 user space): a larger
# entry is a corrupt or hostile graph, not a big model.
MAX_ENTRY_BYTES = 1 << 48

# NNVM's "dtype" attribute holds mshadow type flags instead of dtype strings.
NNVM_TYPE_FLAGS = {
    0: "float32",
    1: "float64",
    2: "float16",
    3: "uint8",
    4: "int32",
    5: "int8",
    6: "int64",
    7: "int16",
    8: "uint16",
    9: "uint32",
    10: "uint64",
}


@dataclass(frozen=True, slots=True)
class NodeEntry:
    """A reference to output ``index`` of node ``node_id``."""

    node_id: int
    index: int
    version: int = 0


@dataclass(frozen=True, slots=True)
class Node:
    """One node: a ``null`` placeholder (input or param) or a ``tvm_op`` kernel call."""

    op: str
    name: str
    inputs: tuple[NodeEntry, ...] = ()
    attrs: Mapping[str, str] = field(default_factory=dict)
    func_name: str = ""
    num_inputs: int = 0
    num_outputs: int = 1
    flatten_data: bool = False

    @property
    def is_op(self) -> bool:
        """Whether this node calls a kernel (``tvm_op``)."""
        return self.op == "tvm_op"


@dataclass(frozen=True)
class Graph:
    """A validated graph: nodes in execution order plus per-entry tables.

    Entry ids are dense: entry ``k`` of node ``nid`` is ``node_row_ptr[nid] + k``.
    """

    nodes: tuple[Node, ...]
    arg_nodes: tuple[int, ...]
    node_row_ptr: tuple[int, ...]
    heads: tuple[NodeEntry, ...]
    shapes: tuple[tuple[int, ...], ...]
    dltypes: tuple[DataType, ...]
    storage_ids: tuple[int, ...] | None
    device_types: tuple[int, ...] | None
    storage_scopes: tuple[str, ...] | None
    json: str

    @property
    def num_entries(self) -> int:
        """Total number of node outputs (tensors)."""
        return self.node_row_ptr[-1]

    def entry_id(self, node_id: int, index: int = 0) -> int:
        """Global id of output ``index`` of node ``node_id``."""
        return self.node_row_ptr[node_id] + index

    def entry_nbytes(self, eid: int) -> int:
        """Bytes of entry ``eid`` (sub-byte types take one byte per element)."""
        return math.prod(self.shapes[eid]) * self.dltypes[eid].itemsize
