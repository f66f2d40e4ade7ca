"""DLPack import: take a producer's tensor over without copying (see :mod:`._dlpack`).

:func:`import_tensor` reads the capsule, checks device, dtype and layout, marks the capsule
consumed and returns the memory as a numpy view (host memory) or the tvmrt storage it
lies in (device memory), with the object that gives it back to the producer;
:func:`tvmrt.runtime.ndarray.from_dlpack` wraps that as an NDArray.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from tvmrt.error import ArgumentTypeError, ArrayError, DataTypeError
from tvmrt.runtime._ctypes_api import (
    DLDataType,
    DLManagedTensor,
    DLManagedTensorVersioned,
    DLTensor,
    DLTensorDeleter,
)
from tvmrt.runtime._dlpack import (
    CAPSULE_TYPE,
    DLPACK_VERSION,
    FLAG_IS_SUBBYTE_TYPE_PADDED,
    FLAG_READ_ONLY,
    FROM_DL_CODE,
    LEGACY,
    UNSUPPORTED_DL_CODES,
    USED_LEGACY,
    USED_VERSIONED,
    VERSIONED,
    capsule_name,
    capsule_pointer,
    is_subbyte,
    rename_capsule,
)
from tvmrt.runtime.device import MASK2STR, Device
from tvmrt.runtime.device_api import Storage, find_device_api, find_storage, get_device_api
from tvmrt.runtime.dtype import DataType

__all__ = ["ImportedTensor", "import_tensor"]


@dataclass(frozen=True)
class ImportedTensor:
    """A producer's tensor, taken over: where its memory is and what keeps it alive.

    Exactly one of ``view`` (host memory, as numpy; its shape has a trailing lanes
    dimension for vector dtypes) and ``storage`` (device memory tvmrt allocated) is set.
    """

    dtype: DataType
    device: Device
    shape: tuple[int, ...]
    byte_offset: int
    owner: object
    view: np.ndarray[Any, Any] | None
    storage: Storage | None


class _ProducerMemory:
    """An imported tensor's memory; calls the producer's deleter once, when collected.

    It exposes the memory as numpy's ``__array_interface__`` and is the innermost base of
    every numpy view of it, so the deleter runs after the last view and NDArray are gone.
    """

    __slots__ = ("__array_interface__", "_deleter", "_managed")

    __array_interface__: dict[str, Any]

    def __init__(self, managed: int, deleter: Any) -> None:
        self._managed = managed
        self._deleter = deleter

    def __del__(self) -> None:
        deleter, self._deleter = self._deleter, None
        if deleter:
            deleter(self._managed)


def import_tensor(obj: object) -> ImportedTensor:
    """Take the tensor of a DLPack producer (or capsule) over, without copying.

    Parameters
    ----------
    obj
        An object with ``__dlpack__`` (numpy, torch, tvmrt, any array-API library) or
        a ``"dltensor"``/``"dltensor_versioned"`` capsule.

    Returns
    -------
    ImportedTensor
        The memory (a numpy view, or tvmrt device storage) and its owner, which releases
        it to the producer once collected.

    Raises
    ------
    BufferError
        If the capsule was already consumed, its tensor lives on a device without a
        tvmrt backend, or its dtype or DLPack version is not supported.
    TypeError
        If ``obj`` is neither a DLPack producer nor a capsule.
    """
    capsule = _capsule_from(obj)
    name = capsule_name(capsule)
    if name in (USED_LEGACY, USED_VERSIONED):
        raise BufferError("DLPack capsule was already consumed; a capsule can be imported once")
    if name not in (LEGACY, VERSIONED):
        raise BufferError(
            f"capsule named {name!r} is not a DLPack capsule; "
            "expected 'dltensor' or 'dltensor_versioned'"
        )
    address = capsule_pointer(capsule, name)
    if name == VERSIONED:
        managed_v = DLManagedTensorVersioned.from_address(address)
        version = (managed_v.version.major, managed_v.version.minor)
        if version[0] != DLPACK_VERSION[0]:
            raise BufferError(
                f"DLPack capsule has version {version[0]}.{version[1]}; "
                f"tvmrt reads {DLPACK_VERSION[0]}.x"
            )
        tensor, flags, deleter = managed_v.dl_tensor, int(managed_v.flags), managed_v.deleter
    else:
        managed = DLManagedTensor.from_address(address)
        # Legacy producers (TVM) store sub-byte types one per byte.
        tensor, flags, deleter = managed.dl_tensor, FLAG_IS_SUBBYTE_TYPE_PADDED, managed.deleter
    dev = _import_device(tensor.device.device_type, tensor.device.device_id)
    dtype = _import_dtype(tensor.dtype, flags)
    shape, strides = _import_layout(tensor)
    if not get_device_api(dev).host_visible:
        return _import_device_tensor(capsule, name, tensor, dev, dtype, shape, strides)
    readonly = bool(flags & FLAG_READ_ONLY)
    used = USED_VERSIONED if name == VERSIONED else USED_LEGACY
    if not rename_capsule(capsule, used):  # pragma: no cover - needs a broken capsule
        raise BufferError("cannot mark the DLPack capsule as consumed")
    # From here the producer's memory is ours: the owner frees it even if wrapping fails.
    owner = _ProducerMemory(address, _detached(deleter))
    view = _view_memory(owner, tensor, dtype, shape, strides, readonly)
    return ImportedTensor(dtype, dev, shape, int(tensor.byte_offset), owner, view, None)


def _import_device_tensor(
    capsule: Any,
    name: bytes,
    tensor: DLTensor,
    dev: Device,
    dtype: DataType,
    shape: tuple[int, ...],
    strides: tuple[int, ...] | None,
) -> ImportedTensor:
    """A tensor in device memory: only memory a tvmrt backend allocated can be wrapped."""
    storage = find_storage(dev.device_type, int(tensor.data or 0))
    if storage is None:
        raise BufferError(
            f"cannot import a DLPack tensor in device memory on {dev}: its data handle "
            f"{int(tensor.data or 0):#x} is not memory tvmrt's {MASK2STR.get(dev.device_type)} "
            "backend allocated; copy the tensor to the CPU first"
        )
    step = 1
    for i in reversed(range(len(shape))):
        if strides is not None and shape[i] > 1 and strides[i] != step:
            raise BufferError(f"cannot import a strided tensor in device memory on {dev}")
        step *= shape[i]
    byte_offset = int(tensor.byte_offset)
    nbytes = math.prod(shape) * dtype.itemsize
    if byte_offset < 0 or byte_offset + nbytes > storage.nbytes:
        raise ArrayError(
            f"array of shape {shape} and dtype {dtype} at byte offset {byte_offset} "
            f"needs {nbytes} bytes, but the storage has {storage.nbytes}"
        )
    used = USED_VERSIONED if name == VERSIONED else USED_LEGACY
    if not rename_capsule(capsule, used):  # pragma: no cover - needs a broken capsule
        raise BufferError("cannot mark the DLPack capsule as consumed")
    address = capsule_pointer(capsule, used)
    if name == VERSIONED:
        deleter = DLManagedTensorVersioned.from_address(address).deleter
    else:
        deleter = DLManagedTensor.from_address(address).deleter
    owner = _ProducerMemory(address, _detached(deleter))
    return ImportedTensor(dtype, dev, shape, byte_offset, owner, None, storage)


def _detached(deleter: Any) -> Any:
    """A copy of a deleter field that does not read the producer's struct when called."""
    address = ctypes.cast(deleter, ctypes.c_void_p).value
    return DLTensorDeleter(address) if address else None


