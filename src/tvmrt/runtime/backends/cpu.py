"""The host CPU: numpy memory, 64-byte aligned; copies are memcpy, arrays are numpy views."""

from __future__ import annotations

from typing import Any

from tvmrt.runtime.device import Device
from tvmrt.runtime.device_api import HostDeviceAPI

__all__ = ["CPUDeviceAPI", "backend"]


class CPUDeviceAPI(HostDeviceAPI):
    """Host memory from numpy, 64-byte aligned; one device, ``cpu(0)``."""

    name = "cpu"

    def attribute(self, dev: Device, name: str) -> Any:
        if name == "exist":
            return dev.device_id == 0
        if name == "device_name":
            return "cpu"
        return None


def backend() -> CPUDeviceAPI:
    """The CPU backend (the lazy table of runtime/device.py calls this)."""
    return CPUDeviceAPI()
