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
from typing import Any

from tvmrt.error import DeviceOutOfMemoryError
from tvmrt.runtime.device import Device
from tvmrt.runtime.device_api import DeviceAPI, Storage

__all__ = ["StoragePool", "LiveBudget", "PAGE_SIZE"]

PAGE_SIZE = 4096


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


class LiveBudget:
    """Bytes a VM's allocations hold at once: live storages plus its pools' free buffers.

    :meth:`charge` refuses an allocation that would take the live bytes over ``limit``
    (``DeviceOutOfMemoryError``) and trims the pools when live + free would pass it, so
    the VM never holds much more than ``limit``, however a request loops.
    """

    def __init__(self, limit: int, pools: Sequence[StoragePool | None]) -> None:
        self.limit = limit
        self.pools = [p for p in pools if p is not None]
        self.live = [0]

    def charge(self, nbytes: int) -> None:
        live = self.live[0]
        if live + nbytes > self.limit:
            raise DeviceOutOfMemoryError(
                f"AllocStorage of {nbytes} bytes: the VM would hold {live + nbytes} bytes at "
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
