"""The null backend: opaque device memory kept in Python, for testing the device layer.

It behaves like a real accelerator from the outside: its storage has no host address
(``DLTensor.data`` is a token), arrays on it have no numpy view, every transfer goes
through the copy hooks, and streams are counted. Tests of the device layer run on it
without any driver installed; the same tests run on OpenCL where a driver is installed.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from tvmrt.error import ArrayError, InvalidArgumentError
from tvmrt.runtime.device import Device
from tvmrt.runtime.device_api import DeviceAPI, DeviceStorage, Storage

__all__ = ["NullDeviceAPI"]

# tokens look like aligned device addresses, far from any host pointer
_TOKEN_BASE = 0x7E00_0000_0000
_TOKEN_STEP = 1 << 20


class NullDeviceAPI(DeviceAPI):
    """Device memory as ``bytearray`` objects behind opaque handles; counts its traffic."""

    name = "null"

    def __init__(self, num_devices: int = 1) -> None:
        self.num_devices = num_devices
        self._tokens = itertools.count(1)
        self.live: dict[int, bytearray] = {}
        self.to_device = 0
        self.to_host = 0
        self.device_copies = 0
        self.syncs = 0
        self.streams: dict[int, Device] = {}
        self.current_stream: dict[Device, int] = {}

    def _alloc(self, dev: Device, nbytes: int, alignment: int) -> Any:
        handle = _TOKEN_BASE + next(self._tokens) * _TOKEN_STEP
        memory = bytearray(nbytes)
        self.live[handle] = memory
        return DeviceStorage(self, dev, handle, nbytes, None, memory)

    def free(self, storage: Storage) -> None:
        self.live.pop(storage.handle, None)

    def _memory(self, storage: Storage, offset: int, nbytes: int) -> memoryview:
        memory = storage.obj
        if not isinstance(memory, bytearray) or storage.handle not in self.live:
            raise ArrayError(f"{storage!r} is not live memory of this null backend")
        if offset < 0 or offset + nbytes > len(memory):
            raise ArrayError(
                f"{nbytes} bytes at offset {offset} do not fit a {len(memory)}-byte allocation"
            )
        return memoryview(memory)[offset : offset + nbytes]

    def copy_from_host(self, dst: Storage, offset: int, src: np.ndarray[Any, Any]) -> None:
        self.to_device += 1
        self._memory(dst, offset, src.nbytes)[:] = src.reshape(-1).view(np.uint8).data

    def copy_to_host(self, src: Storage, offset: int, dst: np.ndarray[Any, Any]) -> None:
        self.to_host += 1
        view = self._memory(src, offset, dst.nbytes)
        dst.reshape(-1).view(np.uint8)[...] = np.frombuffer(view, np.uint8)

    def copy_device_to_device(
        self, src: Storage, src_offset: int, dst: Storage, dst_offset: int, nbytes: int
    ) -> None:
        self.device_copies += 1
        self._memory(dst, dst_offset, nbytes)[:] = self._memory(src, src_offset, nbytes)

    def sync(self, dev: Device, stream: int = 0) -> None:
        self.syncs += 1

    def create_stream(self, dev: Device) -> int:
        stream = len(self.streams) + 1
        self.streams[stream] = dev
        return stream

    def free_stream(self, dev: Device, stream: int) -> None:
        if self.streams.pop(stream, None) is None:
            raise InvalidArgumentError(f"stream {stream} was not created on {dev} by this backend")

    def set_stream(self, dev: Device, stream: int) -> None:
        if stream and stream not in self.streams:
            raise InvalidArgumentError(f"stream {stream} was not created on {dev} by this backend")
        self.current_stream[dev] = stream

    def attribute(self, dev: Device, name: str) -> Any:
        if name == "exist":
            return 0 <= dev.device_id < self.num_devices
        if name == "device_name":
            return "null device"
        return None
