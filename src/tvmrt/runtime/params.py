"""TVM's params format: ``save_param_dict`` / ``load_param_dict`` and its tensor records.

A params blob (spec §4.2) is ``u64 list magic, u64 reserved, vector<string> names,
u64 count, count x tensor record``; a tensor record (§4.3, also TVM's single-array
format) is ``u64 magic, u64 reserved, DLDevice, i32 ndim, DLDataType, ndim x i64 shape,
i64 data_byte_size, raw bytes``. Everything is little-endian. :func:`save_param_dict`
writes exactly the bytes TVM v0.19 writes for the same dict.

The record helpers (:func:`read_ndarray`, :func:`write_ndarray`,
:func:`read_named_ndarrays`, :func:`read_param_dict`, :func:`write_param_dict`) work on
a :class:`~tvmrt.runtime._stream.ByteReader` / ``ByteWriter`` so other parsers (the
module blob, the executor factory) can embed the same records.

Decisions where TVM is lenient or ambiguous:

* Bytes after the last tensor are ignored, as TVM does.
* A name that occurs twice keeps the last tensor (TVM's Map does the same); the dict
  keeps the position of the first occurrence.
* bool is written as TVM v0.19 does, ``(code 1, bits 1)``; both that and tvm-ffi's
  ``(6, 8)`` are read as ``"bool"``.
* Stricter than TVM: truncated data is an error for every tensor (TVM skips the check for
  scalars and empty tensors); vector dtypes (``lanes > 1``) are rejected on read and on
  save because ``data_byte_size`` ignores lanes; float8 dtypes are rejected because their
  type codes differ between TVM versions (v0.19 writes e4m3 as code 6, which tvm-ffi uses
  for bool); at most :data:`MAX_NDIM` dimensions.
* Every malformed input raises :class:`~tvmrt.error.ParamsFormatError` naming the field
  and its byte offset, before any allocation that a size field would drive.
"""

from __future__ import annotations

import contextlib
import math
import mmap
import os
import struct
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tvmrt.error import ArgumentTypeError, DataTypeError, ParamsFormatError
from tvmrt.runtime._stream import ByteReader, ByteWriter
from tvmrt.runtime.device import DLDeviceType, cpu
from tvmrt.runtime.dtype import DataType, DataTypeCode
from tvmrt.runtime.ndarray import NDArray, empty

__all__ = [
    "save_param_dict",
    "load_param_dict",
    "save_param_dict_to_file",
    "load_param_dict_from_file",
    "NDARRAY_LIST_MAGIC",
    "NDARRAY_MAGIC",
    "MAX_NDIM",
    "read_ndarray",
    "read_record",
    "TensorRecord",
    "iter_param_records",
    "mapped_file",
    "write_ndarray",
    "read_named_ndarrays",
    "read_param_dict",
    "read_param_names",
    "write_param_dict",
]

NDARRAY_LIST_MAGIC = 0xF7E58D4F05049CB7  # kTVMNDArrayListMagic, src/runtime/file_utils.h
NDARRAY_MAGIC = 0xDD5E40F096B4A13F  # kTVMNDArrayMagic, include/tvm/runtime/ndarray.h
MAX_NDIM = 32
"""Most dimensions a tensor record may have (numpy 1.x's limit; TVM sets none)."""

_CPU = int(DLDeviceType.kDLCPU)
_FLOAT8_CODES = (DataTypeCode.E4M3_FLOAT8, DataTypeCode.E5M2_FLOAT8)
_MAGIC_HEAD = struct.Struct("<QQ")  # magic, reserved
_TENSOR_HEAD = struct.Struct("<iiiBBH")  # device type, device id, ndim, dtype code/bits/lanes
_RECORD_HEAD = struct.Struct("<QQiiiBBH")  # both, for writing
_I64 = struct.Struct("<q")
_BIG_ENDIAN_HOST = sys.byteorder == "big"
_dtype_cache: dict[tuple[int, int, int], DataType] = {}


# -- reading -------------------------------------------------------------------------------
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


