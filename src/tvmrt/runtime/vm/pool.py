"""The VM's pooled allocator: freed host buffers are reused, as TVM's ``PooledAllocator``.

Sizes are rounded up to 4096-byte pages (``src/runtime/memory/pooled_allocator.h``). Each
allocation hands out a fresh :class:`Storage` over a pooled buffer; when the last array
using that storage is gone, the buffer goes back to the pool's free list for its size.
Reused buffers are already paged in, which is most of the gain on small models. Device
(non-host) memory is not pooled. The pool holds at most what was live at once.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any, TypeVar

from tvmrt.error import DeviceOutOfMemoryError
from tvmrt.runtime.device import Device
from tvmrt.runtime.device_api import DeviceAPI, Storage

__all__ = ["StoragePool", "LiveBudget", "PAGE_SIZE", "TENSOR_BYTES", "cell_bytes"]

PAGE_SIZE = 4096
_V = TypeVar("_V")


class StoragePool:
    """Free lists of host buffers of one device, by (rounded size, alignment)."""

    def __init__(self, api: DeviceAPI, device: Device) -> None:
        self.api = api
        self.device = device
        self.free: dict[tuple[int, int], list[Storage]] = {}
        self.free_bytes = 0  # what the free lists hold

    def trim(self) -> None:
        """Let go of every free buffer (a budget needs the room)."""
        for buffers in self.free.values():
            buffers.clear()
        self.free_bytes = 0

    def alloc(self, nbytes: int, alignment: int) -> Storage:
        """A storage of ``nbytes`` bytes, from the pool when a buffer of its size is free."""
        size = -(-nbytes // PAGE_SIZE) * PAGE_SIZE
        key = (size, alignment)
        free = self.free.setdefault(key, [])
        if free:
            base = free.pop()
            self.free_bytes -= base.nbytes
        else:
            base = self.api.alloc(self.device, size, alignment)
        if base.host is None:  # device memory: not pooled
            return base
        view = _PooledStorage(
            base.api, base.device, base.handle, nbytes, base.host[:nbytes], base.obj
        )
        view.give_back = (free, base, self)
        return view


# what a VM value holds beyond its data, charged as the C VM charges it (vm.h's
# VM_CELL_BYTES) with Python's sizes, measured with tracemalloc (an ADT, its field list and
# its finalizer about 400 bytes; a tensor about 1 KiB): a cell (ADT or closure) a header and
# a pointer per field, a tensor its header (a view's data is its storage's, charged once),
# a register file a pointer per register
CELL_BYTES = 384
TENSOR_BYTES = 1024


def cell_bytes(fields: int) -> int:
    """The charge of an ADT or closure of ``fields`` fields, or a register file."""
    return CELL_BYTES + 8 * fields


class LiveBudget:
    """Bytes a VM's values hold at once: live storages and its pools' free buffers, and the
    ADTs, closures, register files and tensors it made.

    :meth:`charge` refuses an allocation that would take the live bytes over ``limit``
    (``DeviceOutOfMemoryError``) and trims the pools when live + free would pass it, so
    the VM never holds much more than ``limit``, however a request loops.
    """

    def __init__(self, limit: int, pools: Sequence[StoragePool | None]) -> None:
        self.limit = limit
        self.pools = [p for p in pools if p is not None]
        self.live = [0]

    def charge(self, nbytes: int, what: str = "AllocStorage") -> None:
        live = self.live[0]
        if live + nbytes > self.limit:
            raise DeviceOutOfMemoryError(
                f"{what} of {nbytes} bytes: the VM would hold {live + nbytes} bytes at "
                f"once, over its budget of {self.limit} bytes (VMLimits.max_live_bytes; "
                "tvmrt serve: --max-inflight-mb over the workers)"
            )
        if live + sum(p.free_bytes for p in self.pools) + nbytes > self.limit:
            for pool in self.pools:
                pool.trim()

    def track(self, storage: Storage, nbytes: int) -> Storage:
        self.live[0] += nbytes
        weakref.finalize(storage, _release, self.live, nbytes)
        return storage

    def hold(self, value: _V, nbytes: int, what: str) -> _V:
        """``value``, charged ``nbytes`` until it is garbage (or refused past the budget)."""
        self.charge(nbytes, what)
        self.live[0] += nbytes
        weakref.finalize(value, _release, self.live, nbytes)
        return value

    def take(self, nbytes: int, what: str) -> None:
        """Charge ``nbytes`` that :meth:`give` returns (a call's register file)."""
        self.charge(nbytes, what)
        self.live[0] += nbytes

    def give(self, nbytes: int) -> None:
        self.live[0] -= nbytes


def _release(live: list[int], nbytes: int) -> None:
    live[0] -= nbytes


class _PooledStorage(Storage):
    """A storage over a pooled buffer: the buffer goes back to its free list when the
    storage is garbage (``__del__``: cheaper per allocation than ``weakref.finalize``)."""

    __slots__ = ("give_back",)

    give_back: tuple[list[Storage], Storage, StoragePool] | None

    def __del__(self) -> None:
        back: Any = getattr(self, "give_back", None)
        if back is not None:
            back[0].append(back[1])
            back[2].free_bytes += back[1].nbytes
