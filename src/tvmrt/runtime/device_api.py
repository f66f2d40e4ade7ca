"""Device backends: memory, copies and synchronisation for one kind of device.

A backend is a :class:`DeviceAPI` registered for a DLPack device type. tvmrt ships the
CPU backend; :mod:`tvmrt.testing` adds an emulated accelerator (host memory behind
another device type) for heterogeneous-graph tests. Every backend here hands out
host-addressable memory as a numpy ``uint8`` buffer, so arrays on any of them have a
numpy view; a backend for real device memory would override the copy hooks.
"""

from __future__ import annotations

import abc
import threading
from typing import Any, ClassVar

import numpy as np

from tvmrt.error import DeviceOutOfMemoryError, DeviceUnavailableError
from tvmrt.runtime.device import MASK2STR, Device, DLDeviceType

__all__ = [
    "ALLOC_ALIGNMENT",
    "DeviceAPI",
    "CPUDeviceAPI",
    "register_device_api",
    "unregister_device_api",
    "find_device_api",
    "get_device_api",
    "aligned_empty",
]

# TVM's kAllocAlignment: compiled kernels assume every tensor's data is 64-byte aligned.
ALLOC_ALIGNMENT = 64


def aligned_empty(nbytes: int, alignment: int = ALLOC_ALIGNMENT) -> np.ndarray[Any, Any]:
    """Uninitialised ``uint8`` buffer of ``nbytes`` whose first byte is ``alignment``-aligned."""
    if nbytes < 0:
        raise ValueError(f"cannot allocate {nbytes} bytes")
    try:
        raw = np.empty(nbytes + alignment, dtype=np.uint8)
    except MemoryError as exc:
        raise DeviceOutOfMemoryError(f"allocating {nbytes} bytes of host memory failed") from exc
    start = -raw.ctypes.data % alignment
    # np.ndarray keeps the offset even for zero bytes, where slicing would not
    aligned: np.ndarray[Any, Any] = np.ndarray((nbytes,), np.uint8, buffer=raw, offset=start)
    return aligned


class DeviceAPI(abc.ABC):
    """Memory, copies and synchronisation for one device type."""

    name: ClassVar[str]

    def alloc(self, dev: Device, nbytes: int, alignment: int = ALLOC_ALIGNMENT) -> Any:
        """Allocate ``nbytes`` on ``dev``, aligned; returns a host-addressable uint8 buffer."""
        if not self.attribute(dev, "exist"):
            raise DeviceUnavailableError(f"device {dev} does not exist on this machine")
        return self._alloc(dev, nbytes, alignment)

    @abc.abstractmethod
    def _alloc(self, dev: Device, nbytes: int, alignment: int) -> Any: ...

    def sync(self, dev: Device) -> None:  # noqa: B027 - host backends have nothing to wait for
        """Block until queued work on ``dev`` is done."""

    def attribute(self, dev: Device, name: str) -> Any:
        """A device property by TVM's name (``exist``, ``warp_size``...), or ``None``."""
        return None


class CPUDeviceAPI(DeviceAPI):
    """Host memory from numpy, 64-byte aligned."""

    name = "cpu"

    def _alloc(self, dev: Device, nbytes: int, alignment: int) -> Any:
        return aligned_empty(nbytes, alignment)

    def attribute(self, dev: Device, name: str) -> Any:
        if name == "exist":
            return dev.device_id == 0
        if name == "device_name":
            return "cpu"
        return None


_registry: dict[int, DeviceAPI] = {int(DLDeviceType.kDLCPU): CPUDeviceAPI()}
_lock = threading.Lock()


def register_device_api(device_type: int, api: DeviceAPI, override: bool = False) -> None:
    """Serve ``device_type`` with ``api``; ``override`` replaces an existing backend."""
    with _lock:
        if device_type in _registry and not override:
            raise ValueError(
                f"device type {device_type} ({MASK2STR.get(device_type, '?')}) already has "
                f"backend {_registry[device_type].name!r}; pass override=True to replace it"
            )
        _registry[device_type] = api


def unregister_device_api(device_type: int) -> None:
    """Remove the backend of ``device_type`` (no-op when there is none)."""
    with _lock:
        _registry.pop(device_type, None)


def find_device_api(device_type: int) -> DeviceAPI | None:
    """The backend serving ``device_type``, or ``None``."""
    return _registry.get(device_type)


def get_device_api(dev: Device) -> DeviceAPI:
    """The backend serving ``dev``; raises DeviceUnavailableError when there is none."""
    api = _registry.get(dev.device_type)
    if api is None:
        have = ", ".join(MASK2STR.get(t, str(t)) for t in sorted(_registry))
        raise DeviceUnavailableError(
            f"no backend for device {dev}: tvmrt runs compiled kernels on {have}"
        )
    return api