def read_record(reader: ByteReader, name: str | None = None) -> TensorRecord:
    """Parse one tensor record (spec §4.3) without copying its data.

    Parameters
    ----------
    reader
        Positioned at the record's magic; left just after its data.
    name
        The tensor's name, used in error messages only.

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
    dtype = _dtype_cache.get((code, bits, lanes)) or _record_dtype(reader, label, code, bits, lanes)
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


def read_ndarray(reader: ByteReader, name: str | None = None) -> NDArray:
    """Read one tensor record (spec §4.3) into a new 64-byte aligned CPU NDArray.

    Everything is checked (see :func:`read_record`) before anything is allocated.
    """
    record = read_record(reader, name)
    arr = empty(record.shape, record.dtype)
    record.copy_into(arr.numpy_view())
    return arr


def _record_dtype(reader: ByteReader, label: str, code: int, bits: int, lanes: int) -> DataType:
    """The DataType of a record's ``(code, bits, lanes)``, validated (and then cached)."""
    at = reader.offset - 4  # the dtype is the last field of the 16 bytes just read
    triple = f"(code={code}, bits={bits}, lanes={lanes})"
    if lanes != 1:
        raise reader.fail(
            f"{label} has dtype {triple}, expected lanes=1: vector dtypes cannot be stored "
            "in the params format (data_byte_size ignores lanes)",
            at,
        )
    if code in _FLOAT8_CODES:
        raise reader.fail(
            f"{label} has dtype {triple}, a float8 code that means different types in "
            "different TVM versions; expected an int, uint, float, bfloat or bool dtype",
            at,
        )
    try:
        dtype = DataType.from_code(code, bits, lanes)
        dtype.numpy_dtype  # noqa: B018 - raises DataTypeError when numpy cannot hold it
    except DataTypeError as exc:
        raise reader.fail(f"{label} has unsupported dtype {triple}: {exc}", at) from exc
    _dtype_cache[code, bits, lanes] = dtype
    return dtype


def read_named_ndarrays(reader: ByteReader, names: Sequence[str]) -> dict[str, NDArray]:
    """Read ``len(names)`` tensor records; the i-th belongs to ``names[i]`` (last one wins).

    For containers that store names and records separately (the params blob, the
    executor factory's ``SaveToBinary``).
    """
    result: dict[str, NDArray] = {}
    for name in names:
        result[name] = read_ndarray(reader, name)
    return result


def _read_header(reader: ByteReader) -> list[str]:
    """Read a params blob up to its first tensor record; the names, checked against the count."""
    start = reader.offset
    magic = reader.u64("list magic")
    reader.u64("reserved field")
    if magic != NDARRAY_LIST_MAGIC:
        raise reader.fail(
            f"list magic is {magic:#018x}, expected {NDARRAY_LIST_MAGIC:#018x} "
            "(not a TVM params blob)",
            start,
        )
    names = reader.strings("names")
    at = reader.offset
    count = reader.u64("number of tensors")
    if count != len(names):
        raise reader.fail(f"number of tensors is {count}, expected {len(names)} (one per name)", at)
    return names


def read_param_dict(reader: ByteReader) -> dict[str, NDArray]:
    """Read a whole params blob (spec §4.2) at the reader's position; bytes after it are left.

    Raises
    ------
    ParamsFormatError
        (The reader's error class.) On any malformed or truncated input.
    """
    return read_named_ndarrays(reader, _read_header(reader))


def iter_param_records(param_bytes: bytes | bytearray | memoryview) -> Iterator[TensorRecord]:
    """Yield the tensor records of a params blob one by one, without copying any data.

    For loading straight into existing memory (the graph executor's ``load_params``): a
    record is checked completely before it is yielded, and a malformed record raises
    when it is reached.

    Raises
    ------
    ParamsFormatError
        If the blob is malformed or truncated.
    """
    reader = ByteReader(_as_view(param_bytes), "params blob", ParamsFormatError)
    for name in _read_header(reader):
        yield read_record(reader, name)


@contextlib.contextmanager
def mapped_file(path: str | os.PathLike[str]) -> Iterator[memoryview]:
    """The bytes of ``path`` as a read-only memory map (nothing is read up front)."""
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            yield memoryview(b"")
            return
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        view = memoryview(mapped)
        try:
            yield view
        finally:
            try:
                view.release()
                mapped.close()
            except BufferError:
                # slices are still referenced (e.g. by a traceback being raised): the
                # map closes when they are collected; never mask the original error
                pass


