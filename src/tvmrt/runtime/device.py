"""Devices: ``Device`` (DLPack's ``DLDevice``), TVM's ``cpu()``, ``cuda()``, ..., and the
one table of the :class:`~tvmrt.runtime.device_api.DeviceAPI` serving each device type.

A device's properties (``exist``, ``warp_size``...), streams, memory and copies are served
by the ``DeviceAPI`` registered for its type (:func:`register_device_api`; a remote
session registers one per remote device type). The backends tvmrt ships, one file each
under :mod:`tvmrt.runtime.backends`, are imported on first use, so that importing tvmrt
never imports a driver.
"""

from __future__ import annotations

import ctypes
import importlib
import threading
from typing import TYPE_CHECKING, Any

from tvmrt.error import (
    ArgumentTypeError,
    DeviceUnavailableError,
    InvalidArgumentError,
    ReadOnlyError,
)
from tvmrt.runtime._deprecate import warn_deprecated
from tvmrt.runtime.device_type import (
    MASK2STR,
    RPC_SESS_MASK,
    STR2MASK,
    DeviceTypeNames,
    DLDeviceType,
)

if TYPE_CHECKING:  # device_api imports this module: the table names the class, nothing more
    from tvmrt.runtime.device_api import DeviceAPI

__all__ = [
    "DEVICE_ATTR_KINDS",
    "DLDeviceType",
    "MASK2STR",
    "STR2MASK",
    "RPC_SESS_MASK",
    "register_device_api",
    "unregister_device_api",
    "find_device_api",
    "get_device_api",
    "Device",
    "DeviceLike",
    "device",
    "cpu",
    "cuda",
    "gpu",
    "opencl",
    "cl",
    "vulkan",
    "metal",
    "mtl",
    "vpi",
    "rocm",
    "ext_dev",
    "hexagon",
    "webgpu",
]


# TVM's DeviceAttrKind (include/tvm/runtime/device_api.h): a device property's name, as
# Device and DeviceAPI.attribute spell it, -> the number runtime.GetDeviceAttr and RPC's
# kDevGetAttr take
DEVICE_ATTR_KINDS: dict[str, int] = {
    "exist": 0,
    "max_threads_per_block": 1,
    "warp_size": 2,
    "max_shared_memory_per_block": 3,
    "compute_version": 4,
    "device_name": 5,
    "max_clock_rate": 6,
    "multi_processor_count": 7,
    "max_thread_dimensions": 8,
    "max_registers_per_block": 9,
    "gcn_arch": 10,
    "api_version": 11,
    "driver_version": 12,
    "l2_cache_size_bytes": 13,
    "total_global_memory": 14,
    "available_global_memory": 15,
}

_backends: dict[int, DeviceAPI] = {}
# The backends tvmrt ships, imported on first use: device type -> "module:function", where
# the function returns the DeviceAPI, or None when its driver is missing. A new backend is
# one file under runtime/backends/ and one line here.
_lazy: dict[int, str] = {
    int(DLDeviceType.kDLCPU): "tvmrt.runtime.backends.cpu:backend",
    int(DLDeviceType.kDLOpenCL): "tvmrt.runtime.backends.opencl:backend",
    int(DLDeviceType.kDLCUDA): "tvmrt.runtime.backends.cuda:backend",
}
_SHIPPED = frozenset(_lazy)  # what the message for a missing backend lists
_lock = threading.Lock()


def register_device_api(device_type: int, api: DeviceAPI, override: bool = False) -> None:
    """Serve ``device_type`` with ``api``; ``override`` replaces an existing one."""
    with _lock:
        if device_type in _backends and not override:
            raise InvalidArgumentError(
                f"device type {device_type} ({MASK2STR.get(device_type, '?')}) already has "
                f"backend {_backends[device_type].name!r}; pass override=True to replace it"
            )
        _lazy.pop(device_type, None)
        _backends[device_type] = api


def unregister_device_api(device_type: int) -> None:
    """Remove the backend of ``device_type`` (no-op when there is none)."""
    with _lock:
        _backends.pop(device_type, None)


def find_device_api(device_type: int) -> DeviceAPI | None:
    """The DeviceAPI serving ``device_type`` (imported now if tvmrt ships it), or ``None``."""
    api = _backends.get(device_type)
    if api is None and device_type in _lazy:
        with _lock:
            target = _lazy.pop(device_type, None)
        if target is None:  # another thread is loading it or it was replaced
            return _backends.get(device_type)
        module_name, _, function = target.partition(":")
        found = getattr(importlib.import_module(module_name), function)()
        if found is not None:
            with _lock:
                api = _backends.setdefault(device_type, found)
    return api


def get_device_api(dev: Device) -> DeviceAPI:
    """The DeviceAPI serving ``dev``; raises DeviceUnavailableError when there is none."""
    api = _backends.get(dev.device_type) or find_device_api(dev.device_type)
    if api is None:
        shipped = ", ".join(MASK2STR.get(t, str(t)) for t in sorted(_SHIPPED))
        for device_type in list(_lazy):  # load the others: the message says what works here
            find_device_api(device_type)
        usable = [t for t, a in _backends.items() if getattr(a, "reason", None) is None]
        have = ", ".join(MASK2STR.get(t, str(t)) for t in sorted(usable)) or "no device"
        raise DeviceUnavailableError(
            f"no backend for device {dev}: here tvmrt runs compiled kernels on {have} "
            f"(it ships backends for {shipped})"
        )
    return api


