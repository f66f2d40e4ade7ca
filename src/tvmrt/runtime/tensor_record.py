"""TVM's tensor record: one array as TVM saves it (``NDArray::Save``), inside params blobs too.

A record is ``u64 magic, u64 reserved, DLDevice, i32 ndim, DLDataType, ndim x i64 shape,
i64 data_byte_size, raw bytes``, all little-endian (TVM's ``include/tvm/runtime/ndarray.h``,
``NDArray::Save``). :func:`read_record` checks one completely without copying it;
:func:`write_ndarray` writes exactly TVM v0.19's bytes. The params blob
(:mod:`tvmrt.runtime.params`), the module blob and the executor factories embed records.
"""

from __future__ import annotations

import math
import struct
import sys
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from tvmrt.binfmt.stream import ByteReader, ByteWriter
from tvmrt.error import ArgumentTypeError, DataTypeError
from tvmrt.runtime._dlpack import FROM_DL_CODE, UNSUPPORTED_DL_CODES, dlpack_dtype
from tvmrt.runtime.device import DLDeviceType, cpu
from tvmrt.runtime.dtype import DataType, DataTypeCode
from tvmrt.runtime.ndarray import NDArray, empty

__all__ = [
    "NDARRAY_MAGIC",
    "MAX_NDIM",
    "TensorRecord",
    "read_record",
    "read_ndarray",
    "write_ndarray",
    "write_record",
    "host_data",
    "check_savable",
    "file_dtype",
    "DtypeCodes",
    "DTYPE_CODES",
]

DtypeCodes = Literal["legacy", "ffi"]
"""Which TVM era's dtype codes a record uses.

``"legacy"``: TVM <= 0.20 (``include/tvm/runtime/data_type.h``): bool is ``(1, 1)``; 6 and 7
are float8 (v0.19's ``kE4M3Float``/``kE5M2Float``, v0.20's ``kFloat8_e4m3fn``/``kFloat8_e5m2``,
the same two formats); 8 is v0.20's ``kFloat4_e2m1fn``. ``"ffi"``: TVM >= 0.21, DLPack 1.x
(6 bool, 7 e3m4, 8 e4m3, 9 e4m3b11fnuz, 10 e4m3fn, 11 e4m3fnuz, 12 e5m2, 13 e5m2fnuz, ...).
"""
DTYPE_CODES: tuple[DtypeCodes, ...] = ("legacy", "ffi")

NDARRAY_MAGIC = 0xDD5E40F096B4A13F  # kTVMNDArrayMagic, include/tvm/runtime/ndarray.h
MAX_NDIM = 32
"""Most dimensions a tensor record may have (numpy 1.x's limit; TVM sets none)."""

_CPU = int(DLDeviceType.kDLCPU)
# file code -> tvmrt's code, for codes past DLPack's complex (5); the rest are refused
_LEGACY_TO_TVMRT = {6: DataTypeCode.E4M3_FLOAT8, 7: DataTypeCode.E5M2_FLOAT8}
_TVMRT_TO_LEGACY: dict[int, int] = {v: k for k, v in _LEGACY_TO_TVMRT.items()}
_LEGACY_UNSUPPORTED = {8: "float4_e2m1fn (TVM 0.20)"}
_FIRST_ERA_CODE = 6  # codes below mean the same in both tables
_MAGIC_HEAD = struct.Struct("<QQ")  # magic, reserved
_TENSOR_HEAD = struct.Struct("<iiiBBH")  # device type, device id, ndim, dtype code/bits/lanes
_RECORD_HEAD = struct.Struct("<QQiiiBBH")  # both, for writing
_I64 = struct.Struct("<q")
_BIG_ENDIAN_HOST = sys.byteorder == "big"
_dtype_cache: dict[tuple[str, int, int, int], DataType] = {}


@dataclass(frozen=True)
class TensorRecord:
    """One tensor record, parsed and checked but not copied: ``data`` views the input."""

    name: str
    dtype: DataType
    shape: tuple[int, ...]
    data: memoryview

    def copy_into(self, target: np.ndarray[Any, Any]) -> None:
        """Copy the data into ``target`` (a writable array of exactly ``len(data)`` bytes)."""
        if self.data.nbytes:
            dst = target.reshape(-1)
            dst.view(np.uint8)[...] = np.frombuffer(self.data, dtype=np.uint8)
            if _BIG_ENDIAN_HOST:  # pragma: no cover - the file is little-endian
                dst.byteswap(inplace=True)


