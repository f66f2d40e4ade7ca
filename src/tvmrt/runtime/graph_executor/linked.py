"""Weights linked into a TVM 0.7/0.8 ``link-params`` library (``_lookup_linked_param``).

Such a library exports ``_lookup_linked_param(storage_id)``, returning the address of the
constant data of that storage entry (NULL where it holds none). TVM 0.8's graph executor
asked it for every storage id before allocating; tvmrt asks it for the graph's inputs when
an executor is created, so ``create(graph_json, lib, dev)`` runs such a library as TVM did,
and the weights bind like params loaded from a file.
"""

from __future__ import annotations

import ctypes

from tvmrt.runtime.graph_executor.graph import Graph
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray, empty

__all__ = ["LOOKUP_FUNCTION", "linked_params"]

LOOKUP_FUNCTION = "_lookup_linked_param"


def linked_params(lib: Module, graph: Graph) -> dict[str, NDArray]:
    """The weights ``lib`` holds for ``graph``'s inputs, by input name ({} for most libraries).

    Each is copied out of the library into an array of the graph's shape and dtype.

    Raises
    ------
    KernelError
        If the lookup function fails.
    """
    if graph.storage_ids is None:
        return {}
    lookup = lib.find_function(LOOKUP_FUNCTION, True)
    if lookup is None:
        return {}
    out: dict[str, NDArray] = {}
    for nid in graph.arg_nodes:
        eid = graph.entry_id(nid)
        address = lookup(int(graph.storage_ids[eid]))
        if not address:
            continue
        arr = empty(graph.shapes[eid], graph.dltypes[eid])
        ctypes.memmove(arr.data_ptr, int(address), arr.nbytes)
        out[graph.nodes[nid].name] = arr
    return out