def _capsule_from(obj: object) -> Any:
    if isinstance(obj, CAPSULE_TYPE):
        return obj
    export = getattr(obj, "__dlpack__", None)
    if export is None:
        raise ArgumentTypeError(
            f"from_dlpack expects an object with __dlpack__ or a DLPack capsule, "
            f"got {type(obj).__name__!r}"
        )
    device_of = getattr(obj, "__dlpack_device__", None)
    if device_of is not None:  # refuse early, before the producer prepares an export
        dev_type, dev_id = device_of()
        _import_device(int(dev_type), int(dev_id))
    try:
        return export(max_version=DLPACK_VERSION)
    except TypeError:  # a producer that predates versioned capsules
        return export()


def _import_device(device_type: int, device_id: int) -> Device:
    if find_device_api(device_type) is None:
        name = MASK2STR.get(device_type, f"device type {device_type}")
        raise BufferError(
            f"cannot import a DLPack tensor on {name}({device_id}): tvmrt has no "
            f"host-accessible backend for {name!r}; copy the tensor to the CPU first"
        )
    return Device(device_type, device_id)


def _import_dtype(dl: DLDataType, flags: int) -> DataType:
    code, bits, lanes = int(dl.code), int(dl.bits), int(dl.lanes)
    described = f"DLPack dtype (code={code}, bits={bits}, lanes={lanes})"
    if code in UNSUPPORTED_DL_CODES:
        raise BufferError(f"{described} is {UNSUPPORTED_DL_CODES[code]}, which tvmrt has not")
    if code in FROM_DL_CODE:
        if bits != 8:
            raise BufferError(f"{described}: float8 must have 8 bits")
        code = FROM_DL_CODE[code]
    elif code not in (0, 1, 2, 3, 4, 5, 6):
        raise BufferError(f"{described} has an unknown type code")
    if lanes < 1:
        raise BufferError(f"{described} has no lanes")
    try:
        dtype = DataType.from_code(code, bits, lanes)
        dtype.numpy_dtype  # noqa: B018 - raises DataTypeError when numpy has no storage type
    except DataTypeError as exc:
        raise BufferError(f"{described} is not supported: {exc}") from exc
    if is_subbyte(dtype) and not flags & FLAG_IS_SUBBYTE_TYPE_PADDED:
        raise BufferError(
            f"{described} is packed several to a byte; tvmrt stores one element per byte"
        )
    return dtype


