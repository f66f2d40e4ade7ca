"""What a graph's library says about its params: weights linked into a TVM 0.7/0.8
``link-params`` library (``_lookup_linked_param``), and the era of its params' dtype codes.

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
from tvmrt.runtime.tensor_record import DtypeCodes

__all__ = ["LOOKUP_FUNCTION", "linked_params", "param_codes"]

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


def param_codes(lib: Module) -> DtypeCodes:
    """The dtype codes of this graph's params: TVM >= 0.21 (tvm-ffi kernels) saves them with
    DLPack 1.x codes, older TVMs with their own table (tensor_record.DtypeCodes)."""
    pending, seen = [lib], 0
    while pending and seen < 64:  # a library imports a handful of modules at most
        module = pending.pop()
        seen += 1
        if str(getattr(module, "abi", "")).startswith("tvm-ffi"):
            return "ffi"
        pending.extend(module.imported_modules)
    return "legacy"
