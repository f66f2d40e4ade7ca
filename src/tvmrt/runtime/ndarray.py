"""``NDArray``: a tensor in device memory, with TVM's API and DLPack exchange.

An NDArray is device storage (:class:`~tvmrt.runtime.device_api.Storage`) + a byte offset
+ a shape + a dtype (:class:`~tvmrt.runtime.array_memory.ArrayMemory`). Arrays in host
memory (the CPU) also keep a numpy view of their bytes, so host access is zero-copy;
arrays in device memory move through their backend's copy hooks. Memory is 64-byte
aligned when tvmrt allocates it (compiled kernels require that). Arrays made from another
framework's memory (:func:`from_dlpack`) keep that memory and its alignment; the graph
executor checks alignment wherever a kernel would see it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tvmrt.error import ArgumentTypeError, ArrayError, DeviceUnavailableError, InvalidArgumentError
from tvmrt.runtime._deprecate import warn_deprecated
from tvmrt.runtime._transfer import copy_between, copy_numpy_into
from tvmrt.runtime.array_memory import ArrayMemory, ShapeLike, as_shape, numpy_shape
from tvmrt.runtime.device import (
    Device,
    DeviceLike,
    DLDeviceType,
    cl,
    cpu,
    cuda,
    device,
    ext_dev,
    gpu,
    hexagon,
    metal,
    mtl,
    opencl,
    rocm,
    vpi,
    vulkan,
    webgpu,
)
from tvmrt.runtime.device_api import ALLOC_ALIGNMENT, get_device_api
from tvmrt.runtime.dlpack_export import export_capsule
from tvmrt.runtime.dlpack_import import import_tensor
from tvmrt.runtime.dtype import DataType, DataTypeCode, DTypeLike
from tvmrt.runtime.tvm_array import TVMArray, TVMArrayHandle, numpyasarray

__all__ = [
    "NDArray",
    "empty",
    "array",
    "from_dlpack",
    "to_dlpack_capsule",
    "numpyasarray",
    "ShapeLike",
    # TVM's tvm.runtime.ndarray also holds the device constructors and the ctypes structs
    "Device",
    "DataType",
    "DataTypeCode",
    "TVMArray",
    "TVMArrayHandle",
    "device",
    "cpu",
    "cuda",
    "gpu",
    "rocm",
    "opencl",
    "cl",
    "vulkan",
    "metal",
    "mtl",
    "vpi",
    "ext_dev",
    "hexagon",
    "webgpu",
]


class NDArray(ArrayMemory):
    """A tensor on a device: shape, dtype, device and (host-addressable) memory.

    Create one with :func:`empty`, :func:`array` or :func:`from_dlpack`. Like TVM,
    :meth:`numpy` returns a copy; :meth:`numpy_view` (tvmrt) and ``np.from_dlpack``
    share memory instead.

    Examples
    --------
    >>> a = array(np.arange(4, dtype="float32"))
    >>> a.shape, str(a.dtype), a.device
    ((4,), 'float32', cpu(0))
    >>> a.numpy()
    array([0., 1., 2., 3.], dtype=float32)
    """

    __slots__ = ()

    def __init__(self) -> None:
        raise ArgumentTypeError(
            "use tvmrt.runtime.empty(), array() or from_dlpack() to make an NDArray"
        )

    def __len__(self) -> int:
        if not self.shape:
            raise ArgumentTypeError("len() of a 0-d NDArray")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"<tvmrt.NDArray shape={self.shape}, {self._device}>\n{self.numpy()!r}"

    def __str__(self) -> str:
        return str(self.numpy())

    # -- data access -----------------------------------------------------------------
    def numpy(self) -> np.ndarray[Any, Any]:
        """A numpy copy of the data (vector dtypes gain a trailing lanes dimension)."""
        if self._np is not None:
            return np.array(self._np, copy=True)
        out = np.empty(numpy_shape(self._shape, self._dtype), self._dtype.numpy_dtype)
        storage = self._device_storage()
        storage.api.copy_to_host(storage, self._byte_offset, out)
        return out

    def asnumpy(self) -> np.ndarray[Any, Any]:
        """Deprecated alias of :meth:`numpy`."""
        warn_deprecated("NDArray.asnumpy()", instead="NDArray.numpy()")
        return self.numpy()

    def numpy_view(self) -> np.ndarray[Any, Any]:
        """A numpy array sharing this array's memory (tvmrt extension; writes go through).

        Raises
        ------
        ArrayError
            If the array is in device memory (only host memory has numpy views).
        """
        return self._host("numpy_view()")

    def copyfrom(self, source_array: object) -> NDArray:
        """Copy data into this array and return it.

        An NDArray source must have exactly as many bytes (shape and dtype may differ,
        as in TVM). Anything else is converted with numpy: its shape must equal this
        array's shape, and its dtype is converted to this array's dtype.

        Raises
        ------
        ArrayError
            If the shape (numpy source) or the byte size (NDArray source) differs.
        TypeError
            If ``source_array`` is not array-like.
        """
        if isinstance(source_array, NDArray):
            source_array.copyto(self)
            return self
        target = self._np
        if target is not None:
            np_shape, np_dtype = target.shape, target.dtype
        else:
            np_shape, np_dtype = numpy_shape(self._shape, self._dtype), self._dtype.numpy_dtype
        if not isinstance(source_array, np.ndarray):
            try:
                source_array = np.array(source_array, dtype=np_dtype)
            except (TypeError, ValueError) as exc:
                raise ArgumentTypeError(
                    f"array must be an array_like data, type {type(source_array)} is not supported"
                ) from exc
        assert isinstance(source_array, np.ndarray)
        if source_array.shape != np_shape:
            raise ArrayError(
                f"array shape do not match the shape of NDArray {source_array.shape} vs {np_shape}"
            )
        if target is not None:
            copy_numpy_into(target, source_array, self._dtype)
            return self
        staging = np.empty(np_shape, np_dtype)
        copy_numpy_into(staging, source_array, self._dtype)
        storage = self._device_storage()
        storage.api.copy_from_host(storage, self._byte_offset, staging)
        return self

    def copyto(self, target: NDArray | DeviceLike, mem_scope: str | None = None) -> NDArray:
        """Copy into ``target`` (an NDArray of equal byte size) or onto a new device.

        ``mem_scope`` is the memory scope of the new array (as in :func:`empty`).
        """
        if isinstance(target, NDArray):
            if target.nbytes != self.nbytes:
                raise ArrayError(
                    "TVMArrayCopyFromTo: The size in bytes must exactly match: "
                    f"source {self.shape} {self.dtype} has {self.nbytes} bytes, "
                    f"target {target.shape} {target.dtype} has {target.nbytes}"
                )
            copy_between(
                self._np,
                self._storage,
                self._byte_offset,
                target._np,
                target._storage,
                target._byte_offset,
                self.nbytes,
            )
            return target
        out = empty(self.shape, self.dtype, _as_device(target), mem_scope)
        return self.copyto(out)

    def __setitem__(self, in_slice: object, value: object) -> None:
        if not isinstance(in_slice, slice) or in_slice != slice(None):
            raise InvalidArgumentError(
                "NDArray only supports assignment to the whole array: arr[:] = value"
            )
        if isinstance(value, NDArray):
            if value is not self:
                value.copyto(self)
        elif isinstance(value, np.ndarray | list | tuple):
            self.copyfrom(value)
        elif self._np is not None:
            self._np[...] = value
        else:
            self.copyfrom(np.full(self._shape, value, dtype=self._dtype.numpy_dtype))

    # -- DLPack ---------------------------------------------------------------------------
    def __dlpack__(
        self,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """Export as a DLPack capsule (zero-copy), per the Python array API standard."""
        return to_dlpack_capsule(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        """``(device_type, device_id)`` of the data, per the Python array API standard."""
        return (self._device.device_type, self._device.device_id)

    def to_dlpack(self) -> Any:
        """Export as a legacy ``"dltensor"`` capsule (TVM's ``NDArray.to_dlpack``)."""
        return self.__dlpack__()

    def same_as(self, other: object) -> bool:
        """Whether ``other`` is the same tensor: same memory, shape, dtype and device.

        TVM compares the C handles, so two Python wrappers of one tensor (two
        ``get_output(0)`` calls) are the same; so they are here.
        """
        if not isinstance(other, NDArray):
            return False
        if other is self:
            return True
        return (
            self.data_ptr == other.data_ptr
            and self.shape == other.shape
            and self.dtype == other.dtype
            and self.device == other.device
            and self.is_contiguous == other.is_contiguous
        )


def empty(
    shape: ShapeLike,
    dtype: DTypeLike = "float32",
    device: DeviceLike = cpu(0),  # noqa: B008 - Device is immutable
    mem_scope: str | None = None,
) -> NDArray:
    """A new array of uninitialised memory, 64-byte aligned.

    Parameters
    ----------
    shape
        Dimensions; an int for 1-D.
    dtype
        Element type, e.g. ``"float32"``.
    device
        Where to allocate (default ``cpu(0)``).
    mem_scope
        Memory scope; only the default (``None``/``"global"``) is supported.
    """
    if mem_scope not in (None, "", "global"):
        raise InvalidArgumentError(f"memory scope {mem_scope!r} is not supported; only 'global' is")
    dev = _as_device(device)
    dt = DataType(dtype)
    shp = as_shape(shape)
    nbytes = math.prod(shp) * dt.itemsize
    storage = get_device_api(dev).alloc(dev, nbytes, ALLOC_ALIGNMENT)
    if storage.host is not None:
        view = storage.host.view(dt.numpy_dtype).reshape(numpy_shape(shp, dt))
        return NDArray.from_host_memory(view, dt, dev, storage)
    return NDArray.from_storage(storage, 0, shp, dt)


def array(
    arr: object,
    device: DeviceLike = cpu(0),  # noqa: B008 - Device is immutable
    mem_scope: str | None = None,
) -> NDArray:
    """A new array holding a copy of ``arr`` (numpy array, nested list, or NDArray)."""
    if isinstance(arr, NDArray):
        return arr.copyto(empty(arr.shape, arr.dtype, device, mem_scope))
    if not isinstance(arr, np.ndarray):
        arr = np.array(arr)
    assert isinstance(arr, np.ndarray)
    dtype = DataType(arr.dtype)
    return empty(arr.shape, dtype, device, mem_scope).copyfrom(arr)


def from_dlpack(dltensor: object) -> NDArray:
    """Wrap memory of any DLPack producer (numpy, torch, ...) without copying.

    Parameters
    ----------
    dltensor
        An object with ``__dlpack__``/``__dlpack_device__``, or a DLPack capsule (TVM's
        parameter name).
    """
    imported = import_tensor(dltensor)
    if imported.view is not None:
        dtype, dev = imported.dtype, imported.device
        return NDArray.from_host_memory(
            imported.view, dtype, dev, imported.owner, imported.byte_offset
        )
    assert imported.storage is not None
    nd = NDArray.from_storage(
        imported.storage, imported.byte_offset, imported.shape, imported.dtype
    )
    nd._owner = imported.owner  # the storage stays alive through nd
    return nd


def to_dlpack_capsule(
    nd: NDArray,
    stream: int | None = None,
    max_version: tuple[int, int] | None = None,
    dl_device: tuple[int, int] | None = None,
    copy: bool | None = None,
) -> Any:
    """Export ``nd`` as a DLPack capsule sharing its memory (``NDArray.__dlpack__``).

    Parameters
    ----------
    nd
        The array to export.
    stream
        The consumer's stream; must be ``None`` or ``-1`` for CPU arrays. For other
        (host-backed) devices tvmrt synchronises the device first.
    max_version
        The highest DLPack version the consumer reads. ``(1, x)`` or higher gives a
        ``"dltensor_versioned"`` capsule; ``None`` or ``(0, x)`` a legacy ``"dltensor"``.
    dl_device
        ``(device_type, device_id)`` the consumer wants; another device than ``nd``'s
        needs ``copy=True``.
    copy
        ``True`` exports a copy (flagged ``IS_COPIED``); ``None`` or ``False`` never copy.

    Raises
    ------
    BufferError
        If the stream, device or array cannot be exported (a read-only array needs a
        versioned capsule, as in numpy).
    """
    dev = nd.device
    if stream is not None and stream != -1:
        if dev.device_type == DLDeviceType.kDLCPU:
            raise BufferError(f"stream must be None or -1 for an array on {dev}, got {stream!r}")
        get_device_api(dev).sync(dev)
    copied = False
    wanted = None if dl_device is None else (int(dl_device[0]), int(dl_device[1]))
    if wanted is not None and wanted != (dev.device_type, dev.device_id):
        target = Device(*wanted)
        if copy is not True:
            raise BufferError(
                f"array is on {dev}, not on the requested device {target}; "
                "pass copy=True to export a copy there"
            )
        try:
            nd, copied = nd.copyto(target), True
        except DeviceUnavailableError as exc:
            raise BufferError(f"cannot copy an array on {dev} to {target}: {exc}") from exc
    elif copy:
        nd, copied = nd.copyto(dev), True
    data = 0 if nd._storage is None or nd._np is not None else nd._storage.handle
    return export_capsule(
        nd._np, nd.shape, nd.dtype, nd.device, data, nd.byte_offset, nd, copied, max_version
    )


def _as_device(dev: DeviceLike) -> Device:
    return dev if isinstance(dev, Device) else device(dev)