class Device(DeviceTypeNames):
    """A device: a DLPack device type and an index among devices of that type.

    Equality and hashing use ``(device_type, device_id)``, like TVM. Properties that
    describe an accelerator (``warp_size``, ``compute_version``...) are ``None`` where
    the device kind has no such notion, as TVM returns for the CPU.

    Examples
    --------
    >>> dev = Device(2, 1)
    >>> dev, dev.device_type, dev.device_id
    (cuda(1), 2, 1)
    """

    __slots__ = ("device_id", "device_type")

    device_type: int
    device_id: int

    def __init__(self, device_type: int, device_id: int = 0) -> None:
        object.__setattr__(self, "device_type", int(device_type))
        object.__setattr__(self, "device_id", int(device_id))

    def __setattr__(self, name: str, value: object) -> None:
        raise ReadOnlyError(f"Device is immutable; cannot set {name!r}")

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Device)
            and self.device_type == other.device_type
            and self.device_id == other.device_id
        )

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((self.device_type, self.device_id))

    def __repr__(self) -> str:
        if self.device_type >= RPC_SESS_MASK:
            tbl_id = self.device_type // RPC_SESS_MASK - 1
            dev_type = self.device_type % RPC_SESS_MASK
            return f"remote[{tbl_id}]:{MASK2STR.get(dev_type, dev_type)}({self.device_id})"
        return f"{MASK2STR.get(self.device_type, self.device_type)}({self.device_id})"

    __str__ = __repr__

    def __reduce__(self) -> tuple[Any, tuple[int, int]]:
        return (Device, (self.device_type, self.device_id))

    # -- introspection, served by the device's backend -------------------------------
    def _attr(self, name: str) -> Any:
        backend = find_device_api(self.device_type)
        return None if backend is None else backend.attribute(self, name)

    @property
    def exist(self) -> bool:
        """Whether this device exists on this machine (and tvmrt has a backend for it)."""
        return bool(self._attr("exist"))

    @property
    def max_threads_per_block(self) -> int | None:
        """Maximum threads per block; ``None`` on the CPU."""
        return self._attr("max_threads_per_block")  # type: ignore[no-any-return]

    @property
    def warp_size(self) -> int | None:
        """Threads per warp; ``None`` on the CPU."""
        return self._attr("warp_size")  # type: ignore[no-any-return]

    @property
    def max_shared_memory_per_block(self) -> int | None:
        """Shared memory per block in bytes; ``None`` on the CPU."""
        return self._attr("max_shared_memory_per_block")  # type: ignore[no-any-return]

    @property
    def compute_version(self) -> str | None:
        """Compute capability (e.g. ``"8.0"``); ``None`` on the CPU."""
        return self._attr("compute_version")  # type: ignore[no-any-return]

    @property
    def device_name(self) -> str | None:
        """Vendor's device name; ``None`` where unknown."""
        return self._attr("device_name")  # type: ignore[no-any-return]

    @property
    def max_clock_rate(self) -> int | None:
        """Clock rate in kHz; ``None`` on the CPU."""
        return self._attr("max_clock_rate")  # type: ignore[no-any-return]

    @property
    def multi_processor_count(self) -> int | None:
        """Number of multiprocessors; ``None`` on the CPU."""
        return self._attr("multi_processor_count")  # type: ignore[no-any-return]

    @property
    def max_thread_dimensions(self) -> list[int] | None:
        """Maximum block dimensions; ``None`` on the CPU."""
        return self._attr("max_thread_dimensions")  # type: ignore[no-any-return]

    @property
    def api_version(self) -> int | None:
        """Backend API version; ``None`` on the CPU."""
        return self._attr("api_version")  # type: ignore[no-any-return]

    @property
    def driver_version(self) -> str | None:
        """Driver version; ``None`` on the CPU."""
        return self._attr("driver_version")  # type: ignore[no-any-return]

    @property
    def l2_cache_size_bytes(self) -> int | None:
        """L2 cache size; ``None`` where unknown."""
        return self._attr("l2_cache_size_bytes")  # type: ignore[no-any-return]

    @property
    def total_global_memory(self) -> int | None:
        """Total device memory in bytes; ``None`` on the CPU."""
        return self._attr("total_global_memory")  # type: ignore[no-any-return]

    @property
    def available_global_memory(self) -> int | None:
        """Free device memory in bytes; ``None`` on the CPU."""
        return self._attr("available_global_memory")  # type: ignore[no-any-return]

    def texture_spatial_limit(self) -> int | None:
        """Largest texture size per spatial dimension (a method, as in TVM); ``None`` here."""
        return self._attr("texture_spatial_limit")  # type: ignore[no-any-return]

    # -- streams (TVM's raw stream handles; command queues on OpenCL) -----------------
    def create_raw_stream(self) -> ctypes.c_void_p:
        """A new stream on this device (free it with :meth:`free_raw_stream`).

        Host backends have one stream and return a null handle, as TVM's CPU does.
        """
        return ctypes.c_void_p(get_device_api(self).create_stream(self) or None)

    def free_raw_stream(self, stream: ctypes.c_void_p | int | None) -> None:
        """Release a stream made by :meth:`create_raw_stream`."""
        handle = _stream_id(stream)
        if handle:
            get_device_api(self).free_stream(self, handle)

    def set_raw_stream(self, stream: ctypes.c_void_p | int | None) -> None:
        """Make ``stream`` the one kernels and copies on this device are queued on."""
        get_device_api(self).set_stream(self, _stream_id(stream))

    def sync(self, stream: ctypes.c_void_p | int | None = None) -> None:
        """Wait until work queued on ``stream`` (default: the current one) has finished."""
        handle = _stream_id(stream)
        backend = get_device_api(self)
        if handle:
            backend.sync(self, handle)
        else:  # the one-argument form: backends written before streams keep working
            backend.sync(self)


