"""The VM's pooled allocator: freed host buffers are reused, as TVM's ``PooledAllocator``.

Sizes are rounded up to 4096-byte pages (``src/runtime/memory/pooled_allocator.h``). Each
allocation hands out a fresh :class:`Storage` over a pooled buffer; when the last array
using that storage is gone, the buffer goes back to the pool's free list for its size.
Reused buffers are already paged in, which is most of the gain on small models. Device
(non-host) memory is not pooled. The pool holds at most what was live at once.
"""

from __future__ import annotations

from typing import Any

from tvmrt.runtime.device import Device
from tvmrt.runtime.device_api import DeviceAPI, Storage

__all__ = ["StoragePool", "PAGE_SIZE"]

PAGE_SIZE = 4096


class StoragePool:
    """Free lists of host buffers of one device, by (rounded size, alignment)."""

    def __init__(self, api: DeviceAPI, device: Device) -> None:
        self.api = api
        self.device = device
        self.free: dict[tuple[int, int], list[Storage]] = {}

    def alloc(self, nbytes: int, alignment: int) -> Storage:
        """A storage of ``nbytes`` bytes, from the pool when a buffer of its size is free."""
        size = -(-nbytes // PAGE_SIZE) * PAGE_SIZE
        key = (size, alignment)
        free = self.free.setdefault(key, [])
        base = free.pop() if free else self.api.alloc(self.device, size, alignment)
        if base.host is None:  # device memory: not pooled
            return base
        view = _PooledStorage(
            base.api, base.device, base.handle, nbytes, base.host[:nbytes], base.obj
        )
        view.give_back = (free, base)
        return view


class _PooledStorage(Storage):
    """A storage over a pooled buffer: the buffer goes back to its free list when the
    storage is garbage (``__del__``: cheaper per allocation than ``weakref.finalize``)."""

    __slots__ = ("give_back",)

    give_back: tuple[list[Storage], Storage] | None

    def __del__(self) -> None:
        back: Any = getattr(self, "give_back", None)
        if back is not None:
            back[0].append(back[1])
