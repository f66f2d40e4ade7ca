"""An emulated accelerator: host memory behind another device type, for heterogeneous tests."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from tvmrt.runtime.device import Device
from tvmrt.runtime.device_api import (
    DeviceAPI,
    aligned_empty,
    find_device_api,
    register_device_api,
    unregister_device_api,
)

__all__ = ["EmulatedDeviceAPI", "emulated_device"]


class EmulatedDeviceAPI(DeviceAPI):
    """Serves a device type from host memory; counts allocations and syncs."""

    name = "emulated"

    def __init__(self, num_devices: int = 1) -> None:
        self.num_devices = num_devices
        self.allocations = 0
        self.syncs = 0

    def _alloc(self, dev: Device, nbytes: int, alignment: int) -> Any:
        self.allocations += 1
        return aligned_empty(nbytes, alignment)

    def sync(self, dev: Device) -> None:
        self.syncs += 1

    def attribute(self, dev: Device, name: str) -> Any:
        if name == "exist":
            return 0 <= dev.device_id < self.num_devices
        if name == "device_name":
            return f"emulated device {dev}"
        return None


@contextlib.contextmanager
def emulated_device(device_type: int, num_devices: int = 1) -> Iterator[EmulatedDeviceAPI]:
    """Serve ``device_type`` from host memory inside the ``with`` block.

    Examples
    --------
    >>> from tvmrt import runtime
    >>> with emulated_device(runtime.cuda().device_type):
    ...     runtime.empty((2,), "float32", runtime.cuda()).device
    cuda(0)
    """
    previous = find_device_api(device_type)
    api = EmulatedDeviceAPI(num_devices)
    register_device_api(device_type, api, override=True)
    try:
        yield api
    finally:
        if previous is None:
            unregister_device_api(device_type)
        else:
            register_device_api(device_type, previous, override=True)
