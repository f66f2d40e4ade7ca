"""Device backends: memory, copies, streams and synchronisation for one kind of device.

A backend is a :class:`DeviceAPI` registered for a DLPack device type in the one device
table of :mod:`tvmrt.runtime.device` (:func:`register_device_api`, :func:`find_device_api`,
:func:`get_device_api`, re-exported here), one file per backend under
:mod:`tvmrt.runtime.backends` (``cpu``, ``opencl``, ``cuda``, ``null``). ``alloc``
returns opaque :class:`Storage` (a handle, a size, a device); arrays move through the
copy hooks ``copy_from_host`` / ``copy_to_host`` / ``copy_device_to_device``. Only
*host-visible* backends (the CPU, and :mod:`tvmrt.testing`'s emulated device) expose
their memory as a numpy buffer, so only their arrays have zero-copy numpy views.
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Any, ClassVar

import numpy as np

from tvmrt.error import (
    ArgumentTypeError,
    ArrayError,
    DeviceOutOfMemoryError,
    DeviceUnavailableError,
    InvalidArgumentError,
    UnsupportedError,
)
from tvmrt.runtime.device import (
    Device,
    find_device_api,
    get_device_api,
    register_device_api,
    unregister_device_api,
)

__all__ = [
    "ALLOC_ALIGNMENT",
    "Storage",
    "DeviceStorage",
    "DeviceAPI",
    "HostDeviceAPI",
    "register_device_api",
    "unregister_device_api",
    "find_device_api",
    "get_device_api",
    "aligned_empty",
    "find_storage",
]

# TVM's kAllocAlignment: compiled kernels assume every tensor's data is 64-byte aligned.
ALLOC_ALIGNMENT = 64


def aligned_empty(nbytes: int, alignment: int = ALLOC_ALIGNMENT) -> np.ndarray[Any, Any]:
    """Uninitialised ``uint8`` buffer of ``nbytes`` whose first byte is ``alignment``-aligned."""
    return _aligned(nbytes, alignment)[0]


def _aligned(nbytes: int, alignment: int) -> tuple[np.ndarray[Any, Any], int]:
    """:func:`aligned_empty` and the buffer's address."""
    if nbytes < 0:
        raise InvalidArgumentError(f"cannot allocate {nbytes} bytes")
    try:
        raw = np.empty(nbytes + alignment, dtype=np.uint8)
    except MemoryError as exc:
        raise DeviceOutOfMemoryError(f"allocating {nbytes} bytes of host memory failed") from exc
    address = raw.__array_interface__["data"][0]  # (raw.ctypes.data builds a ctypes object)
    start = -address % alignment
    if nbytes:  # a slice (np.ndarray(buffer=...) costs microseconds more)
        return raw[start : start + nbytes], address + start
    # np.ndarray keeps the offset even for zero bytes, where slicing would not
    aligned: np.ndarray[Any, Any] = np.ndarray((nbytes,), np.uint8, buffer=raw, offset=start)
    return aligned, address + start


class Storage:
    """One allocation on a device: an opaque ``handle``, its size and its backend.

    ``handle`` is what compiled host code sees as ``DLTensor.data`` (an address for host
    memory; a backend-chosen token for device memory). ``host`` is the memory as a numpy
    ``uint8`` buffer for host-visible backends, else ``None``. ``obj`` is the backend's own
    object (an OpenCL buffer, ...), kept alive with the storage.
    """

    __slots__ = ("__weakref__", "api", "device", "handle", "host", "nbytes", "obj")

    def __init__(
        self,
        api: DeviceAPI,
        device: Device,
        handle: int,
        nbytes: int,
        host: np.ndarray[Any, Any] | None = None,
        obj: object = None,
    ) -> None:
        self.api = api
        self.device = device
        self.handle = handle
        self.nbytes = nbytes
        self.host = host
        self.obj = obj

    def __repr__(self) -> str:
        return f"<Storage {self.nbytes} bytes on {self.device} ({self.api.name})>"


class DeviceStorage(Storage):
    """Storage a backend must release: :meth:`DeviceAPI.free` runs when it is collected."""

    __slots__ = ()

    def __del__(self) -> None:
        # at interpreter shutdown the backend may be half torn down: nothing to report to
        with contextlib.suppress(Exception):
            self.api.free(self)


def _check_range(what: str, storage: Storage, offset: int, nbytes: int) -> None:
    if offset < 0 or nbytes < 0 or offset + nbytes > storage.nbytes:
        raise ArrayError(
            f"{what}: {nbytes} bytes at offset {offset} do not fit a "
            f"{storage.nbytes}-byte allocation on {storage.device}"
        )


