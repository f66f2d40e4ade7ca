"""Build graph JSON documents by hand, as TVM's tests do."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["GraphBuilder", "Ref", "add_one", "chain", "reshape_nop", "heterogeneous_simplex"]


@dataclass(frozen=True)
class Ref:
    """Output ``index`` of node ``node_id``."""

    node_id: int
    index: int = 0


@dataclass
class _Entry:
    shape: tuple[int, ...]
    dtype: str
    storage_id: int | None
    device_type: int | None


@dataclass
class GraphBuilder:
    """Accumulates nodes and emits a graph JSON with TVM's conventions.

    Every entry gets its own storage id unless one is given; pass ``storage_id`` to
    share pools (``__nop`` reshapes must share their input's id).

    Examples
    --------
    >>> b = GraphBuilder()
    >>> x = b.input("x", (4,))
    >>> (y,) = b.op("add", "myadd", [x], [(4,)])
    >>> b.output(y)
    >>> sorted(json.loads(b.to_json()))
    ['arg_nodes', 'attrs', 'heads', 'node_row_ptr', 'nodes']
    """

    nodes: list[dict[str, Any]] = field(default_factory=list)
    entries: list[_Entry] = field(default_factory=list)
    row_ptr: list[int] = field(default_factory=lambda: [0])
    arg_nodes: list[int] = field(default_factory=list)
    heads: list[Ref] = field(default_factory=list)

    def _add_entry(
        self, shape: Sequence[int], dtype: str, storage_id: int | None, device_type: int | None
    ) -> None:
        self.entries.append(_Entry(tuple(shape), dtype, storage_id, device_type))

    def input(
        self,
        name: str,
        shape: Sequence[int],
        dtype: str = "float32",
        storage_id: int | None = None,
        device_type: int | None = None,
    ) -> Ref:
        """Add a ``null`` node (graph input or param)."""
        nid = len(self.nodes)
        self.nodes.append({"op": "null", "name": name, "inputs": []})
        self.arg_nodes.append(nid)
        self._add_entry(shape, dtype, storage_id, device_type)
        self.row_ptr.append(len(self.entries))
        return Ref(nid)

    def op(
        self,
        name: str,
        func_name: str,
        inputs: Sequence[Ref],
        out_shapes: Sequence[Sequence[int]],
        dtype: str | Sequence[str] = "float32",
        flatten_data: bool = False,
        storage_ids: Sequence[int | None] | None = None,
        device_type: int | None = None,
        **attrs: str,
    ) -> list[Ref]:
        """Add a ``tvm_op`` node; returns references to its outputs."""
        nid = len(self.nodes)
        self.nodes.append(
            {
                "op": "tvm_op",
                "name": name,
                "attrs": {
                    "func_name": func_name,
                    "num_inputs": str(len(inputs)),
                    "num_outputs": str(len(out_shapes)),
                    "flatten_data": "1" if flatten_data else "0",
                    **attrs,
                },
                "inputs": [[r.node_id, r.index, 0] for r in inputs],
            }
        )
        dtypes = [dtype] * len(out_shapes) if isinstance(dtype, str) else list(dtype)
        sids = list(storage_ids) if storage_ids is not None else [None] * len(out_shapes)
        for shape, dt, sid in zip(out_shapes, dtypes, sids, strict=True):
            self._add_entry(shape, dt, sid, device_type)
        self.row_ptr.append(len(self.entries))
        return [Ref(nid, k) for k in range(len(out_shapes))]

    def output(self, *refs: Ref) -> None:
        """Append graph outputs (heads)."""
        self.heads.extend(refs)

    def to_dict(self, with_storage_ids: bool = True) -> dict[str, Any]:
        """The graph as a JSON-ready dict (entries without an id get fresh ones)."""
        used = {e.storage_id for e in self.entries if e.storage_id is not None}
        next_sid = max(used, default=-1) + 1
        sids = []
        for e in self.entries:
            if e.storage_id is None:
                sids.append(next_sid)
                next_sid += 1
            else:
                sids.append(e.storage_id)
        attrs: dict[str, Any] = {
            "dltype": ["list_str", [e.dtype for e in self.entries]],
            "shape": ["list_shape", [list(e.shape) for e in self.entries]],
        }
        if with_storage_ids:
            attrs["storage_id"] = ["list_int", sids]
        if any(e.device_type is not None for e in self.entries):
            attrs["device_index"] = ["list_int", [e.device_type or 1 for e in self.entries]]
        return {
            "nodes": self.nodes,
            "arg_nodes": self.arg_nodes,
            "heads": [[r.node_id, r.index, 0] for r in self.heads],
            "attrs": attrs,
            "node_row_ptr": self.row_ptr,
        }

    def to_json(self, with_storage_ids: bool = True) -> str:
        """The graph JSON text."""
        return json.dumps(self.to_dict(with_storage_ids))


def add_one(n: int = 4, dtype: str = "float32") -> str:
    """TVM's ``test_graph_simple`` graph: input ``x`` of ``n`` elements, ``myadd`` (+1)."""
    b = GraphBuilder()
    x = b.input("x", (n,), dtype)
    (y,) = b.op("add", "myadd", [x], [(n,)], dtype, flatten_data=True)
    b.output(y)
    return b.to_json()


def chain(length: int, shape: Sequence[int] = (1,), func_name: str = "relu") -> str:
    """Input ``x`` through ``length`` one-input kernels ``func_name``, reusing two pools."""
    b = GraphBuilder()
    ref = b.input("x", shape, storage_id=0)
    for i in range(length):
        sid = 1 + i % 2 if i < length - 1 else 3
        (ref,) = b.op(f"{func_name}{i}", func_name, [ref], [shape], storage_ids=[sid])
    b.output(ref)
    return b.to_json()


def reshape_nop() -> str:
    """Like TVM's ``test_reshape_nop``: storage ids (0, 1, 1, 2, 3, 2), two ``__nop`` reshapes.

    ``z0 = x + x`` is output 0 reshaped to (100,) by a ``__nop``; ``z1 = z0 * z0`` feeds
    output 1 ``relu(z1)`` and is output 2 reshaped to (2, 50) by another ``__nop``.
    """
    b = GraphBuilder()
    x = b.input("x", (10, 10), storage_id=0)
    (z0,) = b.op("add", "add", [x, x], [(10, 10)], storage_ids=[1])
    (r0,) = b.op("reshape_nop", "__nop", [z0], [(100,)], storage_ids=[1])
    (z1,) = b.op("multiply", "multiply", [z0, z0], [(10, 10)], storage_ids=[2])
    (z2,) = b.op("relu", "relu", [z1], [(10, 10)], storage_ids=[3])
    (r1,) = b.op("reshape_nop", "__nop", [z1], [(2, 50)], storage_ids=[2])
    b.output(r0, z2, r1)
    return b.to_json()


def heterogeneous_simplex(device_type: int, n: int = 4) -> str:
    """TVM's simplex heterogeneous graph: ``(A + B)`` on a device, ``__copy`` to cpu, ``- C``."""
    b = GraphBuilder()
    a = b.input("A", (n,), storage_id=3, device_type=device_type)
    bb = b.input("B", (n,), storage_id=4, device_type=device_type)
    (s,) = b.op("elemwise_add", "add", [a, bb], [(n,)], storage_ids=[0], device_type=device_type)
    (c,) = b.op("__copy_add_to_sub", "__copy", [s], [(n,)], storage_ids=[1], device_type=1)
    cc = b.input("C", (n,), storage_id=5, device_type=1)
    (out,) = b.op("elemwise_sub", "subtract", [c, cc], [(n,)], storage_ids=[2], device_type=1)
    b.output(out)
    return b.to_json()