def read_record(
    reader: ByteReader, name: str | None = None, codes: DtypeCodes = "legacy"
) -> TensorRecord:
    """Parse one tensor record  without copying its data.

    Parameters
    ----------
    reader
        Positioned at the record's magic; left just after its data.
    name
        The tensor's name, used in error messages only.
    codes
        The era of the dtype codes (:data:`DtypeCodes`).

    Raises
    ------
    ParamsFormatError
        (The reader's error class.) Bad magic, a device other than CPU, a bad ndim,
        shape or dtype, a ``data_byte_size`` that disagrees with the shape, or
        truncated input.
    """
    label = "tensor" if name is None else f"tensor {name!r}"
    start = reader.offset
    # Fields are read in groups (one bounds check each); offsets in messages are exact.
    magic, _ = _MAGIC_HEAD.unpack(reader.raw(16, f"{label} magic and reserved field"))
    if magic != NDARRAY_MAGIC:
        raise reader.fail(f"{label} magic is {magic:#018x}, expected {NDARRAY_MAGIC:#018x}", start)
    head = reader.raw(16, f"{label} device, ndim and dtype")
    device_type, _, ndim, code, bits, lanes = _TENSOR_HEAD.unpack(head)
    if device_type != _CPU:
        raise reader.fail(
            f"{label} has device type {device_type}, expected {_CPU} (CPU): "
            "tensors are always saved as CPU tensors",
            start + 16,
        )
    if not 0 <= ndim <= MAX_NDIM:
        raise reader.fail(f"{label} has ndim {ndim}, expected 0 to {MAX_NDIM}", start + 24)
    dtype = _dtype_cache.get((codes, code, bits, lanes)) or _record_dtype(
        reader, label, (code, bits, lanes), codes
    )
    shape_at = start + 32
    *shape, nbytes = struct.unpack(
        f"<{ndim + 1}q", reader.raw(8 * ndim + 8, f"{label} shape and data_byte_size")
    )
    for i, dim in enumerate(shape):
        if dim < 0:
            raise reader.fail(f"{label} has shape[{i}] = {dim}, expected >= 0", shape_at + 8 * i)
    count = math.prod(shape)
    expected = count * dtype.itemsize
    if nbytes != expected:
        raise reader.fail(
            f"{label} has data_byte_size {nbytes}, expected {expected} "
            f"(shape {shape} x {dtype.itemsize} bytes of {dtype})",
            shape_at + 8 * ndim,
        )
    if nbytes > reader.remaining:
        raise reader.fail(
            f"truncated: {label} data needs {nbytes} bytes but only {reader.remaining} remain",
            reader.offset,
        )
    if count == 0 and math.prod(d for d in shape if d) * dtype.itemsize > sys.maxsize:
        raise reader.fail(f"{label} shape {shape} is too large for numpy", shape_at)
    data = reader.raw(nbytes, f"{label} data")
    return TensorRecord(name or "", dtype, tuple(shape), data)


def read_ndarray(
    reader: ByteReader, name: str | None = None, codes: DtypeCodes = "legacy"
) -> NDArray:
    """Read one tensor record  into a new 64-byte aligned CPU NDArray.

    Everything is checked (see :func:`read_record`) before anything is allocated.
    """
    record = read_record(reader, name, codes)
    arr = empty(record.shape, record.dtype)
    record.copy_into(arr.numpy_view())
    return arr


