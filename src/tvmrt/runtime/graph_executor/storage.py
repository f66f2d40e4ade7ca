"""Storage plan: one pool per ``storage_id``, sized exactly as TVM sizes it.

A pool is as large as the largest entry that uses it, allocated as TVM's
``GraphExecutor::SetupStorage`` does: a ``float32`` array of ``ceil(nbytes / 4)``
elements.

The compiler's ``storage_id`` assignment is used once checked: no input shares a pool
with a kernel's output, and no two entries alive at the same time share a pool
(:mod:`tvmrt.runtime.graph_executor.lifetimes`). A graph without a
``storage_id`` table gets a plan from :func:`plan_by_liveness`: inputs and outputs
keep private pools, ``__nop`` outputs alias their input, and other entries reuse a
pool whose last reader has already run.
"""

from __future__ import annotations

import bisect
import os
from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass

from tvmrt.error import DeviceOutOfMemoryError, GraphFormatError
from tvmrt.runtime.graph_executor.graph import Graph
from tvmrt.runtime.graph_executor.lifetimes import check_lifetimes

__all__ = [
    "PoolEntry",
    "StoragePlan",
    "plan_storage",
    "plan_by_liveness",
    "assign_storage_ids",
    "check_input_pools",
    "check_host_memory",
    "host_memory_problem",
]


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
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
        If one pool is assigned to entries on two different devices, an input (data or
        weight) shares its pool with an entry a kernel writes, or two entries alive at
        the same time share a pool (:mod:`.lifetimes`).
    """
    sids = graph.storage_ids if graph.storage_ids is not None else plan_by_liveness(graph)
    size = max(sids, default=-1) + 1
    # per pool, in lists indexed by storage id: compact for graphs of a million entries
    nbytes = [0] * size
    devices: list[int | None] = [None] * size
    scopes = [""] * size
    for eid, sid in enumerate(sids):
        dev = graph.device_types[eid] if graph.device_types else fallback_device_type
        seen = devices[sid]
        if seen is None:
            devices[sid] = dev
        elif seen != dev:
            raise GraphFormatError(
                f"graph JSON: storage pool {sid} is assigned to entries on device types "
                f"{seen} and {dev} (entry {eid}): The same pool entry cannot be "
                "assigned to multiple devices"
            )
        scope = graph.storage_scopes[eid] if graph.storage_scopes else ""
        scopes[sid] = "" if scope == "global" else scope
        entry_bytes = graph.entry_nbytes(eid)
        if entry_bytes > nbytes[sid]:
            nbytes[sid] = entry_bytes
    if graph.storage_ids is not None:  # tvmrt's own plan is right by construction
        check_input_pools(graph, sids)
        check_lifetimes(graph, sids)
    # A storage id nobody uses still gets an empty pool, as in TVM.
    pools = tuple(
        PoolEntry(sid, nbytes[sid], fallback_device_type if dev is None else dev, scopes[sid])
        for sid, dev in enumerate(devices)
    )
    return StoragePlan(pools, tuple(sids))


def check_input_pools(graph: Graph, sids: Sequence[int]) -> None:
    """Refuse a plan in which an input's pool is shared with anything but its reshapes.

    A kernel writing into a weight's pool would overwrite the weight on every run, and
    two inputs in one pool overwrite each other; only ``__nop`` outputs (which no kernel
    writes) may alias an input.
    """
    owner: dict[int, int] = {}  # pool -> arg node using it
    for nid in graph.arg_nodes:
        sid = sids[graph.entry_id(nid)]
        other = owner.setdefault(sid, nid)
        if other != nid:
            raise GraphFormatError(
                f"graph JSON: inputs {graph.nodes[other].name!r} (node {other}) and "
                f"{graph.nodes[nid].name!r} (node {nid}) share storage pool {sid}; every "
                "input needs a pool of its own, or setting one overwrites the other"
            )
    if not owner:
        return
    for nid, node in enumerate(graph.nodes):
        if not node.is_op or node.func_name == "__nop":
            continue
        for k in range(node.num_outputs):
            sid = sids[graph.entry_id(nid, k)]
            arg = owner.get(sid)
            if arg is not None:
                raise GraphFormatError(
                    f"graph JSON: node {nid} ({node.name!r}) writes output {k} into storage "
                    f"pool {sid}, which holds input {graph.nodes[arg].name!r} (node {arg}); "
                    "every run would overwrite that input, so an input's pool may only be "
                    "shared with __nop reshapes of it"
                )


def plan_by_liveness(graph: Graph) -> tuple[int, ...]:
    """Assign storage ids by liveness for a graph that has none (see :func:`assign_storage_ids`)."""
    producers = []
    for nid, node in enumerate(graph.nodes):
        first = graph.entry_id(nid)
        count = node.num_outputs if node.is_op else 1
        producers.append(
            (
                list(range(first, first + count)),
                [graph.entry_id(r.node_id, r.index) for r in node.inputs],
                not node.is_op,
                node.func_name == "__nop",
            )
        )
    nbytes = [graph.entry_nbytes(e) for e in range(graph.num_entries)]
    heads = [graph.entry_id(h.node_id, h.index) for h in graph.heads]
    return tuple(assign_storage_ids(nbytes, producers, heads, graph.device_types))


Producer = tuple[Sequence[int], Sequence[int], bool, bool]
"""A node for :func:`assign_storage_ids`: output entry ids, input entry ids, is_null, is_nop."""


def assign_storage_ids(
    nbytes: Sequence[int],
    producers: Sequence[Producer],
    heads: Sequence[int],
    devices: Sequence[int] | None = None,
) -> list[int]:
    """Storage ids by liveness, with the conventions of TVM's graph memory planner.

    Graph inputs, params and outputs get private pools; a ``__nop`` output shares its
    input's pool; any other entry takes a free pool of its device (best fit by size) or
    a new one. A pool is free again once the last node reading it has run, and a node's
    outputs are placed before its inputs are released, so a kernel never writes where it
    reads (TIR kernels are compiled ``noalias``). Ids are numbered in first-use order.

    Parameters
    ----------
    nbytes
        Size of each entry, by entry id.
    producers
        Per node in execution order: ``(outputs, inputs, is_null, is_nop)`` entry ids.
    heads
        Entry ids of the graph outputs.
    devices
        Device type of each entry (pools never cross devices); ``None``: one device.
    """
    last_use = [-1] * len(nbytes)
    for nid, (_, inputs, _, _) in enumerate(producers):
        for e in inputs:
            last_use[e] = max(last_use[e], nid)
    head_set = set(heads)
    sids = [-1] * len(nbytes)
    sizes: list[int] = []
    pool_device: list[int] = []
    pinned: set[int] = set()  # pools that are never reused
    refcount: dict[int, int] = defaultdict(int)
    free = _FreePools()
    releases: dict[int, list[int]] = defaultdict(list)

    def device_of(eid: int) -> int:
        return devices[eid] if devices else 0

    def new_pool(eid: int) -> int:
        sizes.append(nbytes[eid])
        pool_device.append(device_of(eid))
        return len(sizes) - 1

    for nid, (outputs, inputs, is_null, is_nop) in enumerate(producers):
        for k, eid in enumerate(outputs):
            if is_null or eid in head_set:
                sid = new_pool(eid)
                pinned.add(sid)
            elif is_nop and k < len(inputs):
                sid = sids[inputs[k]]
            else:
                reused = free.take(device_of(eid), nbytes[eid])
                sid = new_pool(eid) if reused is None else reused
                sizes[sid] = max(sizes[sid], nbytes[eid])
            sids[eid] = sid
            # an entry nobody reads frees its pool once its own node has run
            refcount[sid] += 1
            releases[max(last_use[eid], nid)].append(sid)
        for sid in releases.pop(nid, []):
            refcount[sid] -= 1
            if refcount[sid] == 0 and sid not in pinned:
                free.put(pool_device[sid], sizes[sid], sid)
    return sids


class _FreePools:
    """Free pools per device: a FIFO per pool size plus the sorted list of sizes present.

    Best fit is a bisection over the distinct sizes (few in practice), so taking and
    freeing a pool costs O(log sizes), however many pools are free.
    """

    def __init__(self) -> None:
        self._sizes: dict[int, list[int]] = defaultdict(list)  # device -> sorted sizes
        self._queues: dict[tuple[int, int], deque[int]] = {}  # (device, size) -> sids

    def put(self, device: int, size: int, sid: int) -> None:
        queue = self._queues.get((device, size))
        if queue is None:
            queue = self._queues[(device, size)] = deque()
            bisect.insort(self._sizes[device], size)
        queue.append(sid)

    def take(self, device: int, nbytes: int) -> int | None:
        """The smallest free pool that fits ``nbytes``, else the largest (it grows least).

        Among pools of equal size the one freed first wins.
        """
        sizes = self._sizes.get(device)
        if not sizes:
            return None
        i = bisect.bisect_left(sizes, nbytes)
        if i == len(sizes):  # nothing fits
            i -= 1
        size = sizes[i]
        queue = self._queues[(device, size)]
        sid = queue.popleft()
        if not queue:
            del self._queues[(device, size)]
            del sizes[i]
        return sid


def host_memory_bytes() -> int | None:
    """Physical memory of this machine in bytes, or None where it cannot be read."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):  # pragma: no cover - non-POSIX hosts
        return None


def host_memory_problem(plan: StoragePlan, host_device_type: int = 1) -> str | None:
    """Why the plan's host pools cannot be allocated on this machine, or None."""
    need = plan.bytes_by_device().get(host_device_type, 0)
    have = host_memory_bytes()
    if have is None or need <= have:
        return None
    return (
        f"the storage plan needs {need / 2**30:.1f} GiB of host memory, more than this "
        f"machine's {have / 2**30:.1f} GiB"
    )


def check_host_memory(plan: StoragePlan, host_device_type: int = 1) -> None:
    """Raise DeviceOutOfMemoryError if the host pools exceed this machine's memory."""
    problem = host_memory_problem(plan, host_device_type)
    if problem is not None:
        raise DeviceOutOfMemoryError(f"cannot create the graph executor: {problem}")
