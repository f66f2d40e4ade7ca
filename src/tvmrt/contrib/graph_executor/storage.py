"""Storage plan: one pool per ``storage_id``, sized exactly as TVM sizes it (spec §3).

The compiler's ``storage_id`` assignment is taken as is. A graph without a
``storage_id`` table gets a plan from :func:`plan_by_liveness`: inputs and outputs
keep private pools, ``__nop`` outputs alias their input, and other entries reuse a
pool whose last reader has already run.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from tvmrt.contrib.graph_executor.graph import Graph
from tvmrt.error import GraphFormatError

__all__ = ["PoolEntry", "StoragePlan", "plan_storage", "plan_by_liveness"]


@dataclass(frozen=True)
class PoolEntry:
    """One storage pool: its id, size in bytes, device type and memory scope."""

    storage_id: int
    nbytes: int
    device_type: int
    scope: str = ""

    @property
    def alloc_bytes(self) -> int:
        """Bytes TVM allocates: a float32 array of ``ceil(nbytes / 4)`` elements."""
        return (self.nbytes + 3) // 4 * 4


@dataclass(frozen=True)
class StoragePlan:
    """Pools and the pool of every entry."""

    pools: tuple[PoolEntry, ...]
    entry_storage: tuple[int, ...]

    @property
    def num_pools(self) -> int:
        """Number of pools."""
        return len(self.pools)

    @property
    def total_bytes(self) -> int:
        """Bytes allocated for all pools together."""
        return sum(p.alloc_bytes for p in self.pools)

    def bytes_by_device(self) -> dict[int, int]:
        """Allocated bytes per device type."""
        out: dict[int, int] = defaultdict(int)
        for pool in self.pools:
            out[pool.device_type] += pool.alloc_bytes
        return dict(out)


def plan_storage(graph: Graph, fallback_device_type: int) -> StoragePlan:
    """Size the pools of ``graph`` (its ``storage_id`` table, or a liveness plan).

    Parameters
    ----------
    graph
        A parsed graph.
    fallback_device_type
        Device type of entries when the graph has no ``device_index`` table (the
        executor's first device).

    Raises
    ------
    GraphFormatError
        If one pool is assigned to entries on two different devices.
    """
    sids = graph.storage_ids if graph.storage_ids is not None else plan_by_liveness(graph)
    nbytes: dict[int, int] = {}
    devices: dict[int, int] = {}
    scopes: dict[int, str] = {}
    for eid, sid in enumerate(sids):
        dev = graph.device_types[eid] if graph.device_types else fallback_device_type
        if devices.setdefault(sid, dev) != dev:
            raise GraphFormatError(
                f"graph JSON: storage pool {sid} is assigned to entries on device types "
                f"{devices[sid]} and {dev} (entry {eid}): The same pool entry cannot be "
                "assigned to multiple devices"
            )
        scope = graph.storage_scopes[eid] if graph.storage_scopes else ""
        scopes[sid] = "" if scope == "global" else scope
        nbytes[sid] = max(nbytes.get(sid, 0), graph.entry_nbytes(eid))
    size = max(sids, default=-1) + 1
    # A storage id nobody uses still gets an empty pool, as in TVM.
    pools = tuple(
        PoolEntry(
            sid, nbytes.get(sid, 0), devices.get(sid, fallback_device_type), scopes.get(sid, "")
        )
        for sid in range(size)
    )
    return StoragePlan(pools, tuple(sids))


def plan_by_liveness(graph: Graph) -> tuple[int, ...]:
    """Assign storage ids by liveness for a graph that has none.

    Graph inputs and outputs get private pools; a ``__nop`` output shares its input's
    pool; any other entry takes a free pool of the same device (best fit by size) or
    a new one. A pool is free again once the last node reading it has run.
    """
    n_entries = graph.num_entries
    heads = {graph.entry_id(h.node_id, h.index) for h in graph.heads}
    last_use = [-1] * n_entries
    for nid, node in enumerate(graph.nodes):
        for ref in node.inputs:
            eid = graph.entry_id(ref.node_id, ref.index)
            last_use[eid] = max(last_use[eid], nid)
    sids = [-1] * n_entries
    sizes: list[int] = []
    pinned: set[int] = set()  # pools that are never reused
    refcount: dict[int, int] = defaultdict(int)
    free: list[int] = []
    pool_device: list[int] = []

    def device_of(eid: int) -> int:
        return graph.device_types[eid] if graph.device_types else 0

    def new_pool(eid: int) -> int:
        sizes.append(graph.entry_nbytes(eid))
        pool_device.append(device_of(eid))
        return len(sizes) - 1

    releases: dict[int, list[int]] = defaultdict(list)
    for nid, node in enumerate(graph.nodes):
        first = graph.entry_id(nid)
        outputs = range(first, first + (node.num_outputs if node.is_op else 1))
        for k, eid in enumerate(outputs):
            if not node.is_op or eid in heads:
                sid = new_pool(eid)
                pinned.add(sid)
            elif node.func_name == "__nop" and k < len(node.inputs):
                ref = node.inputs[k]
                sid = sids[graph.entry_id(ref.node_id, ref.index)]
            else:
                nbytes = graph.entry_nbytes(eid)
                reused = _take_free(free, sizes, nbytes, pool_device, device_of(eid))
                sid = new_pool(eid) if reused is None else reused
                sizes[sid] = max(sizes[sid], graph.entry_nbytes(eid))
            sids[eid] = sid
            # an entry nobody reads frees its pool once its own node has run
            refcount[sid] += 1
            releases[max(last_use[eid], nid)].append(sid)
        for sid in releases.pop(nid, []):
            refcount[sid] -= 1
            if refcount[sid] == 0 and sid not in pinned:
                free.append(sid)
    return tuple(sids)


def _take_free(
    free: list[int], sizes: list[int], nbytes: int, pool_device: list[int], device: int
) -> int | None:
    """The free pool on ``device`` that fits ``nbytes`` most tightly, else the largest one."""
    best: tuple[tuple[int, int], int] | None = None
    for i, sid in enumerate(free):
        if pool_device[sid] != device:
            continue
        fits = sizes[sid] >= nbytes
        key = (0, sizes[sid]) if fits else (1, -sizes[sid])  # a larger pool grows least
        if best is None or key < best[0]:
            best = (key, i)
    if best is None:
        return None
    return free.pop(best[1])