def read_param_names(param_bytes: bytes | bytearray | memoryview) -> list[str]:
    """The names of a params blob, in file order, without reading its tensors.

    What TVM's ``GraphExecutor::ShareParams`` reads: the header is checked (magic, names,
    tensor count equal to the number of names) but the tensor records are not.

    Raises
    ------
    ParamsFormatError
        If the header is malformed or truncated.
    TypeError
        If ``param_bytes`` is a ``str`` or has no buffer interface.
    """
    return _read_header(ByteReader(_as_view(param_bytes), "params blob", ParamsFormatError))


def load_param_dict(param_bytes: bytes | bytearray | memoryview) -> dict[str, NDArray]:
    """Deserialise a params blob into CPU NDArrays, in file order.

    Parameters
    ----------
    param_bytes
        The blob (anything C-contiguous with the buffer protocol). The arrays are copies,
        so the buffer may be released afterwards.

    Returns
    -------
    dict
        Name to NDArray; a duplicated name keeps its last tensor.

    Raises
    ------
    ParamsFormatError
        If the blob is malformed or truncated; the message gives the byte offset.
    TypeError
        If ``param_bytes`` is a ``str`` or has no buffer interface.

    Examples
    --------
    >>> blob = save_param_dict({"w": np.ones(2, "float32")})
    >>> load_param_dict(blob)["w"].numpy()
    array([1., 1.], dtype=float32)
    """
    return _load(param_bytes, "params blob")


def load_param_dict_from_file(path: str | os.PathLike[str]) -> dict[str, NDArray]:
    """Read a ``.params`` file written by :func:`save_param_dict_to_file` (or TVM).

    Raises
    ------
    ParamsFormatError
        If the file's contents are malformed; the message names the file.
    """
    with mapped_file(path) as data:  # tensors are copied out; the file is never read whole
        return _load(data, f"params file {os.fspath(path)!r}")


def _load(param_bytes: object, what: str) -> dict[str, NDArray]:
    return read_param_dict(ByteReader(_as_view(param_bytes), what, ParamsFormatError))


def _as_view(param_bytes: object) -> memoryview:
    if isinstance(param_bytes, str):
        raise ArgumentTypeError(
            "load_param_dict() needs the blob as bytes, bytearray or memoryview, not str; "
            "use load_param_dict_from_file() to read a file"
        )
    try:
        view = memoryview(param_bytes)  # type: ignore[arg-type]
    except TypeError:
        raise ArgumentTypeError(
            "load_param_dict() needs bytes, bytearray or memoryview, "
            f"got {type(param_bytes).__name__}"
        ) from None
    if not view.c_contiguous:
        view = memoryview(view.tobytes())
    return view


# -- writing -------------------------------------------------------------------------------
def write_ndarray(writer: ByteWriter, arr: NDArray) -> None:
    """Append one tensor record (spec §4.3) for ``arr``, byte-identical to TVM's.

    Arrays on other devices are copied to the host first; non-contiguous ones are
    written densely in row-major order.

    Raises
    ------
    DataTypeError
        If the dtype cannot be stored: vector (``lanes > 1``) or float8 dtypes.
    """
    _write_record(writer, *_host_data(arr, None))


def _write_record(writer: ByteWriter, dtype: DataType, data: np.ndarray[Any, Any]) -> None:
    shape = data.shape
    flat = data.reshape(-1).view(np.uint8)
    writer.raw(
        _RECORD_HEAD.pack(
            NDARRAY_MAGIC, 0, _CPU, 0, len(shape), dtype.type_code, dtype.bits, dtype.lanes
        )
    )
    if shape:
        writer.raw(struct.pack(f"<{len(shape)}q", *shape))
    writer.raw(_I64.pack(flat.size))
    writer.raw(flat.data)