def _import_layout(tensor: DLTensor) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Shape and strides (in elements) of a DLTensor; compact strides when it has none."""
    ndim = int(tensor.ndim)
    if ndim < 0 or (ndim > 0 and not tensor.shape):
        raise BufferError(f"DLPack tensor has ndim {ndim} but no valid shape")
    shape = tuple(int(tensor.shape[i]) for i in range(ndim))
    if any(d < 0 for d in shape):
        raise BufferError(f"DLPack tensor has a negative dimension in shape {shape}")
    if tensor.strides:
        return shape, tuple(int(tensor.strides[i]) for i in range(ndim))
    strides = [1] * ndim
    for i in range(ndim - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    return shape, tuple(strides)


def _view_memory(
    owner: _ProducerMemory,
    tensor: DLTensor,
    dtype: DataType,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    readonly: bool,
) -> np.ndarray[Any, Any]:
    """A numpy view of the tensor's memory whose base chain ends at ``owner``."""
    itemsize = dtype.itemsize
    byte_strides = tuple(s * itemsize for s in strides)
    first = (tensor.data or 0) + int(tensor.byte_offset)
    if math.prod(shape) == 0:
        low = extent = 0
    else:  # bytes before and after the first element that some element touches
        low = sum(s * (n - 1) for n, s in zip(shape, byte_strides, strict=True) if s < 0)
        high = sum(s * (n - 1) for n, s in zip(shape, byte_strides, strict=True) if s > 0)
        extent = high - low + itemsize
    owner.__array_interface__ = {
        "data": (first + low, readonly),
        "shape": (extent,),
        "typestr": "|u1",
        "version": 3,
    }
    memory = np.asarray(owner)
    lane = dtype.numpy_dtype
    if dtype.lanes > 1:
        shape, byte_strides = (*shape, dtype.lanes), (*byte_strides, lane.itemsize)
    try:
        view: np.ndarray[Any, Any] = np.ndarray(
            shape, lane, buffer=memory, offset=-low, strides=byte_strides
        )
    except (TypeError, ValueError) as exc:
        raise BufferError(f"cannot view DLPack tensor memory as {dtype}{list(shape)}") from exc
    return view
