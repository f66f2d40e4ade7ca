"""DLPack exchange in both directions, without copying.

Export (:func:`to_dlpack_capsule`, behind ``NDArray.__dlpack__``)
    numpy's own exporter builds the ``DLManagedTensor(Versioned)`` over a numpy view of
    the NDArray and supplies the capsule destructor and the deleter, both native code.
    tvmrt then rewrites what numpy cannot know: the device, the dtype (bfloat16, float8,
    vector lanes, sub-byte integers, handles) and the flags. The view numpy holds until
    the deleter runs is a private ndarray subclass that references the NDArray, so the
    NDArray and its memory stay alive for as long as the consumer uses them.

    Why not a capsule destructor written with ``ctypes``: a consumer that rejects a
    capsule (numpy refuses bfloat16 and vector dtypes, for example) drops it while its
    own exception is set. A ctypes callback cannot run in that state: the consumer's
    exception is replaced by ``SystemError`` and the deleter never runs. Native
    destructors have no such problem.

Import (:func:`from_dlpack`)
    The capsule's tensor is wrapped as a numpy view over the producer's memory (any
    strides, including negative ones, zero-size and 0-d tensors, and ``byte_offset``).
    The view's base is a :class:`_ProducerMemory`, which calls the producer's deleter
    exactly once, when the last view of the memory is gone.

dtype encoding
    * ``bool`` is exported as ``(code=6 kDLBool, bits=8)``, which numpy and torch read;
      TVM v0.19's own ``(1, 1)`` is what :class:`DataType` stores. Both import as
      ``"bool"``.
    * ``bfloat16`` is code 4. ``e4m3_float8`` and ``e5m2_float8`` are exported as
      DLPack 1.1's ``kDLFloat8_e4m3fn`` (10) and ``kDLFloat8_e5m2`` (12) and imported
      from those codes; DLPack's other float8/6/4 codes (7-9, 11, 13-17) have no tvmrt
      equivalent and are refused.
    * Sub-byte integers (``int4``...) take one byte per element, as in TVM; versioned
      capsules say so with the ``IS_SUBBYTE_TYPE_PADDED`` flag.
"""

from __future__ import annotations

import ctypes
import datetime
import math
from typing import Any

import numpy as np

from tvmrt.error import ArgumentTypeError, DataTypeError, DeviceUnavailableError
from tvmrt.runtime._ctypes_api import (
    DLDataType,
    DLDevice,
    DLManagedTensor,
    DLManagedTensorVersioned,
    DLTensor,
    DLTensorDeleter,
)
from tvmrt.runtime.device import MASK2STR, Device, DLDeviceType
from tvmrt.runtime.device_api import find_device_api, find_storage, get_device_api
from tvmrt.runtime.dtype import DataType, DataTypeCode
from tvmrt.runtime.ndarray import NDArray

__all__ = ["DLPACK_VERSION", "to_dlpack_capsule", "from_dlpack"]

# The highest DLPack version tvmrt understands (1.1: float8 codes, sub-byte padding flag).
DLPACK_VERSION = (1, 1)

# DLManagedTensorVersioned.flags
FLAG_READ_ONLY = 1 << 0
FLAG_IS_COPIED = 1 << 1
FLAG_IS_SUBBYTE_TYPE_PADDED = 1 << 2

# Capsule names. The consumer renames a capsule it took so the producer's destructor
# leaves the tensor alone; PyCapsule_SetName keeps the pointer, so these live forever.
_LEGACY = b"dltensor"
_VERSIONED = b"dltensor_versioned"
_USED_LEGACY = b"used_dltensor"
_USED_VERSIONED = b"used_dltensor_versioned"

# DLPack 1.1 codes of the float8 formats tvmrt has, and names of those it has not.
_DL_FLOAT8_E4M3FN = 10
_DL_FLOAT8_E5M2 = 12
_TO_DL_CODE: dict[int, int] = {
    DataTypeCode.E4M3_FLOAT8: _DL_FLOAT8_E4M3FN,
    DataTypeCode.E5M2_FLOAT8: _DL_FLOAT8_E5M2,
}
_FROM_DL_CODE = {v: k for k, v in _TO_DL_CODE.items()}
_UNSUPPORTED_DL_CODES = {
    7: "float8_e3m4",
    8: "float8_e4m3",
    9: "float8_e4m3b11fnuz",
    11: "float8_e4m3fnuz",
    13: "float8_e5m2fnuz",
    14: "float8_e8m0fnu",
    15: "float6_e2m3fn",
    16: "float6_e3m2fn",
    17: "float4_e2m1fn",
}

