"""The remote memory a session has handed out, and local arrays over it.

A client names remote memory only by the ``data`` pointer of a DLTensor it was given
(by ``kDevAllocData*`` or an NDArray return). Every such region is recorded here; a
DLTensor from the client becomes a local :class:`~tvmrt.runtime.ndarray.NDArray` only if
it lies wholly inside one recorded region on the same device. A pointer that was never
handed out, or a shape that runs past its region, is refused: a client cannot make the
server touch memory it does not own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tvmrt.error import RPCProtocolError
from tvmrt.rpc.codec import WireDevice, WireDType, WireTensor
from tvmrt.runtime.device import Device
from tvmrt.runtime.device_api import Storage
from tvmrt.runtime.dtype import DataType
from tvmrt.runtime.ndarray import NDArray

__all__ = ["Region", "RemoteMemory"]


@dataclass
class Region:
    """One block of memory a client may address: ``[base, base + nbytes)`` on ``device``."""

    base: int
    nbytes: int
    device: Device
    storage: Storage | None  # tvmrt's allocation, or None for host memory numpy owns
    host: np.ndarray | None  # the bytes as uint8 when host-visible
    refs: int = 1


class RemoteMemory:
    """Regions by base address, with reference counts (one per handle given out)."""

    def __init__(self) -> None:
        self.regions: dict[int, Region] = {}

    def add_storage(self, storage: Storage) -> int:
        """Record an allocation; returns the pointer the client will use."""
        return self._add(
            Region(storage.handle, storage.nbytes, storage.device, storage, storage.host)
        )

    def add_array(self, arr: NDArray) -> WireTensor:
        """Record the memory under ``arr``; returns the DLTensor that names it."""
        storage = arr.storage
        if storage is not None:
            base = self.add_storage(storage)
            offset = arr.data_ptr - storage.handle
        else:
            flat = arr.numpy_view().reshape(-1).view(np.uint8)
            base = self._add(Region(arr.data_ptr, arr.nbytes, arr.device, None, flat))
            offset = 0
        dt = arr.dtype
        return WireTensor(
            base,
            WireDevice(arr.device.device_type, arr.device.device_id),
            WireDType(dt.type_code, dt.bits, dt.lanes),
            tuple(arr.shape),
            offset,
        )

    def _add(self, region: Region) -> int:
        old = self.regions.get(region.base)
        if old is not None and old.nbytes == region.nbytes:
            old.refs += 1
        else:
            self.regions[region.base] = region
        return region.base

    def release(self, base: int) -> None:
        """Drop one reference to the region at ``base`` (a freed handle or allocation)."""
        region = self.regions.get(base)
        if region is None:
            raise RPCProtocolError(f"remote pointer {base:#x} was never allocated by this server")
        region.refs -= 1
        if region.refs <= 0:
            del self.regions[base]

    def find(self, data: int) -> Region:
        region = self.regions.get(data)
        if region is not None:
            return region
        for r in self.regions.values():
            if r.base <= data < r.base + max(r.nbytes, 1):
                return r
        raise RPCProtocolError(f"remote pointer {data:#x} was never handed out by this server")

    def array(self, t: WireTensor) -> NDArray:
        """A local array over the memory ``t`` names, after checking it is the client's."""
        region = self.find(t.data)
        dev = Device(t.device.device_type, t.device.device_id)
        if dev != region.device:
            raise RPCProtocolError(
                f"DLTensor on {dev} points into memory allocated on {region.device}"
            )
        dtype = DataType.from_code(t.dtype.code, t.dtype.bits, t.dtype.lanes)
        offset = t.data - region.base + t.byte_offset
        nbytes = math.prod(t.shape) * dtype.itemsize
        if offset < 0 or offset + nbytes > region.nbytes:
            raise RPCProtocolError(
                f"DLTensor of shape {t.shape} and dtype {dtype} at byte offset {offset} needs "
                f"{nbytes} bytes, but its allocation at {region.base:#x} has {region.nbytes}"
            )
        if region.storage is not None:
            return NDArray.from_storage(region.storage, offset, t.shape, dtype)
        assert region.host is not None
        raw = region.host[offset : offset + nbytes]
        view = raw.view(dtype.numpy_dtype).reshape(
            t.shape if dtype.lanes == 1 else (*t.shape, dtype.lanes)
        )
        return NDArray.from_host_memory(view, dtype, dev, region.host)
