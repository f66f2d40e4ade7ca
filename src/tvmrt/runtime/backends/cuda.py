"""CUDA GPUs through the driver API (``libcuda.so.1``; no CUDA toolkit, no pip package).

As in TVM, each device uses its *primary context*, made current on every thread that
touches the device; memory is ``cuMemAlloc`` device memory whose handles are the device
addresses (what compiled host code passes to kernels); streams are ``CUstream`` handles
(0 is the legacy default stream) and the current stream is per thread (``set_stream``).
Work is asynchronous as in TVM: kernel launches and device-to-device copies are queued on
the current stream and return at once; copies to or from host memory wait for the stream
(they read or fill numpy memory the caller may reuse), and :meth:`sync` waits for it.
``TVMBackendAllocWorkspace(kDLCUDA, ...)`` is served from a per-device pool that keeps
freed blocks for reuse (TVM's ``WorkspacePool``).

The driver is loaded on first use; without it, or without a GPU, every CUDA device
reports ``exist = False`` and using one raises :class:`DeviceUnavailableError` naming why.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import threading
from collections.abc import Iterator
from typing import Any, Protocol

import numpy as np

from tvmrt.error import ArrayError, DeviceUnavailableError, InvalidArgumentError, TVMError
from tvmrt.runtime.backends._cuda_driver import CU_STREAM_NON_BLOCKING, Driver, driver
from tvmrt.runtime.device import Device
from tvmrt.runtime.device_api import DeviceAPI, DeviceStorage, Storage

__all__ = ["CUDADeviceAPI", "backend", "ATTRIBUTES", "ThreadMirror", "mirror_thread_state"]

# TVM's attribute names -> CUdevice_attribute
ATTRIBUTES = {
    "max_threads_per_block": 1,
    "warp_size": 10,
    "max_shared_memory_per_block": 8,
    "max_clock_rate": 13,
    "multi_processor_count": 16,
    "l2_cache_size_bytes": 38,
    "max_registers_per_block": 12,
}
_MAJOR, _MINOR = 75, 76
_MAX_DIMS = (2, 3, 4)
_PAGE = 4096


_tokens = itertools.count(1)
_HOST_FUNC = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class ThreadMirror(Protocol):
    """Something that keeps a copy of each thread's CUDA state (the C kernel launcher of
    loaders/cuda_launch.py); ``api`` is the reporting backend's :attr:`CUDADeviceAPI.token`."""

    def activated(self, api: int, device_id: int, stream: int) -> None: ...

    def stream_set(self, api: int, device_id: int, stream: int) -> None: ...


_mirrors: list[ThreadMirror] = []


def mirror_thread_state(mirror: ThreadMirror) -> None:
    """Report to ``mirror`` every context switch and stream change from now on (the calling
    thread's, on that thread)."""
    _mirrors.append(mirror)


class _Pool:
    """Freed workspace blocks of one device, reused by the next request that fits."""

    def __init__(self) -> None:
        self.free: list[Storage] = []
        self.lock = threading.Lock()

    def take(self, nbytes: int) -> Storage | None:
        with self.lock:
            fits = [s for s in self.free if s.nbytes >= nbytes]
            if not fits:
                return None
            best = min(fits, key=lambda s: s.nbytes)
            self.free.remove(best)
            return best

    def give(self, storage: Storage) -> None:
        with self.lock:
            self.free.append(storage)


