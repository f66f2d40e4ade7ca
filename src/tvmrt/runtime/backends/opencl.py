"""OpenCL devices through pyopencl (``pip install 'tvmrt[opencl]'``; any ICD, e.g. pocl).

Devices are numbered as TVM numbers them: the GPUs of every platform, or, if there are
none, every OpenCL device (pocl's CPU device on a machine without GPUs). Each device has
its own context and a default command queue (stream 0); :meth:`create_stream` makes more
queues. Memory is ``cl.Buffer`` objects behind opaque handles that look like aligned
device addresses: compiled host code passes them as ``DLTensor.data`` and the OpenCL
module (:mod:`tvmrt.runtime.loaders.opencl`) maps them back to buffers at launch.

Importing this module registers the backend for ``kDLOpenCL`` when pyopencl is
importable; otherwise nothing is registered and OpenCL devices report ``exist = False``.
"""

from __future__ import annotations

import itertools
import re
import threading
from typing import Any

import numpy as np

from tvmrt.error import (
    ArrayError,
    DeviceOutOfMemoryError,
    DeviceUnavailableError,
    InvalidArgumentError,
)
from tvmrt.runtime.device import Device
from tvmrt.runtime.device_api import DeviceAPI, DeviceStorage, Storage

cl: Any  # pyopencl, untyped here: storage objects are opaque to the device layer
try:
    import pyopencl as _pyopencl

    cl = _pyopencl
except ImportError:  # pragma: no cover - the backend is optional
    cl = None

__all__ = ["OpenCLDeviceAPI", "available", "backend"]

_TOKEN_BASE = 0x7C00_0000_0000
_TOKEN_STEP = 1 << 16


def available() -> bool:
    """Whether pyopencl is importable (devices may still be absent)."""
    return cl is not None


class _DeviceState:
    """Context and command queues of one OpenCL device."""

    def __init__(self, cl_device: Any) -> None:
        self.cl_device = cl_device
        self.context = cl.Context([cl_device])
        self.queues: dict[int, Any] = {0: cl.CommandQueue(self.context)}
        self.current = 0

    @property
    def queue(self) -> Any:
        return self.queues[self.current]