class DeviceAPI:
    """Memory, copies, streams and synchronisation for one device type.

    A backend implements :meth:`_alloc` and the three copy hooks; host-visible backends
    (``host_visible = True``) return storage with a ``host`` buffer and get the hooks free
    from :class:`HostDeviceAPI`. Streams are integers the backend hands out; ``0`` is the
    default stream of a device.
    """

    name: ClassVar[str] = "device"
    host_visible: ClassVar[bool] = False

    def alloc(self, dev: Device, nbytes: int, alignment: int = ALLOC_ALIGNMENT) -> Storage:
        """Allocate ``nbytes`` on ``dev`` (``alignment``-aligned where addresses exist)."""
        if nbytes < 0:
            raise InvalidArgumentError(f"cannot allocate {nbytes} bytes")
        if not self.attribute(dev, "exist"):
            raise DeviceUnavailableError(f"device {dev} does not exist on this machine")
        out = self._alloc(dev, nbytes, alignment)
        if isinstance(out, np.ndarray):  # a host buffer (backends written before Storage)
            return Storage(self, dev, int(out.ctypes.data), nbytes, out)
        if not isinstance(out, Storage):
            raise ArgumentTypeError(
                f"backend {self.name!r} returned {type(out).__name__} from _alloc"
            )
        if out.host is None:  # device memory: findable by handle (DLPack import, launches)
            _device_storage[(dev.device_type, out.handle)] = out
        return out

    def _alloc(self, dev: Device, nbytes: int, alignment: int) -> Any:
        raise UnsupportedError(f"backend {self.name!r} cannot allocate memory")

    def free(self, storage: Storage) -> None:
        """Release ``storage`` (called once, when the last array using it goes away)."""

    def alloc_workspace(self, dev: Device, nbytes: int) -> Storage:
        """Scratch memory for kernels (``TVMBackendAllocWorkspace``); a pool may reuse it."""
        return self.alloc(dev, nbytes)

    def free_workspace(self, storage: Storage) -> None:
        """Give back :meth:`alloc_workspace` memory (default: freed when collected)."""

    # -- copy hooks --------------------------------------------------------------------
    def copy_from_host(self, dst: Storage, offset: int, src: np.ndarray[Any, Any]) -> None:
        """Copy the bytes of contiguous host array ``src`` into ``dst`` at byte ``offset``."""
        raise UnsupportedError(f"backend {self.name!r} has no host-to-device copy")

    def copy_to_host(self, src: Storage, offset: int, dst: np.ndarray[Any, Any]) -> None:
        """Fill contiguous host array ``dst`` with bytes of ``src`` from byte ``offset``."""
        raise UnsupportedError(f"backend {self.name!r} has no device-to-host copy")

    def copy_device_to_device(
        self, src: Storage, src_offset: int, dst: Storage, dst_offset: int, nbytes: int
    ) -> None:
        """Copy ``nbytes`` between two allocations of this backend (default: through the host)."""
        staging = np.empty(nbytes, np.uint8)
        self.copy_to_host(src, src_offset, staging)
        self.copy_from_host(dst, dst_offset, staging)

    # -- streams and synchronisation -------------------------------------------------------
    def sync(self, dev: Device, stream: int = 0) -> None:
        """Block until work queued on ``stream`` of ``dev`` (0: the current one) is done."""

    def create_stream(self, dev: Device) -> int:
        """A new stream on ``dev`` (host backends have one stream, 0)."""
        return 0

    def free_stream(self, dev: Device, stream: int) -> None:
        """Release a stream made by :meth:`create_stream`."""

    def set_stream(self, dev: Device, stream: int) -> None:
        """Make ``stream`` the one this backend queues work on for ``dev``."""

    def attribute(self, dev: Device, name: str) -> Any:
        """A device property by TVM's name (``exist``, ``warp_size``...), or ``None``."""
        return None


class HostDeviceAPI(DeviceAPI):
    """A backend whose memory is host memory: numpy-addressable, copies are memcpy."""

    host_visible = True

    def _alloc(self, dev: Device, nbytes: int, alignment: int) -> Any:
        buf, address = _aligned(nbytes, alignment)
        return Storage(self, dev, address, nbytes, buf)

    def copy_from_host(self, dst: Storage, offset: int, src: np.ndarray[Any, Any]) -> None:
        assert dst.host is not None
        _check_range("copy to host storage", dst, offset, src.nbytes)
        dst.host[offset : offset + src.nbytes] = src.reshape(-1).view(np.uint8)

    def copy_to_host(self, src: Storage, offset: int, dst: np.ndarray[Any, Any]) -> None:
        assert src.host is not None
        _check_range("copy from host storage", src, offset, dst.nbytes)
        dst.reshape(-1).view(np.uint8)[...] = src.host[offset : offset + dst.nbytes]


def find_storage(device_type: int, handle: int) -> Storage | None:
    """The live device storage whose handle is ``handle``, or ``None``."""
    return _device_storage.get((device_type, handle))


_device_storage: weakref.WeakValueDictionary[tuple[int, int], Storage] = (
    weakref.WeakValueDictionary()
)