_CAPSULE_TYPE: type = type(datetime.datetime_CAPI)


def _pyapi(name: str, restype: Any, *argtypes: Any) -> Any:
    # Private prototypes: configuring ctypes.pythonapi.X itself would be shared state.
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


_capsule_get_name = _pyapi("PyCapsule_GetName", ctypes.c_char_p, ctypes.py_object)
_capsule_get_pointer = _pyapi(
    "PyCapsule_GetPointer", ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p
)
_capsule_set_name = _pyapi("PyCapsule_SetName", ctypes.c_int, ctypes.py_object, ctypes.c_char_p)


# -- export ------------------------------------------------------------------------------


class _ExportedView(np.ndarray):
    """The numpy view a capsule's manager holds; ``_tvmrt_source`` keeps the NDArray alive."""

    _tvmrt_source: NDArray


def to_dlpack_capsule(
    nd: NDArray,
    stream: int | None = None,
    max_version: tuple[int, int] | None = None,
    dl_device: tuple[int, int] | None = None,
    copy: bool | None = None,
) -> Any:
    """Export ``nd`` as a DLPack capsule sharing its memory.

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

    Returns
    -------
    object
        A ``PyCapsule``.

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
    if dl_device is not None and (int(dl_device[0]), int(dl_device[1])) != (
        dev.device_type,
        dev.device_id,
    ):
        target = Device(int(dl_device[0]), int(dl_device[1]))
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
    capsule = _numpy_capsule(nd, max_version)
    _rewrite_exported(capsule, nd, copied)
    return capsule


def _numpy_capsule(nd: NDArray, max_version: tuple[int, int] | None) -> Any:
    if nd._np is None:  # device memory: numpy builds the structs over a stand-in view
        np_dtype = nd.dtype.numpy_dtype
        shape = (*nd.shape, nd.dtype.lanes) if nd.dtype.lanes > 1 else nd.shape
        view = np.lib.stride_tricks.as_strided(
            np.zeros(1, np_dtype), shape, (0,) * len(shape), writeable=True
        )
    else:
        view = nd.numpy_view()
    if view.dtype.isbuiltin != 1:  # ml_dtypes' bfloat16/float8: export the raw bits
        view = view.view(f"u{view.dtype.itemsize}")
    exported = view.view(_ExportedView)
    exported._tvmrt_source = nd
    if max_version is None:
        return exported.__dlpack__()
    try:
        return exported.__dlpack__(max_version=(int(max_version[0]), int(max_version[1])))
    except TypeError:  # numpy < 2.1 only makes legacy capsules, which the standard allows
        return exported.__dlpack__()


def _rewrite_exported(capsule: Any, nd: NDArray, copied: bool) -> None:
    """Fix the device, dtype, lanes and flags of a capsule numpy made for ``nd``."""
    name = _capsule_get_name(capsule)
    address = _capsule_get_pointer(capsule, name)
    tensor: DLTensor
    if name == _VERSIONED:
        managed = DLManagedTensorVersioned.from_address(address)
        tensor = managed.dl_tensor
        if copied:
            managed.flags |= FLAG_IS_COPIED
        if _is_subbyte(nd.dtype):
            managed.flags |= FLAG_IS_SUBBYTE_TYPE_PADDED
    else:
        tensor = DLManagedTensor.from_address(address).dl_tensor
    dev = nd.device
    tensor.device = DLDevice(dev.device_type, dev.device_id)
    tensor.dtype = DLDataType(*_dlpack_dtype(nd.dtype))
    if nd._np is None:  # point the stand-in at the device memory, dense row-major
        tensor.data = nd._device_storage().handle
        tensor.byte_offset = nd.byte_offset
        if tensor.strides:
            step = 1
            for i in reversed(range(tensor.ndim)):
                tensor.strides[i] = step
                step *= int(tensor.shape[i])
    lanes = nd.dtype.lanes
    if lanes > 1:  # numpy saw the lanes as a trailing dimension of scalars
        ndim = tensor.ndim - 1
        if tensor.strides:
            if tensor.strides[ndim] != 1 or any(tensor.strides[i] % lanes for i in range(ndim)):
                raise BufferError(f"cannot export a {nd.dtype} array whose lanes are strided")
            for i in range(ndim):
                tensor.strides[i] //= lanes
        tensor.ndim = ndim


def _dlpack_dtype(dtype: DataType) -> tuple[int, int, int]:
    code, bits = dtype.type_code, dtype.bits
    if code == DataTypeCode.UINT and bits == 1:
        return int(DataTypeCode.BOOL), 8, dtype.lanes
    return _TO_DL_CODE.get(code, code), bits, dtype.lanes


def _is_subbyte(dtype: DataType) -> bool:
    return dtype.bits < 8 and not (dtype.type_code == DataTypeCode.UINT and dtype.bits == 1)


# -- import ------------------------------------------------------------------------------


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


def from_dlpack(obj: object) -> NDArray:
    """Wrap the memory of a DLPack producer as an NDArray without copying.

    Parameters
    ----------
    obj
        An object with ``__dlpack__`` (numpy, torch, tvmrt, any array-API library) or
        a ``"dltensor"``/``"dltensor_versioned"`` capsule.

    Returns
    -------
    NDArray
        Shares memory with ``obj``; keeps it alive, and releases it to the producer once
        neither the NDArray nor any view of it remains.

    Raises
    ------
    BufferError
        If the capsule was already consumed, its tensor lives on a device without a
        tvmrt backend, or its dtype or DLPack version is not supported.
    TypeError
        If ``obj`` is neither a DLPack producer nor a capsule.
    """
    capsule = _capsule_from(obj)
    name = _capsule_get_name(capsule)
    if name in (_USED_LEGACY, _USED_VERSIONED):
        raise BufferError("DLPack capsule was already consumed; a capsule can be imported once")
    if name not in (_LEGACY, _VERSIONED):
        raise BufferError(
            f"capsule named {name!r} is not a DLPack capsule; "
            "expected 'dltensor' or 'dltensor_versioned'"
        )
    address = _capsule_get_pointer(capsule, name)
    if name == _VERSIONED:
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
    used = _USED_VERSIONED if name == _VERSIONED else _USED_LEGACY
    if _capsule_set_name(capsule, used) != 0:  # pragma: no cover - needs a broken capsule
        raise BufferError("cannot mark the DLPack capsule as consumed")
    # From here the producer's memory is ours: the owner frees it even if wrapping fails.
    owner = _ProducerMemory(address, _detached(deleter))
    view = _view_memory(owner, tensor, dtype, shape, strides, readonly)
    return NDArray._wrap(view, dtype, dev, owner, int(tensor.byte_offset))


def _import_device_tensor(
    capsule: Any,
    name: bytes,
    tensor: DLTensor,
    dev: Device,
    dtype: DataType,
    shape: tuple[int, ...],
    strides: tuple[int, ...] | None,
) -> NDArray:
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
    nd = NDArray._from_storage(storage, int(tensor.byte_offset), shape, dtype)
    used = _USED_VERSIONED if name == _VERSIONED else _USED_LEGACY
    if _capsule_set_name(capsule, used) != 0:  # pragma: no cover - needs a broken capsule
        raise BufferError("cannot mark the DLPack capsule as consumed")
    address = _capsule_get_pointer(capsule, used)
    if name == _VERSIONED:
        deleter = DLManagedTensorVersioned.from_address(address).deleter
    else:
        deleter = DLManagedTensor.from_address(address).deleter
    nd._owner = _ProducerMemory(address, _detached(deleter))  # storage stays alive via nd
    return nd


def _detached(deleter: Any) -> Any:
    """A copy of a deleter field that does not read the producer's struct when called."""
    address = ctypes.cast(deleter, ctypes.c_void_p).value
    return DLTensorDeleter(address) if address else None


def _capsule_from(obj: object) -> Any:
    if isinstance(obj, _CAPSULE_TYPE):
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
    if code in _UNSUPPORTED_DL_CODES:
        raise BufferError(f"{described} is {_UNSUPPORTED_DL_CODES[code]}, which tvmrt has not")
    if code in _FROM_DL_CODE:
        if bits != 8:
            raise BufferError(f"{described}: float8 must have 8 bits")
        code = _FROM_DL_CODE[code]
    elif code not in (0, 1, 2, 3, 4, 5, 6):
        raise BufferError(f"{described} has an unknown type code")
    if lanes < 1:
        raise BufferError(f"{described} has no lanes")
    try:
        dtype = DataType.from_code(code, bits, lanes)
        dtype.numpy_dtype  # noqa: B018 - raises DataTypeError when numpy has no storage type
    except DataTypeError as exc:
        raise BufferError(f"{described} is not supported: {exc}") from exc
    if _is_subbyte(dtype) and not flags & FLAG_IS_SUBBYTE_TYPE_PADDED:
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
