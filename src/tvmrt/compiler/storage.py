"""Storage ids by liveness, with the conventions of TVM's graph memory planner.

* graph inputs, params and outputs (heads) get a private storage id each;
* a ``__nop`` output shares its input's storage (the reshape is free);
* any other entry takes a storage id that no live entry uses, best fit by size, or a new
  one. An id is free once the last node reading any of its entries has run; a node's
  outputs are placed before its inputs are released, so a kernel never writes where it
  reads (TIR kernels are compiled ``noalias``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

__all__ = ["plan_storage"]


def plan_storage(
    nbytes: Sequence[int],
    producers: Sequence[tuple[Sequence[int], Sequence[int], bool, bool]],
    heads: Sequence[int],
) -> list[int]:
    """Assign a storage id to every entry.

    Parameters
    ----------
    nbytes
        Size of each entry, by entry id.
    producers
        Per node, in execution order: ``(output entry ids, input entry ids, is_null,
        is_nop)``.
    heads
        Entry ids of the graph outputs.

    Returns
    -------
    list[int]
        Storage id per entry; ids are numbered from 0 in first-use order.
    """
    last_use = [-1] * len(nbytes)
    for nid, (_, inputs, _, _) in enumerate(producers):
        for e in inputs:
            last_use[e] = max(last_use[e], nid)
    head_set = set(heads)
    sids = [-1] * len(nbytes)
    sizes: list[int] = []
    pinned: set[int] = set()
    users: dict[int, int] = defaultdict(int)  # live entries per storage id
    release_at: dict[int, list[int]] = defaultdict(list)
    free: list[int] = []

    def new(size: int, pin: bool) -> int:
        sizes.append(size)
        if pin:
            pinned.add(len(sizes) - 1)
        return len(sizes) - 1

    for nid, (outputs, inputs, is_null, is_nop) in enumerate(producers):
        for k, e in enumerate(outputs):
            if is_null or e in head_set:
                sid = new(nbytes[e], pin=True)
            elif is_nop and k < len(inputs):
                sid = sids[inputs[k]]
            else:
                taken = _take(free, sizes, nbytes[e])
                sid = new(nbytes[e], pin=False) if taken is None else taken
                sizes[sid] = max(sizes[sid], nbytes[e])
            sids[e] = sid
            users[sid] += 1
            release_at[max(last_use[e], nid)].append(sid)
        for sid in release_at.pop(nid, []):
            users[sid] -= 1
            if users[sid] == 0 and sid not in pinned:
                free.append(sid)
    return sids


def _take(free: list[int], sizes: list[int], nbytes: int) -> int | None:
    """The free id that fits ``nbytes`` most tightly, else the largest one (grows least)."""
    if not free:
        return None
    fitting = [s for s in free if sizes[s] >= nbytes]
    sid = min(fitting, key=lambda s: sizes[s]) if fitting else max(free, key=lambda s: sizes[s])
    free.remove(sid)
    return sid