class OpenCLDeviceAPI(DeviceAPI):
    """OpenCL memory, copies, command queues (streams) and device properties."""

    name = "opencl"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cl_devices: list[Any] | None = None
        self._states: dict[int, _DeviceState] = {}
        self._tokens = itertools.count(1)
        self._streams = itertools.count(1)
        self.buffers: dict[int, Any] = {}  # handle -> cl.Buffer, while the storage lives

    # -- devices -----------------------------------------------------------------------
    def cl_devices(self) -> list[Any]:
        """The OpenCL devices tvmrt numbers 0, 1, ... (GPUs first, else every device)."""
        if self._cl_devices is None:
            try:
                platforms = cl.get_platforms()
            except cl.Error:  # no ICD installed
                platforms = []
            found = [d for p in platforms for d in p.get_devices()]
            gpus = [d for d in found if d.type & cl.device_type.GPU]
            self._cl_devices = gpus or found
        return self._cl_devices

    def state(self, dev: Device) -> _DeviceState:
        """The context and queues of ``dev`` (made on first use)."""
        state = self._states.get(dev.device_id)
        if state is None:
            devices = self.cl_devices()
            if not 0 <= dev.device_id < len(devices):
                raise DeviceUnavailableError(
                    f"device {dev} does not exist: this machine has {len(devices)} OpenCL device(s)"
                )
            with self._lock:
                state = self._states.setdefault(dev.device_id, _DeviceState(devices[dev.device_id]))
        return state

    def context(self, dev: Device) -> Any:
        """The ``cl.Context`` of ``dev``."""
        return self.state(dev).context

    def queue(self, dev: Device) -> Any:
        """The current command queue of ``dev``."""
        return self.state(dev).queue

    # -- memory ------------------------------------------------------------------------
    def _alloc(self, dev: Device, nbytes: int, alignment: int) -> Any:
        state = self.state(dev)
        try:  # OpenCL has no empty buffers: one byte stands in for zero
            buf = cl.Buffer(state.context, cl.mem_flags.READ_WRITE, max(nbytes, 1))
        except cl.MemoryError as exc:
            raise DeviceOutOfMemoryError(f"allocating {nbytes} bytes on {dev} failed") from exc
        handle = _TOKEN_BASE + next(self._tokens) * _TOKEN_STEP
        self.buffers[handle] = buf
        return DeviceStorage(self, dev, handle, nbytes, None, buf)

    def free(self, storage: Storage) -> None:
        buf = self.buffers.pop(storage.handle, None)
        if buf is not None:
            buf.release()

    def buffer(self, handle: int) -> Any:
        """The ``cl.Buffer`` behind a data handle; ArrayError if it is not one of ours."""
        buf = self.buffers.get(handle)
        if buf is None:
            raise ArrayError(f"{handle:#x} is not the data handle of a live OpenCL array")
        return buf

    @staticmethod
    def _check(storage: Storage, offset: int, nbytes: int) -> None:
        if offset < 0 or offset + nbytes > storage.nbytes:
            raise ArrayError(
                f"{nbytes} bytes at offset {offset} do not fit a {storage.nbytes}-byte "
                f"allocation on {storage.device}"
            )

    def copy_from_host(self, dst: Storage, offset: int, src: np.ndarray[Any, Any]) -> None:
        self._check(dst, offset, src.nbytes)
        if src.nbytes:
            host = np.ascontiguousarray(src).reshape(-1).view(np.uint8)
            queue = self.queue(dst.device)
            cl.enqueue_copy(queue, dst.obj, host, dst_offset=offset, is_blocking=True)

    def copy_to_host(self, src: Storage, offset: int, dst: np.ndarray[Any, Any]) -> None:
        self._check(src, offset, dst.nbytes)
        if dst.nbytes:
            host = dst.reshape(-1).view(np.uint8)
            queue = self.queue(src.device)
            cl.enqueue_copy(queue, host, src.obj, src_offset=offset, is_blocking=True)

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
        queue = self.queue(dst.device)
        cl.enqueue_copy(
            queue, dst.obj, src.obj, byte_count=nbytes, src_offset=src_offset,
            dst_offset=dst_offset,
        )  # fmt: skip

    # -- streams -------------------------------------------------------------------------
    def sync(self, dev: Device, stream: int = 0) -> None:
        state = self.state(dev)
        queue = state.queues.get(stream) if stream else state.queue
        if queue is None:
            raise InvalidArgumentError(f"stream {stream} is not a command queue of {dev}")
        queue.finish()

    def create_stream(self, dev: Device) -> int:
        state = self.state(dev)
        stream = next(self._streams)
        state.queues[stream] = cl.CommandQueue(state.context)
        return stream

    def free_stream(self, dev: Device, stream: int) -> None:
        state = self.state(dev)
        if stream == 0 or stream not in state.queues:
            raise InvalidArgumentError(f"stream {stream} was not created on {dev} by create_stream")
        if state.current == stream:
            state.current = 0
        state.queues.pop(stream).finish()

    def set_stream(self, dev: Device, stream: int) -> None:
        state = self.state(dev)
        if stream not in state.queues:
            raise InvalidArgumentError(f"stream {stream} is not a command queue of {dev}")
        state.current = stream

    # -- properties ------------------------------------------------------------------------
    def attribute(self, dev: Device, name: str) -> Any:
        if name == "exist":
            return 0 <= dev.device_id < len(self.cl_devices())
        if not 0 <= dev.device_id < len(self.cl_devices()):
            return None
        d = self.cl_devices()[dev.device_id]
        version = re.match(r"OpenCL (\d+)\.(\d+)", d.version)
        getters: dict[str, Any] = {
            "max_threads_per_block": lambda: int(d.max_work_group_size),
            "warp_size": lambda: 1,  # TVM reports 1 for every OpenCL device
            "max_shared_memory_per_block": lambda: int(d.local_mem_size),
            "compute_version": lambda: f"{version[1]}.{version[2]}" if version else None,
            "device_name": lambda: str(d.name),
            "max_clock_rate": lambda: int(d.max_clock_frequency) * 1000,  # MHz -> kHz
            "multi_processor_count": lambda: int(d.max_compute_units),
            "max_thread_dimensions": lambda: [int(x) for x in d.max_work_item_sizes],
            "api_version": lambda: (
                int(version[1]) * 100 + int(version[2]) * 10 if version else None
            ),
            "driver_version": lambda: str(d.driver_version),
            "l2_cache_size_bytes": lambda: int(d.global_mem_cache_size),
            "total_global_memory": lambda: int(d.global_mem_size),
        }
        getter = getters.get(name)
        return None if getter is None else getter()


def backend() -> OpenCLDeviceAPI | None:
    """The OpenCL backend, or None without pyopencl (runtime/device.py's lazy table)."""
    return None if cl is None else OpenCLDeviceAPI()
