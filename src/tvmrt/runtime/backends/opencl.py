"""OpenCL devices: the C runtime's OpenCL backend (``_native/runtime/opencl.c``) as a DeviceAPI.

The C runtime opens the ICD loader ``libOpenCL.so.1`` (``TVMRT_LIBOPENCL`` names another)
at the first use of an OpenCL device, so any vendor's driver serves (pocl, Mali, Adreno,
Intel, NVIDIA); nothing is needed from Python. Devices are numbered as TVM numbers them:
the GPUs of every platform, or, where there are none, every device. Memory, copies, command
queues (streams) and properties (``runtime.GetDeviceAttr``) are the C runtime's, through
TVM's C API, and so are the OpenCL modules that launch kernels on that memory
(``opencl_module.c``): an array made here is the same array to the C engines and to
compiled host code, whichever runs the model. A handle is the C runtime's buffer
descriptor (``DLTensor.data`` of an OpenCL array, as TVM's ``cl::BufferDescriptor*``),
which the C side checks is live before it follows one.

A machine without the ICD loader has no OpenCL devices (``opencl(0).exist`` is False); a
use of one says what to install.
"""

from __future__ import annotations

import ctypes
import json
import threading
from typing import Any

import numpy as np

from tvmrt.runtime._ctypes_api import DLDataType, DLDevice, DLTensor
from tvmrt.runtime.device import DEVICE_ATTR_KINDS, Device
from tvmrt.runtime.device_api import ALLOC_ALIGNMENT, DeviceAPI, DeviceStorage, Storage

__all__ = ["OpenCLDeviceAPI", "backend"]

_OPENCL = 4  # kDLOpenCL
_U8 = DLDataType(1, 8, 1)  # uint8: copies are of bytes
_VOID_P = ctypes.c_void_p
_SIGNATURES: dict[str, list[Any]] = {
    "TVMDeviceAllocDataSpace": [
        DLDevice, ctypes.c_size_t, ctypes.c_size_t, DLDataType, ctypes.POINTER(_VOID_P)
    ],
    "TVMDeviceFreeDataSpace": [DLDevice, _VOID_P],
    "TVMDeviceCopyDataFromTo": [ctypes.POINTER(DLTensor), ctypes.POINTER(DLTensor), _VOID_P],
    "TVMSynchronize": [ctypes.c_int, ctypes.c_int, _VOID_P],
    "TVMStreamCreate": [ctypes.c_int, ctypes.c_int, ctypes.POINTER(_VOID_P)],
    "TVMStreamFree": [ctypes.c_int, ctypes.c_int, _VOID_P],
    "TVMSetStream": [ctypes.c_int, ctypes.c_int, _VOID_P],
}  # fmt: skip