def _record_dtype(
    reader: ByteReader, label: str, triple: tuple[int, int, int], codes: DtypeCodes
) -> DataType:
    """The DataType of a record's ``(code, bits, lanes)``, validated (and then cached)."""
    at = reader.offset - 4  # the dtype is the last field of the 16 bytes just read
    code, bits, lanes = triple
    shown = f"(code={code}, bits={bits}, lanes={lanes})"
    if lanes != 1:
        raise reader.fail(
            f"{label} has dtype {shown}, expected lanes=1: vector dtypes cannot be stored "
            "in the params format (data_byte_size ignores lanes)",
            at,
        )
    era = "TVM <= 0.20" if codes == "legacy" else "TVM >= 0.21 (DLPack 1.x)"
    if code >= _FIRST_ERA_CODE:
        known = _LEGACY_TO_TVMRT if codes == "legacy" else FROM_DL_CODE
        unsupported = _LEGACY_UNSUPPORTED if codes == "legacy" else UNSUPPORTED_DL_CODES
        if codes == "ffi" and code == DataTypeCode.BOOL and bits == 8:
            code, bits = DataTypeCode.UINT, 1
        elif code in known and bits == 8:
            code = known[code]
        elif code in unsupported:
            raise reader.fail(
                f"{label} has dtype {shown}: code {code} is {unsupported[code]} in {era}'s "
                "table, which tvmrt does not support",
                at,
            )
        else:
            raise reader.fail(
                f"{label} has dtype {shown}: code {code} is no {bits}-bit type in {era}'s "
                "table of dtype codes",
                at,
            )
    try:
        dtype = DataType.from_code(code, bits, lanes)
        dtype.numpy_dtype  # noqa: B018 - raises DataTypeError when numpy cannot hold it
    except DataTypeError as exc:
        raise reader.fail(f"{label} has unsupported dtype {shown}: {exc}", at) from exc
    _dtype_cache[codes, triple[0], triple[1], triple[2]] = dtype
    return dtype


def file_dtype(dtype: DataType, codes: DtypeCodes = "legacy") -> tuple[int, int, int]:
    """The ``(code, bits, lanes)`` a record of ``dtype`` holds in ``codes``' era."""
    if codes == "ffi":
        return dlpack_dtype(dtype)
    code = _TVMRT_TO_LEGACY.get(dtype.type_code, dtype.type_code)
    return code, dtype.bits, dtype.lanes


def write_ndarray(writer: ByteWriter, arr: NDArray) -> None:
    """Append one tensor record  for ``arr``, byte-identical to TVM's.

    Arrays on other devices are copied to the host first; non-contiguous ones are
    written densely in row-major order.

    Raises
    ------
    DataTypeError
        If the dtype cannot be stored: vector dtypes (``lanes > 1``).
    """
    write_record(writer, *host_data(arr, None))


def write_record(
    writer: ByteWriter,
    dtype: DataType,
    data: np.ndarray[Any, Any],
    codes: DtypeCodes = "legacy",
) -> None:
    """Append the record of ``data``, a dense little-endian host array (see host_data)."""
    shape = data.shape
    flat = data.reshape(-1).view(np.uint8)
    writer.raw(_RECORD_HEAD.pack(NDARRAY_MAGIC, 0, _CPU, 0, len(shape), *file_dtype(dtype, codes)))
    if shape:
        writer.raw(struct.pack(f"<{len(shape)}q", *shape))
    writer.raw(_I64.pack(flat.size))
    writer.raw(flat.data)


def host_data(value: object, name: str | None) -> tuple[DataType, np.ndarray[Any, Any]]:
    """The dtype and a C-contiguous, little-endian host numpy array of ``value``'s data."""
    label = "value" if name is None else f"param {name!r}"
    if isinstance(value, NDArray):
        if value.device.device_type != _CPU:
            value = value.copyto(cpu(0))
        dtype = value.dtype
        check_savable(dtype, label)
        data = np.asarray(value.numpy_view(), order="C")
    else:
        try:
            data = np.asarray(value)
        except (TypeError, ValueError) as exc:
            raise ArgumentTypeError(
                f"{label}: cannot convert {type(value).__name__} to an array"
            ) from exc
        try:
            dtype = DataType(data.dtype)
        except DataTypeError as exc:
            raise DataTypeError(
                f"{label}: numpy dtype {data.dtype} has no TVM equivalent; "
                "expected a bool, int, uint, float or bfloat16 array"
            ) from exc
        check_savable(dtype, label)
        # one pass makes it contiguous and native-endian (a '>f4' input becomes '<f4')
        data = np.asarray(data, dtype=dtype.numpy_dtype, order="C")
    if _BIG_ENDIAN_HOST:  # pragma: no cover - the format is little-endian
        data = data.byteswap()
    return dtype, data


def check_savable(dtype: DataType, label: str) -> None:
    """Refuse dtypes the format cannot store: vector dtypes."""
    if dtype.lanes != 1:
        raise DataTypeError(
            f"{label} has vector dtype {str(dtype)!r}; the params format cannot round-trip "
            "vector dtypes (data_byte_size ignores lanes), expected lanes=1"
        )
