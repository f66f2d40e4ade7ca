"""Test devices: an emulated accelerator over host memory, and the null backend.

:func:`emulated_device` serves a device type from host memory (a thin host-visible
backend), so numpy kernels can run on "another device" in heterogeneous-graph tests.
:func:`null_device` serves a device type from the null backend
(:mod:`tvmrt.runtime.backends.null`): opaque device memory with no numpy view, for
testing code paths of real accelerators without a driver.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from tvmrt.runtime.backends.null import NullDeviceAPI
from tvmrt.runtime.device import Device
from tvmrt.runtime.device_api import (
    DeviceAPI,
    HostDeviceAPI,
    Storage,
    find_device_api,
    register_device_api,
    unregister_device_api,
)

__all__ = ["EmulatedDeviceAPI", "emulated_device", "null_device", "NullDeviceAPI"]


class EmulatedDeviceAPI(HostDeviceAPI):
    """Serves a device type from host memory; counts allocations and syncs."""

    name = "emulated"

    def __init__(self, num_devices: int = 1) -> None:
        self.num_devices = num_devices
        self.allocations = 0
        self.syncs = 0

    def _alloc(self, dev: Device, nbytes: int, alignment: int) -> Storage:
        self.allocations += 1
        storage: Storage = super()._alloc(dev, nbytes, alignment)
        return storage

    def sync(self, dev: Device, stream: int = 0) -> None:
        self.syncs += 1

    def attribute(self, dev: Device, name: str) -> Any:
        if name == "exist":
            return 0 <= dev.device_id < self.num_devices
        if name == "device_name":
            return f"emulated device {dev}"
        return None


@contextlib.contextmanager
def _serving(device_type: int, api: DeviceAPI) -> Iterator[None]:
    previous = find_device_api(device_type)
    register_device_api(device_type, api, override=True)
    try:
        yield
    finally:
        if previous is None:
            unregister_device_api(device_type)
        else:
            register_device_api(device_type, previous, override=True)


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
    api = EmulatedDeviceAPI(num_devices)
    with _serving(device_type, api):
        yield api


@contextlib.contextmanager
def null_device(device_type: int, num_devices: int = 1) -> Iterator[NullDeviceAPI]:
    """Serve ``device_type`` from the null backend (opaque memory) inside the ``with`` block.

    Examples
    --------
    >>> import numpy as np
    >>> from tvmrt import runtime
    >>> with null_device(runtime.ext_dev().device_type):
    ...     a = runtime.array(np.arange(3.0), runtime.ext_dev())
    ...     a.numpy()
    array([0., 1., 2.])
    """
    api = NullDeviceAPI(num_devices)
    with _serving(device_type, api):
        yield api