DeviceLike = Device | str | int


def _stream_id(stream: ctypes.c_void_p | int | None) -> int:
    if isinstance(stream, ctypes.c_void_p):
        return int(stream.value or 0)
    if stream is None:
        return 0
    if isinstance(stream, int) and not isinstance(stream, bool):
        return stream
    raise ArgumentTypeError(f"stream must be a handle from create_raw_stream, got {stream!r}")


def device(dev_type: int | str | Device, dev_id: int = 0) -> Device:
    """Make a Device from a type name (``"cuda"``, ``"cuda:1"``, ``"llvm"``) or type code.

    Parameters
    ----------
    dev_type
        A device type name, ``"name:id"``, a DLPack device type code, or a Device.
    dev_id
        Index of the device among devices of that type (ignored for ``"name:id"``).

    Examples
    --------
    >>> device("cuda:1"), device("llvm"), device(2, 3)
    (cuda(1), cpu(0), cuda(3))
    """
    if isinstance(dev_type, Device):
        return dev_type
    if isinstance(dev_type, str):
        text = dev_type.split()[0] if dev_type.split() else dev_type
        name, sep, index = text.partition(":")
        if sep:
            if not index.isdigit():
                raise InvalidArgumentError(f"device {dev_type!r}: index {index!r} is not a number")
            dev_id = int(index)
        if name not in STR2MASK:
            raise InvalidArgumentError(
                f"unknown device type {name!r}; expected one of {', '.join(sorted(STR2MASK))}"
            )
        return Device(STR2MASK[name], dev_id)
    if isinstance(dev_type, int) and not isinstance(dev_type, bool):
        return Device(dev_type, dev_id)
    raise ArgumentTypeError(f"device type must be a str or int, got {type(dev_type).__name__}")


def cpu(dev_id: int = 0) -> Device:
    """The CPU device (``cpu(0)``)."""
    return Device(DLDeviceType.kDLCPU, dev_id)


def cuda(dev_id: int = 0) -> Device:
    """A CUDA GPU."""
    return Device(DLDeviceType.kDLCUDA, dev_id)


def gpu(dev_id: int = 0) -> Device:
    """Deprecated alias of :func:`cuda`."""
    warn_deprecated("tvmrt.runtime.gpu()", instead="tvmrt.runtime.cuda()")
    return cuda(dev_id)


def rocm(dev_id: int = 0) -> Device:
    """An AMD GPU (ROCm)."""
    return Device(DLDeviceType.kDLROCM, dev_id)


def opencl(dev_id: int = 0) -> Device:
    """An OpenCL device."""
    return Device(DLDeviceType.kDLOpenCL, dev_id)


def cl(dev_id: int = 0) -> Device:
    """Short alias of :func:`opencl`."""
    return opencl(dev_id)


def metal(dev_id: int = 0) -> Device:
    """An Apple Metal device."""
    return Device(DLDeviceType.kDLMetal, dev_id)


def mtl(dev_id: int = 0) -> Device:
    """Short alias of :func:`metal`."""
    return metal(dev_id)


def vpi(dev_id: int = 0) -> Device:
    """A Verilog VPI simulation device."""
    return Device(DLDeviceType.kDLVPI, dev_id)


def vulkan(dev_id: int = 0) -> Device:
    """A Vulkan device."""
    return Device(DLDeviceType.kDLVulkan, dev_id)


def ext_dev(dev_id: int = 0) -> Device:
    """An extension device (e.g. an accelerator driven by a plug-in)."""
    return Device(DLDeviceType.kDLExtDev, dev_id)


def hexagon(dev_id: int = 0) -> Device:
    """A Hexagon DSP."""
    return Device(DLDeviceType.kDLHexagon, dev_id)


def webgpu(dev_id: int = 0) -> Device:
    """A WebGPU device."""
    return Device(DLDeviceType.kDLWebGPU, dev_id)