class CUDADeviceAPI(DeviceAPI):
    """CUDA memory, copies, streams, device attributes and the workspace pool."""

    name = "cuda"

    def __init__(self, drv: Driver) -> None:
        self.driver = drv
        count = ctypes.c_int()
        drv.call("cuDeviceGetCount", ctypes.byref(count))
        self.count = count.value
        self._lock = threading.Lock()
        self._contexts: dict[int, int] = {}
        self._thread = threading.local()
        self._pools: dict[int, _Pool] = {}
        self.token = next(_tokens)  # tells this backend's thread state from another's

    # -- contexts ----------------------------------------------------------------------
    def check_device(self, dev: Device) -> None:
        """Raise DeviceUnavailableError unless ``dev`` is one of this machine's GPUs."""
        if not 0 <= dev.device_id < self.count:
            raise DeviceUnavailableError(
                f"device {dev} does not exist: the NVIDIA driver (CUDA "
                f"{self.driver.version_text}) reports {self.count} GPU(s)"
            )

    def activate(self, dev: Device) -> None:
        """Make ``dev``'s primary context current on this thread (retained on first use)."""
        if getattr(self._thread, "device", None) == dev.device_id:
            return
        ctx = self._contexts.get(dev.device_id)
        if ctx is None:
            self.check_device(dev)
            with self._lock:
                ctx = self._contexts.get(dev.device_id)
                if ctx is None:
                    handle, raw = ctypes.c_void_p(), ctypes.c_int()
                    self.driver.call("cuDeviceGet", ctypes.byref(raw), dev.device_id)
                    self.driver.call("cuDevicePrimaryCtxRetain", ctypes.byref(handle), raw.value)
                    ctx = self._contexts[dev.device_id] = int(handle.value or 0)
        self.driver.call("cuCtxSetCurrent", ctypes.c_void_p(ctx))
        self._thread.device = dev.device_id
        for mirror in _mirrors:
            mirror.activated(self.token, dev.device_id, self.stream(dev))

    def stream(self, dev: Device) -> int:
        """This thread's current stream on ``dev`` (0: the legacy default stream)."""
        streams: dict[int, int] = getattr(self._thread, "streams", {})
        return streams.get(dev.device_id, 0)

    @contextlib.contextmanager
    def hold_stream(self, dev: Device, timeout: float = 10.0) -> Iterator[None]:
        """Hold this thread's current stream on ``dev`` until the block exits.

        A host function queued first blocks the stream, so the work queued inside starts
        when the block exits and runs back to back on the GPU: events recorded around each
        launch then time the kernel alone, not the host's gaps between launches (on an idle
        GPU an event pair also spans the time the host took to queue the kernel). Nothing
        inside that waits for the GPU through this backend (:meth:`sync`, a copy to or from
        host memory) lets the hold go first; a wait the backend does not see (a driver call
        of one's own) would last until the hold gives way by itself, after ``timeout``
        seconds; so would a launch into a full queue (the driver queues about a thousand
        launches), so hold only a run's worth of work. The exit waits for the stream.
        """
        released = threading.Event()

        def wait(_: int | None) -> None:
            released.wait(timeout)

        gate = _HOST_FUNC(wait)

        self.activate(dev)
        stream = ctypes.c_void_p(self.stream(dev))
        self.driver.call("cuLaunchHostFunc", stream, gate, None)
        outer, self._thread.hold = getattr(self._thread, "hold", None), released
        try:
            yield
        finally:
            self._thread.hold = outer
            released.set()
            self.driver.call("cuStreamSynchronize", stream)  # the gate ran: it may be freed

    def _let_go(self) -> None:
        """Before waiting for the GPU: end this thread's :meth:`hold_stream`, if one holds."""
        hold: threading.Event | None = getattr(self._thread, "hold", None)
        if hold is not None:
            hold.set()

    # -- memory ------------------------------------------------------------------------
    def alloc(self, dev: Device, nbytes: int, alignment: int = 64) -> Storage:
        self.check_device(dev)
        return super().alloc(dev, nbytes, alignment)

    def _alloc(self, dev: Device, nbytes: int, alignment: int) -> Any:
        if alignment <= 0 or 256 % alignment:
            raise InvalidArgumentError(
                f"CUDA memory is 256-byte aligned: alignment {alignment} must divide 256"
            )
        self.activate(dev)
        ptr = ctypes.c_uint64()
        self.driver.call("cuMemAlloc_v2", ctypes.byref(ptr), max(nbytes, 1))
        return DeviceStorage(self, dev, int(ptr.value), nbytes)

    def free(self, storage: Storage) -> None:
        self.activate(storage.device)
        self.driver.call("cuMemFree_v2", storage.handle)

    def alloc_workspace(self, dev: Device, nbytes: int) -> Storage:
        """Workspace for kernels: a pooled block of at least ``nbytes`` (page-rounded)."""
        pool = self._pools.setdefault(dev.device_id, _Pool())
        found = pool.take(nbytes)
        if found is not None:
            return found
        return self.alloc(dev, -(-max(nbytes, 1) // _PAGE) * _PAGE)

    def free_workspace(self, storage: Storage) -> None:
        """Return a block from :meth:`alloc_workspace` to its device's pool."""
        self._pools.setdefault(storage.device.device_id, _Pool()).give(storage)

    @staticmethod
    def _check(storage: Storage, offset: int, nbytes: int) -> None:
        if offset < 0 or nbytes < 0 or offset + nbytes > storage.nbytes:
            raise ArrayError(
                f"{nbytes} bytes at offset {offset} do not fit a {storage.nbytes}-byte "
                f"allocation on {storage.device}"
            )

    def copy_from_host(self, dst: Storage, offset: int, src: np.ndarray[Any, Any]) -> None:
        self._check(dst, offset, src.nbytes)
        if not src.nbytes:
            return
        host = np.ascontiguousarray(src)
        self._let_go()
        self.activate(dst.device)
        stream = self.stream(dst.device)
        self.driver.call(
            "cuMemcpyHtoDAsync_v2", dst.handle + offset, host.ctypes.data, host.nbytes,
            ctypes.c_void_p(stream),
        )  # fmt: skip
        self.driver.call("cuStreamSynchronize", ctypes.c_void_p(stream))

    def copy_to_host(self, src: Storage, offset: int, dst: np.ndarray[Any, Any]) -> None:
        self._check(src, offset, dst.nbytes)
        if not dst.nbytes:
            return
        if not dst.flags.c_contiguous:
            raise ArrayError("copy from a CUDA array needs a C-contiguous host array")
        self._let_go()
        self.activate(src.device)
        stream = self.stream(src.device)
        self.driver.call(
            "cuMemcpyDtoHAsync_v2", dst.ctypes.data, src.handle + offset, dst.nbytes,
            ctypes.c_void_p(stream),
        )  # fmt: skip
        self.driver.call("cuStreamSynchronize", ctypes.c_void_p(stream))

    def copy_device_to_device(
        self, src: Storage, src_offset: int, dst: Storage, dst_offset: int, nbytes: int
    ) -> None:
        self._check(src, src_offset, nbytes)
        self._check(dst, dst_offset, nbytes)
        if not nbytes:
            return
        if src.device != dst.device:  # two contexts: stage through the host
            super().copy_device_to_device(src, src_offset, dst, dst_offset, nbytes)
            return
        self.activate(dst.device)
        self.driver.call(
            "cuMemcpyDtoDAsync_v2", dst.handle + dst_offset, src.handle + src_offset, nbytes,
            ctypes.c_void_p(self.stream(dst.device)),
        )  # fmt: skip

    # -- streams -------------------------------------------------------------------------
    def sync(self, dev: Device, stream: int = 0) -> None:
        self._let_go()
        self.activate(dev)
        self.driver.call("cuStreamSynchronize", ctypes.c_void_p(stream or self.stream(dev)))

    def create_stream(self, dev: Device) -> int:
        self.activate(dev)
        handle = ctypes.c_void_p()
        self.driver.call("cuStreamCreate", ctypes.byref(handle), CU_STREAM_NON_BLOCKING)
        return int(handle.value or 0)

    def free_stream(self, dev: Device, stream: int) -> None:
        if not stream:
            raise InvalidArgumentError(f"stream 0 of {dev} is the default stream: it is not freed")
        self.activate(dev)
        streams: dict[int, int] = getattr(self._thread, "streams", {})
        if streams.get(dev.device_id) == stream:
            del streams[dev.device_id]
            for mirror in _mirrors:
                mirror.stream_set(self.token, dev.device_id, 0)
        self.driver.call("cuStreamDestroy_v2", ctypes.c_void_p(stream))

    def set_stream(self, dev: Device, stream: int) -> None:
        if not hasattr(self._thread, "streams"):
            self._thread.streams = {}
        self._thread.streams[dev.device_id] = int(stream)
        for mirror in _mirrors:
            mirror.stream_set(self.token, dev.device_id, int(stream))

    # -- properties ------------------------------------------------------------------------
    def _attr(self, dev: Device, code: int) -> int:
        value = ctypes.c_int()
        self.driver.call("cuDeviceGetAttribute", ctypes.byref(value), code, dev.device_id)
        return value.value

    def attribute(self, dev: Device, name: str) -> Any:
        exists = 0 <= dev.device_id < self.count
        if name == "exist":
            return exists
        if not exists:
            return None
        if name in ATTRIBUTES:
            return self._attr(dev, ATTRIBUTES[name])
        if name == "compute_version":
            return f"{self._attr(dev, _MAJOR)}.{self._attr(dev, _MINOR)}"
        if name == "device_name":
            buf = ctypes.create_string_buffer(256)
            self.driver.call("cuDeviceGetName", buf, len(buf), dev.device_id)
            return buf.value.decode(errors="replace")
        if name == "max_thread_dimensions":
            return [self._attr(dev, code) for code in _MAX_DIMS]
        if name == "api_version":
            return self.driver.version
        if name == "driver_version":
            return self.driver.version_text
        if name == "total_global_memory":
            size = ctypes.c_size_t()
            self.driver.call("cuDeviceTotalMem_v2", ctypes.byref(size), dev.device_id)
            return int(size.value)
        return None


class _Missing(DeviceAPI):
    """CUDA without a driver or a GPU: no device exists, and using one says why."""

    name = "cuda"

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def attribute(self, dev: Device, name: str) -> Any:
        return False if name == "exist" else None

    def alloc(self, dev: Device, nbytes: int, alignment: int = 64) -> Storage:
        raise DeviceUnavailableError(self.reason)

    def sync(self, dev: Device, stream: int = 0) -> None:
        raise DeviceUnavailableError(self.reason)

    def create_stream(self, dev: Device) -> int:
        raise DeviceUnavailableError(self.reason)


def backend() -> DeviceAPI:
    """The CUDA backend (runtime/device.py's lazy table); without a driver, one that refuses."""
    try:
        return CUDADeviceAPI(driver())
    except TVMError as exc:
        return _Missing(str(exc))
