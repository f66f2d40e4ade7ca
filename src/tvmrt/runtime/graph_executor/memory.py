"""The executor's memory: alias groups, pools, and every entry as a view of its pool.

:func:`allocate_entries` allocates the planned pools once (on the device of each pool's
device type) and makes every graph entry a view of its pool; inputs named in a preset
(the factory's params) are bound to the given arrays instead, without copying where the
array fits. Entries joined by a ``__nop`` reshape share memory: one alias group.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from tvmrt.error import ArrayError, InternalError
from tvmrt.runtime.device import Device, DLDeviceType
from tvmrt.runtime.device_api import get_device_api
from tvmrt.runtime.graph_executor.checks import external_problem
from tvmrt.runtime.graph_executor.graph import Graph
from tvmrt.runtime.graph_executor.storage import StoragePlan
from tvmrt.runtime.ndarray import NDArray, empty

__all__ = ["alias_groups", "device_for_type", "allocate_entries"]


def alias_groups(graph: Graph) -> list[list[int]]:
    """Entries joined by ``__nop`` nodes (a reshape aliases its input): the group per entry."""
    parent = list(range(graph.num_entries))

    def root(e: int) -> int:
        while parent[e] != e:
            parent[e] = parent[parent[e]]
            e = parent[e]
        return e

    for nid, node in enumerate(graph.nodes):
        if node.is_op and node.func_name == "__nop":
            for k, ref in enumerate(node.inputs[: node.num_outputs]):
                src, dst = graph.entry_id(ref.node_id, ref.index), graph.entry_id(nid, k)
                if graph.entry_nbytes(src) == graph.entry_nbytes(dst):
                    parent[root(dst)] = root(src)
    members: dict[int, list[int]] = defaultdict(list)
    for eid in range(graph.num_entries):
        members[root(eid)].append(eid)
    return [members[root(eid)] for eid in range(graph.num_entries)]


def device_for_type(devices: Sequence[Device], device_type: int) -> Device:
    """The first of ``devices`` of ``device_type``; the first device (the host) if none is."""
    for dev in devices:
        if dev.device_type == device_type:
            return dev
    return devices[0]


def allocate_entries(
    graph: Graph,
    plan: StoragePlan,
    devices: Sequence[Device],
    input_map: Mapping[str, int],
    groups: Sequence[Sequence[int]],
    preset: Mapping[str, NDArray],
) -> list[NDArray]:
    """One array per graph entry: a view of its pool, or a preset input's own array.

    Parameters
    ----------
    graph, plan
        The graph and its storage plan.
    devices
        The executor's devices (the first is the fallback).
    input_map
        Input name -> index into ``graph.arg_nodes``.
    groups
        :func:`alias_groups` of the graph.
    preset
        Arrays for inputs of the same name (names the graph lacks are ignored, as TVM).

    Raises
    ------
    ArrayError
        If a preset array cannot stand in for its input, or host-kernel memory would land
        on a device the host cannot address.
    """
    g = graph

    def device_of(eid: int) -> Device:
        return device_for_type(devices, plan.pools[plan.entry_storage[eid]].device_type)

    bound: dict[int, NDArray] = {}
    copied: list[tuple[int, NDArray]] = []
    for name, arr in preset.items():
        index = input_map.get(name)
        if index is None:
            continue  # as TVM: params the graph does not use are ignored
        eid = g.entry_id(g.arg_nodes[index])
        problem = external_problem(arr, g.shapes[eid], g.dltypes[eid], device_of(eid), False)
        if problem is None:
            pass
        elif arr.device != device_of(eid) and arr.shape == g.shapes[eid]:
            copied.append((eid, arr))  # a param for another device: copied there below
            continue
        elif arr.dtype == g.dltypes[eid] and arr.nbytes == g.entry_nbytes(eid):
            copied.append((eid, arr))  # same bytes, other shape or layout: copy, as TVM
            continue
        else:
            raise ArrayError(
                f"param {name!r} embedded in the factory does not fit the graph's input "
                f"{name!r}: {problem}"
            )
        for member in groups[eid]:
            bound[member] = arr._create_view(g.shapes[member], g.dltypes[member])
    needed = {plan.entry_storage[eid] for eid in range(g.num_entries) if eid not in bound}
    pools: dict[int, NDArray] = {}
    for pool in plan.pools:
        if pool.storage_id in needed:
            dev = device_for_type(devices, pool.device_type)
            _check_fallback(pool.device_type, dev)
            pools[pool.storage_id] = empty((pool.alloc_bytes // 4,), "float32", dev)
    entries = []
    for eid in range(g.num_entries):
        if eid in bound:
            entries.append(bound[eid])
            continue
        pool_arr = pools[plan.entry_storage[eid]]
        try:
            entries.append(pool_arr._create_view(g.shapes[eid], g.dltypes[eid]))
        except ArrayError as exc:  # cannot happen for a consistent plan
            raise InternalError(f"entry {eid} does not fit its pool: {exc}") from exc
    for eid, arr in copied:
        arr.copyto(entries[eid])
    return entries


def _check_fallback(device_type: int, dev: Device) -> None:
    """Refuse to put host-kernel memory on a device whose memory the host cannot address."""
    on_host = device_type == DLDeviceType.kDLCPU
    if on_host and dev.device_type != device_type and not get_device_api(dev).host_visible:
        raise ArrayError(
            f"the graph places entries on the CPU (device_index 1), but no cpu device "
            f"was given and the fallback {dev} is device memory that CPU kernels cannot "
            f"read; pass the CPU too, e.g. [{dev}, cpu(0)]"
        )
