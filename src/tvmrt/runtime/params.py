"""TVM's params format: ``save_param_dict`` / ``load_param_dict`` and its tensor records.

A params blob is ``u64 list magic, u64 reserved, vector<string> names, u64 count, count x
tensor record`` (TVM's ``SaveParams`` in ``src/runtime/file_utils.cc``); a tensor record,
TVM's single-array format, is described in :mod:`tvmrt.runtime.tensor_record` (whose
helpers this module re-exports). Everything is little-endian. :func:`save_param_dict`
writes exactly the bytes TVM v0.19 writes for the same dict.

The blob helpers (:func:`read_named_ndarrays`, :func:`read_param_dict`,
:func:`write_param_dict`) work on a :class:`~tvmrt.binfmt.stream.ByteReader` /
``ByteWriter`` so other parsers (the module blob, the executor factory) can embed the
same records.

Decisions where TVM is lenient or ambiguous:

* Bytes after the last tensor are ignored, as TVM does.
* A name that occurs twice keeps the last tensor (TVM's Map does the same); the dict
  keeps the position of the first occurrence.
* A name may hold a NUL byte, as TVM's ``std::string`` may (libtvmrt_runtime, whose names
  are C strings, refuses such a blob rather than read the name cut short).
* dtype codes follow one TVM era per blob (``dtype_codes``, see
  :data:`~tvmrt.runtime.tensor_record.DtypeCodes`). The default is TVM v0.19's table, the
  API tvmrt mirrors: bool is ``(1, 1)`` and float8 ``e4m3_float8``/``e5m2_float8`` are codes
  6/7. ``dtype_codes="ffi"`` reads and writes TVM >= 0.21's DLPack 1.x codes (bool
  ``(6, 8)``, ``float8_e4m3fn`` 10, ``float8_e5m2`` 12). A code the chosen table does not
  give a type tvmrt has is refused, naming the code; it is never read as another type.
* Stricter than TVM: truncated data is an error for every tensor (TVM skips the check for
  scalars and empty tensors); vector dtypes (``lanes > 1``) are rejected on read and on
  save because ``data_byte_size`` ignores lanes; at most :data:`MAX_NDIM` dimensions.
* Every malformed input raises :class:`~tvmrt.error.ParamsFormatError` naming the field
  and its byte offset, before any allocation that a size field would drive.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from tvmrt.binfmt.files import MAX_PARAMS_BYTES, PARAMS_LIST_MAGIC, open_regular
from tvmrt.binfmt.stream import ByteReader, ByteWriter
from tvmrt.error import ArgumentTypeError, ParamsFormatError
from tvmrt.runtime.dtype import DataType
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.tensor_record import (
    DTYPE_CODES,
    MAX_NDIM,
    NDARRAY_MAGIC,
    DtypeCodes,
    TensorRecord,
    host_data,
    read_ndarray,
    read_record,
    write_ndarray,
    write_record,
)

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
    "blob_view",
    "mapped_file",
    "write_ndarray",
    "read_named_ndarrays",
    "read_param_dict",
    "read_param_names",
    "write_param_dict",
]

NDARRAY_LIST_MAGIC = PARAMS_LIST_MAGIC  # kTVMNDArrayListMagic (binfmt/files.py)


# -- reading -------------------------------------------------------------------------------
def read_named_ndarrays(
    reader: ByteReader, names: Sequence[str], codes: DtypeCodes = "legacy"
) -> dict[str, NDArray]:
    """Read ``len(names)`` tensor records; the i-th belongs to ``names[i]`` (last one wins).

    For containers that store names and records separately (the params blob, the
    executor factory's ``SaveToBinary``).
    """
    result: dict[str, NDArray] = {}
    for name in names:
        result[name] = read_ndarray(reader, name, codes)
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


def read_param_dict(reader: ByteReader, codes: DtypeCodes = "legacy") -> dict[str, NDArray]:
    """Read a whole params blob at the reader's position; bytes after it are left.

    Raises
    ------
    ParamsFormatError
        (The reader's error class.) On any malformed or truncated input.
    """
    return read_named_ndarrays(reader, _read_header(reader), codes)


def iter_param_records(
    param_bytes: bytes | bytearray | memoryview, codes: DtypeCodes = "legacy"
) -> Iterator[TensorRecord]:
    """Yield the tensor records of a params blob one by one, without copying any data.

    For loading straight into existing memory (the graph executor's ``load_params``): a
    record is checked completely before it is yielded, and a malformed record raises
    when it is reached.

    Raises
    ------
    ParamsFormatError
        If the blob is malformed or truncated.
    """
    reader = ByteReader(blob_view(param_bytes), "params blob", ParamsFormatError)
    for name in _read_header(reader):
        yield read_record(reader, name, codes)


@contextlib.contextmanager
def mapped_file(path: str | os.PathLike[str]) -> Iterator[memoryview]:
    """The bytes of ``path`` as a read-only memory map (nothing is read up front)."""
    handle, size = open_regular(path, "params file", MAX_PARAMS_BYTES, ParamsFormatError)
    with handle:
        if size == 0:
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
    return _read_header(ByteReader(blob_view(param_bytes), "params blob", ParamsFormatError))


def load_param_dict(
    param_bytes: bytes | bytearray | memoryview, *, dtype_codes: DtypeCodes = "legacy"
) -> dict[str, NDArray]:
    """Deserialise a params blob into CPU NDArrays, in file order.

    Parameters
    ----------
    param_bytes
        The blob (anything C-contiguous with the buffer protocol). The arrays are copies,
        so the buffer may be released afterwards.
    dtype_codes
        tvmrt's addition: the era of the blob's dtype codes. ``"legacy"`` (TVM <= 0.20,
        as TVM v0.19 reads: float8 e4m3/e5m2 are codes 6/7) or ``"ffi"`` (TVM >= 0.21,
        DLPack 1.x: 6 is bool, 10 ``float8_e4m3fn``, 12 ``float8_e5m2``).

    Returns
    -------
    dict
        Name to NDArray; a duplicated name keeps its last tensor.

    Raises
    ------
    ParamsFormatError
        If the blob is malformed or truncated, or a dtype code means no type tvmrt has
        in ``dtype_codes``' table; the message gives the byte offset.
    TypeError
        If ``param_bytes`` is a ``str`` or has no buffer interface.

    Examples
    --------
    >>> blob = save_param_dict({"w": np.ones(2, "float32")})
    >>> load_param_dict(blob)["w"].numpy()
    array([1., 1.], dtype=float32)
    """
    return _load(param_bytes, "params blob", dtype_codes)


def load_param_dict_from_file(
    path: str | os.PathLike[str], *, dtype_codes: DtypeCodes = "legacy"
) -> dict[str, NDArray]:
    """Read a ``.params`` file written by :func:`save_param_dict_to_file` (or TVM).

    ``dtype_codes`` is :func:`load_param_dict`'s.

    Raises
    ------
    ParamsFormatError
        If the file's contents are malformed; the message names the file.
    """
    with mapped_file(path) as data:  # tensors are copied out; the file is never read whole
        return _load(data, f"params file {os.fspath(path)!r}", dtype_codes)


def _load(param_bytes: object, what: str, codes: object) -> dict[str, NDArray]:
    return read_param_dict(
        ByteReader(blob_view(param_bytes), what, ParamsFormatError), _checked_codes(codes)
    )


def _checked_codes(codes: object) -> DtypeCodes:
    if codes == "legacy":
        return "legacy"
    if codes == "ffi":
        return "ffi"
    raise ArgumentTypeError(f"dtype_codes is {codes!r}, expected one of {DTYPE_CODES}")


def blob_view(param_bytes: object) -> memoryview:
    """A params blob (bytes, bytearray, or anything with the buffer protocol) as a
    C-contiguous memoryview; a str or a non-buffer is refused in load_param_dict's words."""
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
def write_param_dict(
    writer: ByteWriter, params: Mapping[str, object], codes: DtypeCodes = "legacy"
) -> None:
    """Append a whole params blob for ``params``, names in insertion order.

    Values that are not NDArrays (numpy arrays, lists, scalars) are converted with numpy.

    Raises
    ------
    TypeError
        If ``params`` is not a mapping, a name is not a ``str`` or a value is not array-like.
    DataTypeError
        If a value's dtype cannot be stored (vector, or no TVM equivalent).
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
        records.append(host_data(value, name))
    writer.u64(NDARRAY_LIST_MAGIC)
    writer.u64(0)
    writer.u64(len(encoded))
    for raw_name in encoded:
        writer.string(raw_name)
    writer.u64(len(records))
    for dtype, data in records:
        write_record(writer, dtype, data, codes)


def save_param_dict(
    params: Mapping[str, object], *, dtype_codes: DtypeCodes = "legacy"
) -> bytearray:
    """Serialise ``params`` into TVM's params format, names in the dict's order.

    Every tensor record is byte-identical to TVM v0.19's, and so is the whole blob when
    the dict is in TVM's order (``save_param_dict(load_param_dict(b)) == b`` for a blob
    TVM wrote). TVM itself writes its ``Map``'s iteration order, which depends on hashes
    and heap addresses (README, "Where tvmrt differs").

    Parameters
    ----------
    params
        Name to array; values that are not NDArrays are converted with numpy first.
    dtype_codes
        tvmrt's addition: ``"legacy"`` writes TVM v0.19's dtype codes, ``"ffi"`` TVM >=
        0.21's (see :func:`load_param_dict`).

    Returns
    -------
    bytearray
        The blob; :func:`load_param_dict` reads it back.

    Raises
    ------
    DataTypeError
        If a dtype cannot be stored (vector dtypes, numpy types TVM lacks).
    TypeError
        If a name is not a ``str`` or a value is not array-like.

    Examples
    --------
    >>> blob = save_param_dict({"x": np.array([1.0, 2.0], dtype="float32")})
    >>> len(blob), bytes(blob[:8]).hex()
    (97, 'b79c04054f8de5f7')
    """
    writer = ByteWriter()
    write_param_dict(writer, params, _checked_codes(dtype_codes))
    return writer.buffer


def save_param_dict_to_file(
    params: Mapping[str, object],
    path: str | os.PathLike[str],
    *,
    dtype_codes: DtypeCodes = "legacy",
) -> None:
    """Serialise ``params`` (see :func:`save_param_dict`) and write it to ``path``."""
    blob = save_param_dict(params, dtype_codes=dtype_codes)
    with open(path, "wb") as f:
        f.write(blob)


# -- TVM's global functions ----------------------------------------------------------------
