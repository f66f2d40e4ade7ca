"""One ``tvm_op`` node bound to its kernel: the lookup at create and the prepared step.

:func:`find_op` looks the node's kernel up once (a missing kernel fails at create, not in
``run``); :func:`prepare_step` binds it to the node's argument arrays, giving the
``(fn, args)`` step of the run program. ``__nop`` (a reshape: no step) and ``__copy`` (a
copy between entries) need no kernel.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from tvmrt.error import ArrayError, FunctionNotFoundError
from tvmrt.runtime.graph_executor.graph import Graph, Node
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.packed_func import BoundCall, PackedFunc, PreparedCall

__all__ = ["OpBinding", "find_op", "prepare_step", "noop"]


def noop() -> None:
    """The step of a node that does nothing (``__nop``) and of an empty program."""
    return None


@dataclass
class OpBinding:
    """A ``tvm_op`` node bound to its kernel and argument entries."""

    node_id: int
    node: Node
    arg_eids: tuple[int, ...]
    func: PackedFunc | None
    step: PreparedCall
    step_index: int = -1  # position in the run program; -1: not in it (``__nop``)

    @property
    def call(self) -> BoundCall:
        """The step as one zero-argument callable."""
        fn, fn_args = self.step
        return functools.partial(fn, *fn_args)


def find_op(graph: Graph, lib: Module, nid: int, node: Node) -> OpBinding:
    """Node ``nid``'s entries and kernel (looked up in ``lib`` and its imports), unbound.

    Raises
    ------
    FunctionNotFoundError
        If ``lib`` has no kernel of the node's ``func_name``.
    ArrayError
        If a ``__copy`` node does not have one input and one output.
    """
    arg_eids = tuple(graph.entry_id(r.node_id, r.index) for r in node.inputs) + tuple(
        graph.entry_id(nid, k) for k in range(node.num_outputs)
    )
    func: PackedFunc | None = None
    if node.func_name not in ("__nop", "__copy"):
        func = lib.find_function(node.func_name, True)
        if func is None:
            raise FunctionNotFoundError(
                f"node {nid} ({node.name!r}) calls kernel {node.func_name!r}, which the "
                f"library ({lib.type_key!r} module) does not have: "
                f"no such function in module: {node.func_name}"
            )
    elif node.func_name == "__copy" and len(arg_eids) != 2:
        raise ArrayError(
            f"node {nid} ({node.name!r}): __copy takes one input and one output, "
            f"got {len(node.inputs)} and {node.num_outputs}"
        )
    return OpBinding(nid, node, arg_eids, func, (noop, ()))


def prepare_step(op: OpBinding, entries: Sequence[NDArray]) -> PreparedCall:
    """``op``'s step on the arrays ``entries`` holds now (flattened if the node says so)."""
    args = tuple(entries[e] for e in op.arg_eids)
    if op.node.flatten_data:
        args = tuple(a._create_view((math.prod(a.shape),)) for a in args)
    name = op.node.func_name
    if name == "__nop":
        return (noop, ())
    if name == "__copy":
        src, dst = args
        if src.nbytes != dst.nbytes:
            raise ArrayError(
                f"node {op.node_id} ({op.node.name!r}): __copy from {src.shape} {src.dtype} "
                f"to {dst.shape} {dst.dtype}: the size in bytes must exactly match"
            )
        return (src.copyto, (dst,))
    assert op.func is not None
    return op.func.prepare_call(args)
