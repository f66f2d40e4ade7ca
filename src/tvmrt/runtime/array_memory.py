"""An array's memory: storage + byte offset + shape + dtype, with its numpy and C views.

:class:`ArrayMemory` is the part of :class:`~tvmrt.runtime.ndarray.NDArray` that says
where the bytes are: device storage (:class:`~tvmrt.runtime.device_api.Storage`) and an
offset in it, a shape and a dtype; for host memory also a numpy view of the bytes, so
host access is zero-copy. It makes views (``_create_view``, TVM's ``CreateView``) and the
``DLTensor`` compiled kernels read. NDArray adds TVM's API on top (copies, numpy, DLPack).
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np

from tvmrt.error import ArgumentTypeError, ArrayError, InvalidArgumentError
from tvmrt.runtime._ctypes_api import DLDataType, DLDevice, DLTensor
from tvmrt.runtime.device import Device
from tvmrt.runtime.device_api import Storage
from tvmrt.runtime.dtype import DataType, DataTypeCode, DTypeLike

__all__ = ["ArrayMemory", "ShapeLike", "as_shape", "numpy_shape"]

_A = TypeVar("_A", bound="ArrayMemory")

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


class ArrayMemory:
    """Where an array's bytes are: storage, byte offset, shape, dtype, device.

    Not made directly: :meth:`from_host_memory` and :meth:`from_storage` build one (of the
    class they are called on, an NDArray in practice).
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
