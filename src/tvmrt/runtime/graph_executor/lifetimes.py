"""Refuse a storage plan that puts two values alive at the same time in one pool.

A graph's ``storage_id`` table is the compiler's promise that entries sharing a pool are
never needed at the same time. A damaged table breaks it silently: a kernel writes its
output over its own input, or over an intermediate a later node still reads, and every
run gives another wrong answer. :func:`check_lifetimes` recomputes every entry's lifetime
(linear in the graph) and raises :class:`~tvmrt.error.GraphFormatError` naming both
entries' nodes when two live ones share a pool.

Lifetimes follow TVM's planner (``src/relay/backend/graph_plan_memory.cc``,
``StorageAllocator``), which is also how the executor runs the nodes, one at a time in
array order:

* an entry is alive from the node that writes it to the last node that reads it; an
  output nobody reads is alive at its own node only (TVM releases it right after the
  call);
* a node's outputs are claimed before its inputs are released, so a kernel's output never
  shares a pool with its own input (TIR kernels are compiled ``noalias``);
* inputs and params (``null`` nodes) and graph outputs (``heads``) are alive for the whole
  run: they are set before it and read after it.

The one in-place case TVM's Relay planner produces is a reshape-only fused function:
``ReuseInputToken`` gives its output its input's token, and the graph codegen then emits
it as a ``__nop`` node (``graph_executor_codegen.cc``: ``reshape_nop``) that runs
nothing. A ``__nop`` output in its input's pool is therefore the same value: its lifetime
joins its input's. NNVM's ``FInplaceOption`` in-place reuse never reaches graph JSON
(it applies to NNVM operators, and ``PlanMemory`` runs on fused ``tvm_op`` nodes, which
declare none); NNVM's ``_assign`` ties a kernel's output to a variable, which
:func:`~tvmrt.runtime.graph_executor.storage.check_input_pools` refuses for inference.
``docs/artifacts.md`` ("Storage plans") states the same rules.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Sequence

from tvmrt.error import GraphFormatError
from tvmrt.runtime.graph_executor.graph import Graph

__all__ = ["check_lifetimes", "lifetime_problem"]


def lifetime_problem(graph: Graph, sids: Sequence[int]) -> str | None:
    """Why ``sids`` lets two live entries share a pool, or None (see the module doc)."""
    nodes = graph.nodes
    row_ptr = graph.node_row_ptr
    forever = len(nodes)  # past the last node: inputs, params and outputs
    num_entries = graph.num_entries
    # owner[e]: the entry whose value e is (itself, or a __nop's input in the same pool);
    # machine-int arrays: 24 bytes per entry, whatever the graph's size
    owner = array("q", range(num_entries))
    start = array("q", bytes(8 * num_entries))
    end = array("q", bytes(8 * num_entries))
    for nid, node in enumerate(nodes):
        first = row_ptr[nid]
        if not node.is_op:
            start[first] = -1
            end[first] = forever
            continue
        for ref in node.inputs:
            e = owner[row_ptr[ref.node_id] + ref.index]
            if end[e] < nid:
                end[e] = nid
        count = row_ptr[nid + 1] - first
        for k in range(count):
            start[first + k] = nid
            end[first + k] = nid
        if node.func_name == "__nop":  # runs nothing: an output in its input's pool is it
            for k, ref in enumerate(node.inputs[:count]):
                src = owner[row_ptr[ref.node_id] + ref.index]
                if sids[src] == sids[first + k]:
                    owner[first + k] = src
    for head in graph.heads:
        end[owner[row_ptr[head.node_id] + head.index]] = forever
    # Values in entry order start in node order (inputs at -1, alive throughout), so one
    # pass keeping, per pool, the value that lives longest finds every overlap.
    latest = array("q", [-1]) * (max(sids, default=-1) + 1)  # per pool: its latest value
    for e in range(num_entries):
        if owner[e] != e:
            continue
        sid = sids[e]
        prev = latest[sid]
        if prev < 0:
            latest[sid] = e
            continue
        if start[e] <= end[prev]:
            return _describe(graph, sid, prev, e, start, end)
        if end[e] > end[prev]:
            latest[sid] = e
    return None


def check_lifetimes(graph: Graph, sids: Sequence[int]) -> None:
    """Raise GraphFormatError if two entries alive at the same time share a pool."""
    problem = lifetime_problem(graph, sids)
    if problem is not None:
        raise GraphFormatError(problem)


def _describe(
    graph: Graph, sid: int, a: int, b: int, start: Sequence[int], end: Sequence[int]
) -> str:
    forever = len(graph.nodes)

    def entry(e: int) -> str:
        nid = bisect.bisect_right(graph.node_row_ptr, e) - 1
        node = graph.nodes[nid]
        if not node.is_op:
            what = "input; "
        else:
            what = "" if node.func_name == node.name else f"kernel {node.func_name!r}; "
        if start[e] < 0:
            alive = "alive for the whole run"
        elif end[e] >= forever:
            alive = f"alive from node {start[e]} to the end (a graph output)"
        else:
            alive = f"alive at nodes {start[e]}..{end[e]}"
        index = e - graph.node_row_ptr[nid]
        return f"output {index} of node {nid} {node.name!r} ({what}{alive})"

    return (
        f"graph JSON: attrs['storage_id'] puts {entry(a)} and {entry(b)} in storage pool "
        f"{sid}, but both are alive at node {max(start[a], start[b], 0)}: writing one "
        "overwrites the other, so results would be wrong. Entries may share a pool only "
        "when their lifetimes do not overlap (a __nop reshape shares its input's)"
    )
