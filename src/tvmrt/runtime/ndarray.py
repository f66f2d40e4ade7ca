"""``NDArray``: a tensor in device memory, with TVM's API and DLPack exchange.

An NDArray is device storage (:class:`~tvmrt.runtime.device_api.Storage`) + a byte offset
+ a shape + a dtype. Arrays in host memory (the CPU) also keep a numpy view of their
bytes, so host access is zero-copy (views: ``_create_view``, TVM's ``CreateView``; the
``DLTensor`` compiled kernels read: :meth:`NDArray.dltensor`);
arrays in device memory move through their backend's copy hooks. Memory is 64-byte
aligned when tvmrt allocates it (compiled kernels require that). Arrays made from another
framework's memory (:func:`from_dlpack`) keep that memory and its alignment; the graph
executor checks alignment wherever a kernel would see it.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np

from tvmrt.error import ArgumentTypeError, ArrayError, DeviceUnavailableError, InvalidArgumentError
from tvmrt.runtime._ctypes_api import DLDataType, DLDevice, DLTensor
from tvmrt.runtime._deprecate import warn_deprecated
from tvmrt.runtime._transfer import copy_between, copy_numpy_into
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
from tvmrt.runtime.device_api import ALLOC_ALIGNMENT, Storage, get_device_api
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
    "as_shape",
    "numpy_shape",
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


_A = TypeVar("_A", bound="NDArray")

ShapeLike = Sequence[int] | int


def as_shape(shape: ShapeLike) -> tuple[int, ...]:
    """``shape`` (an int for 1-D) as a tuple of non-negative ints."""
    if type(shape) is tuple and all(type(d) is int and d >= 0 for d in shape):
        return shape  # numpy's own shapes: every nd.array asks
    dims = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    out = []
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int | np.integer):
            raise ArgumentTypeError(f"shape {shape!r}: dimension {d!r} is not an integer")
        if d < 0:
            raise InvalidArgumentError(f"shape {shape!r}: dimension {d} is negative")
        out.append(int(d))
    return tuple(out)


# tvmrt numbers float8 types after DLPack's bool (6); TVM v0.19 used 6 and 7 for them.
_TVM_LEGACY_CODES: dict[int, int] = {DataTypeCode.E4M3_FLOAT8: 6, DataTypeCode.E5M2_FLOAT8: 7}


def numpy_shape(shape: tuple[int, ...], dtype: DataType) -> tuple[int, ...]:
    """The numpy shape of an array of ``dtype``: lanes become a trailing dimension."""
    return (*shape, dtype.lanes) if dtype.lanes > 1 else shape


class NDArray:
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

    __slots__ = (
        "__weakref__",
        "_byte_offset",
        "_c",
        "_device",
        "_dl",
        "_dtype",
        "_np",
        "_owner",
        "_shape",
        "_storage",
    )

    _np: np.ndarray[Any, Any] | None  # the bytes as numpy, for host memory only
    _storage: Storage | None  # None for host memory another framework owns
    _shape: tuple[int, ...]
    _dtype: DataType
    _device: Device
    _byte_offset: int
    _owner: object
    _dl: tuple[DLTensor, Any] | None
    # the C runtime's array over these bytes (native_module.py: made when the array is
    # first passed to it, False where it cannot view them), or None
    _c: object

    @classmethod
    def from_host_memory(
        cls: type[_A],
        view: np.ndarray[Any, Any],
        dtype: DataType,
        dev: Device,
        owner: object = None,
        byte_offset: int = 0,
    ) -> _A:
        """An array over a numpy view of host memory, without copying.

        ``view``'s shape has a trailing lanes dimension for vector dtypes; ``owner`` (the
        memory's owner) is kept alive with the array; ``byte_offset`` is the DLTensor's.
        """
        self = object.__new__(cls)
        self._np = view
        self._dtype = dtype
        self._device = dev
        self._owner = owner
        self._byte_offset = byte_offset
        self._dl = None
        self._c = None
        self._shape = view.shape[:-1] if dtype.lanes > 1 else view.shape
        self._storage = owner if isinstance(owner, Storage) else None
        return self

    @classmethod
    def from_storage(
        cls: type[_A], storage: Storage, byte_offset: int, shape: tuple[int, ...], dtype: DataType
    ) -> _A:
        """A dense array over ``storage`` from ``byte_offset`` (a numpy view if host memory).

        Raises
        ------
        ArrayError
            If the array does not fit in the storage.
        """
        nbytes = math.prod(shape) * dtype.itemsize
        if byte_offset < 0 or byte_offset + nbytes > storage.nbytes:
            raise ArrayError(
                f"array of shape {shape} and dtype {dtype} at byte offset {byte_offset} "
                f"needs {nbytes} bytes, but the storage has {storage.nbytes}"
            )
        if storage.host is not None:
            raw = storage.host[byte_offset : byte_offset + nbytes]
            view = raw.view(dtype.numpy_dtype).reshape(numpy_shape(shape, dtype))
            return cls.from_host_memory(view, dtype, storage.device, storage)
        self = object.__new__(cls)
        self._np = None
        self._dtype = dtype
        self._device = storage.device
        self._owner = storage
        self._storage = storage
        self._byte_offset = byte_offset
        self._shape = shape
        self._dl = None
        self._c = None
        return self

    def _device_storage(self) -> Storage:
        assert self._storage is not None
        return self._storage

    def _host(self, what: str) -> np.ndarray[Any, Any]:
        """The numpy view of host memory; ArrayError for device memory."""
        if self._np is None:
            raise ArrayError(
                f"{what}: the array is in device memory on {self._device}, which has no "
                "numpy view; use numpy() to copy it to the host"
            )
        return self._np

    # -- properties ------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """Shape as a tuple of ints (lanes of vector dtypes are not a dimension)."""
        return self._shape

    @property
    def dtype(self) -> DataType:
        """Element type (a ``str`` subclass: ``arr.dtype == "float32"``)."""
        return self._dtype

    @property
    def device(self) -> Device:
        """The device holding the data."""
        return self._device

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def byte_offset(self) -> int:
        """Offset in bytes of the first element from the DLTensor's ``data`` pointer."""
        return self._byte_offset

    @property
    def host_view(self) -> np.ndarray[Any, Any] | None:
        """The numpy view of this array's host memory; ``None`` in device memory (tvmrt).

        :meth:`numpy_view` is the same view, raising for device memory instead.
        """
        return self._np

    @property
    def storage(self) -> Storage | None:
        """The allocation this array lies in (tvmrt); ``None`` for host memory another
        framework owns (an array made by :func:`from_dlpack`)."""
        return self._storage

    @property
    def is_contiguous(self) -> bool:
        """Whether elements are laid out densely in row-major order."""
        return self._np is None or bool(self._np.flags.c_contiguous)

    @property
    def nbytes(self) -> int:
        """Size of the data in bytes (TVM's ``GetDataSize``)."""
        return math.prod(self.shape) * self._dtype.itemsize

    @property
    def data_ptr(self) -> int:
        """Address of the first element (``data + byte_offset``; a token in device memory)."""
        if self._np is None:
            return self._device_storage().handle + self._byte_offset
        return int(self._np.ctypes.data)

    def _create_view(
        self: _A, shape: ShapeLike, dtype: DTypeLike | None = None, relative_byte_offset: int = 0
    ) -> _A:
        """A view of this (contiguous) array's memory with another shape and dtype."""
        if not self.is_contiguous:
            raise ArrayError("cannot create a view of a non-contiguous NDArray")
        new_dtype = self._dtype if dtype is None else DataType(dtype)
        new_shape = as_shape(shape)
        nbytes = math.prod(new_shape) * new_dtype.itemsize
        if relative_byte_offset < 0 or relative_byte_offset + nbytes > self.nbytes:
            raise ArrayError(  # TVM's words (NDArray::CreateView)
                f"View with shape {list(new_shape)} and datatype {new_dtype} would have a size "
                f"of {nbytes} bytes.  This would occupy bytes {relative_byte_offset} <= i_byte < "
                f"{relative_byte_offset + nbytes} within the backing array.  However, the "
                f"NDArray being viewed only contains {self.nbytes} bytes (shape = "
                f"{list(self.shape)}, dtype= {self._dtype})."
            )
        if self._np is None:  # device memory: same storage, offset moved (TVM's CreateView)
            start = self._byte_offset + relative_byte_offset
            return type(self).from_storage(self._device_storage(), start, new_shape, new_dtype)
        flat = self._np.reshape(-1).view(np.uint8)
        raw = np.ndarray((nbytes,), np.uint8, buffer=flat, offset=relative_byte_offset)
        view = raw.view(new_dtype.numpy_dtype).reshape(numpy_shape(new_shape, new_dtype))
        owner = self if self._owner is None else self._owner
        return type(self).from_host_memory(view, new_dtype, self._device, owner, self._byte_offset)

    @property
    def is_view(self) -> bool:
        """Whether this array borrows a caller's ``DLTensor`` (one handed to a Python
        function), nothing keeping its memory alive, as TVM's ``is_view``; an array of its
        own, a ``_create_view`` of one (which keeps its parent alive) or a DLPack import is
        not."""
        return self._owner is None and self._storage is None

    # -- C view for compiled kernels ---------------------------------------------------
    @property
    def _tvm_handle(self) -> int:
        """The address of this array's ``DLTensor`` (TVM's handle value; a
        ``register_extension`` class hands it on), valid while the array lives."""
        return ctypes.addressof(self.dltensor())

    def dltensor(self) -> DLTensor:
        """This array as a ``DLTensor`` for compiled kernels (tvmrt).

        Cached: the same structure (and its shape and strides arrays) while the NDArray
        is alive.
        """
        if self._dl is None:
            shape = self.shape
            ndim = len(shape)
            shape_arr = (ctypes.c_int64 * max(ndim, 1))(*shape)
            strides_arr = None
            if self._np is not None and not self.is_contiguous:
                step = self._np.itemsize * self._dtype.lanes
                strides_arr = (ctypes.c_int64 * max(ndim, 1))(
                    *(s // step for s in self._np.strides[:ndim])
                )
            dtype = self._dtype
            # TVM v0.19's own codes (kernels compare dtypes exactly); tvm-ffi re-encodes bool
            code = _TVM_LEGACY_CODES.get(dtype.type_code, dtype.type_code)
            if self._np is None:
                data = self._device_storage().handle
            else:
                data = self.data_ptr - self._byte_offset
            dl = DLTensor(
                data=data,
                device=DLDevice(self._device.device_type, self._device.device_id),
                ndim=ndim,
                dtype=DLDataType(code, dtype.bits, dtype.lanes),
                shape=ctypes.cast(shape_arr, ctypes.POINTER(ctypes.c_int64)),
                strides=None
                if strides_arr is None
                else ctypes.cast(strides_arr, ctypes.POINTER(ctypes.c_int64)),
                byte_offset=self._byte_offset,
            )
            self._dl = (dl, (shape_arr, strides_arr))
        return self._dl[0]

    def _adopt_dltensor(self, template: DLTensor, keep: Any, data: int) -> DLTensor:
        """Give this dense array a copy of ``template`` pointing at ``data``.

        ``template`` is the ``DLTensor`` of an earlier dense array of the same shape, dtype
        and device (its shape array held alive by ``keep``): the Relay VM reuses them per
        allocation site instead of building new ones for every array.
        """
        dl = DLTensor.from_buffer_copy(template)
        dl.data = data
        dl.byte_offset = self._byte_offset
        self._dl = (dl, keep)
        return dl

    # -- TVM's API ------------------------------------------------------------------

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