class OpenCLDeviceAPI(DeviceAPI):
    """OpenCL memory, copies, command queues (streams) and properties, of the C runtime."""

    name = "opencl"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._c: Any = None
        self._exist: dict[int, bool] = {}  # the device list is fixed once the driver is read

    def _lib(self) -> Any:
        """The one native library, the C API functions used here typed (once)."""
        if self._c is None:
            from tvmrt.runtime import kernel_services

            lib = kernel_services.native_library()
            with self._lock:
                for name, argtypes in _SIGNATURES.items():
                    func = getattr(lib, name)
                    func.argtypes, func.restype = argtypes, ctypes.c_int
                self._c = lib
        return self._c

    @staticmethod
    def _check(rc: int) -> None:
        if rc != 0:
            from tvmrt.runtime.native_module import fail

            raise fail()

    # -- memory ------------------------------------------------------------------------
    def alloc(self, dev: Device, nbytes: int, alignment: int = ALLOC_ALIGNMENT) -> Storage:
        if nbytes >= 0 and not self.attribute(dev, "exist"):
            self.sync(dev)  # the C runtime says why: no driver, or how many devices there are
        return super().alloc(dev, nbytes, alignment)

    def _alloc(self, dev: Device, nbytes: int, alignment: int) -> Any:
        out = _VOID_P()
        device = DLDevice(_OPENCL, dev.device_id)
        self._check(
            self._lib().TVMDeviceAllocDataSpace(device, nbytes, alignment, _U8, ctypes.byref(out))
        )
        return DeviceStorage(self, dev, int(out.value or 0), nbytes)

    def free(self, storage: Storage) -> None:
        device = DLDevice(_OPENCL, storage.device.device_id)
        self._check(self._lib().TVMDeviceFreeDataSpace(device, storage.handle))

    def _copy(self, src: DLTensor, dst: DLTensor) -> None:
        self._check(self._lib().TVMDeviceCopyDataFromTo(ctypes.byref(src), ctypes.byref(dst), None))

    @staticmethod
    def _bytes(data: int, device: DLDevice, nbytes: int, offset: int = 0) -> DLTensor:
        """``nbytes`` bytes at ``offset`` of ``data`` on ``device``, as a 1-d uint8 DLTensor
        (its shape is kept alive by the tensor)."""
        shape = (ctypes.c_int64 * 1)(nbytes)
        tensor = DLTensor(data, device, 1, _U8, shape, None, offset)
        tensor._shape = shape
        return tensor

    def _device_side(self, storage: Storage, offset: int, nbytes: int) -> DLTensor:
        device = DLDevice(_OPENCL, storage.device.device_id)
        return self._bytes(storage.handle, device, nbytes, offset)

    def copy_from_host(self, dst: Storage, offset: int, src: np.ndarray[Any, Any]) -> None:
        host = np.ascontiguousarray(src).reshape(-1).view(np.uint8)
        source = self._bytes(host.ctypes.data, DLDevice(1, 0), host.nbytes)
        self._copy(source, self._device_side(dst, offset, host.nbytes))

    def copy_to_host(self, src: Storage, offset: int, dst: np.ndarray[Any, Any]) -> None:
        host = dst.reshape(-1).view(np.uint8)
        target = self._bytes(host.ctypes.data, DLDevice(1, 0), host.nbytes)
        self._copy(self._device_side(src, offset, host.nbytes), target)

    def copy_device_to_device(
        self, src: Storage, src_offset: int, dst: Storage, dst_offset: int, nbytes: int
    ) -> None:
        self._copy(
            self._device_side(src, src_offset, nbytes), self._device_side(dst, dst_offset, nbytes)
        )

    # -- streams: command queues (0 is the device's current one) -----------------------------
    def sync(self, dev: Device, stream: int = 0) -> None:
        self._check(self._lib().TVMSynchronize(_OPENCL, dev.device_id, stream or None))

    def create_stream(self, dev: Device) -> int:
        out = _VOID_P()
        self._check(self._lib().TVMStreamCreate(_OPENCL, dev.device_id, ctypes.byref(out)))
        return int(out.value or 0)

    def free_stream(self, dev: Device, stream: int) -> None:
        self._check(self._lib().TVMStreamFree(_OPENCL, dev.device_id, stream or None))

    def set_stream(self, dev: Device, stream: int) -> None:
        self._check(self._lib().TVMSetStream(_OPENCL, dev.device_id, stream or None))

    # -- properties ------------------------------------------------------------------------
    @property
    def reason(self) -> str | None:
        """Why OpenCL cannot be used here (None where opencl(0) exists): what the device
        table's messages read to list the devices that work."""
        if self.attribute(Device(_OPENCL, 0), "exist"):
            return None
        return "this machine has no OpenCL device (or no ICD loader, libOpenCL.so.1)"

    def attribute(self, dev: Device, name: str) -> Any:
        if name == "exist":
            exist = self._exist.get(dev.device_id)
            if exist is None:
                exist = self._exist[dev.device_id] = bool(self._query(dev, 0))
            return exist
        kind = DEVICE_ATTR_KINDS.get(name)
        value = None if kind is None else self._query(dev, kind)
        if isinstance(value, str):
            value = str(value)  # the C runtime's String, as a plain str
            if name == "max_thread_dimensions":  # TVM's "[x, y, z]"
                return [int(x) for x in json.loads(value)]
        return value

    def _query(self, dev: Device, kind: int) -> Any:
        from tvmrt.runtime.native_module import c_global

        return c_global("runtime.GetDeviceAttr")(_OPENCL, dev.device_id, kind)


def backend() -> OpenCLDeviceAPI:
    """The OpenCL backend (runtime/device.py's lazy table); its devices are the driver's."""
    return OpenCLDeviceAPI()