def _host_data(value: object, name: str | None) -> tuple[DataType, np.ndarray[Any, Any]]:
    """The dtype and a C-contiguous, little-endian host numpy array of ``value``'s data."""
    label = "value" if name is None else f"param {name!r}"
    if isinstance(value, NDArray):
        if value.device.device_type != _CPU:
            value = value.copyto(cpu(0))
        dtype = value.dtype
        _check_savable(dtype, label)
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
        _check_savable(dtype, label)
        # one pass makes it contiguous and native-endian (a '>f4' input becomes '<f4')
        data = np.asarray(data, dtype=dtype.numpy_dtype, order="C")
    if _BIG_ENDIAN_HOST:  # pragma: no cover - the format is little-endian
        data = data.byteswap()
    return dtype, data


def _check_savable(dtype: DataType, label: str) -> None:
    if dtype.lanes != 1:
        raise DataTypeError(
            f"{label} has vector dtype {str(dtype)!r}; the params format cannot round-trip "
            "vector dtypes (data_byte_size ignores lanes), expected lanes=1"
        )
    if dtype.type_code in _FLOAT8_CODES:
        raise DataTypeError(
            f"{label} has dtype {str(dtype)!r}; float8 type codes differ between TVM "
            "versions, so the params format cannot store them unambiguously"
        )


def write_param_dict(writer: ByteWriter, params: Mapping[str, object]) -> None:
    """Append a whole params blob (spec §4.2) for ``params``, names in insertion order.

    Values that are not NDArrays (numpy arrays, lists, scalars) are converted with numpy.

    Raises
    ------
    TypeError
        If ``params`` is not a mapping, a name is not a ``str`` or a value is not array-like.
    DataTypeError
        If a value's dtype cannot be stored (vector, float8, or no TVM equivalent).
    ValueError
        If a name cannot be encoded as UTF-8 (a lone surrogate).
    """
    if not isinstance(params, Mapping):
        raise ArgumentTypeError(
            f"params must be a dict of name to array, got {type(params).__name__}"
        )
    encoded: list[bytes] = []
    records: list[tuple[DataType, np.ndarray[Any, Any]]] = []
    for name, value in params.items():
        if not isinstance(name, str):
            raise ArgumentTypeError(f"param name {name!r} is a {type(name).__name__}, expected str")
        try:
            encoded.append(name.encode("utf-8", errors="surrogateescape"))
        except UnicodeEncodeError as exc:
            raise ParamsFormatError(f"param name {name!r} cannot be encoded as UTF-8") from exc
        records.append(_host_data(value, name))
    writer.u64(NDARRAY_LIST_MAGIC)
    writer.u64(0)
    writer.u64(len(encoded))
    for raw_name in encoded:
        writer.string(raw_name)
    writer.u64(len(records))
    for dtype, data in records:
        _write_record(writer, dtype, data)


def save_param_dict(params: Mapping[str, object]) -> bytearray:
    """Serialise ``params`` into TVM's params format, names in the dict's order.

    Every tensor record is byte-identical to TVM v0.19's, and so is the whole blob when
    the dict is in TVM's order (``save_param_dict(load_param_dict(b)) == b`` for a blob
    TVM wrote). TVM itself writes its ``Map``'s iteration order, which depends on hashes
    and heap addresses (README, "Where tvmrt differs").

    Parameters
    ----------
    params
        Name to array; values that are not NDArrays are converted with numpy first.

    Returns
    -------
    bytearray
        The blob; :func:`load_param_dict` reads it back.

    Raises
    ------
    DataTypeError
        If a dtype cannot be stored (vector dtypes, float8, numpy types TVM lacks).
    TypeError
        If a name is not a ``str`` or a value is not array-like.

    Examples
    --------
    >>> blob = save_param_dict({"x": np.array([1.0, 2.0], dtype="float32")})
    >>> len(blob), bytes(blob[:8]).hex()
    (97, 'b79c04054f8de5f7')
    """
    writer = ByteWriter()
    write_param_dict(writer, params)
    return writer.buffer


def save_param_dict_to_file(params: Mapping[str, object], path: str | os.PathLike[str]) -> None:
    """Serialise ``params`` (see :func:`save_param_dict`) and write it to ``path``."""
    blob = save_param_dict(params)
    with open(path, "wb") as f:
        f.write(blob)


# -- TVM's global functions ----------------------------------------------------------------
