"""Data types: TVM's dtype strings, DLPack ``(code, bits, lanes)`` triples and numpy dtypes."""

from __future__ import annotations

import enum
import re
from typing import Any, ClassVar

import numpy as np

from tvmrt.error import DataTypeError, ReadOnlyError

__all__ = ["DataType", "DataTypeCode", "DTypeLike", "ItemSize"]


class DataTypeCode(enum.IntEnum):
    """Type codes: DLPack's (``DLDataTypeCode``) up to bool, then tvmrt's for float8.

    TVM v0.19 numbered ``e4m3_float8``/``e5m2_float8`` 6 and 7, which DLPack later gave
    to bool and other float8 kinds; tvmrt keeps one meaning per number and converts at
    the edges (DLTensors for legacy kernels, DLPack export).
    """

    INT = 0
    UINT = 1
    FLOAT = 2
    HANDLE = 3
    BFLOAT = 4
    COMPLEX = 5
    BOOL = 6
    E4M3_FLOAT8 = 7
    E5M2_FLOAT8 = 8


_BASES = {
    "int": DataTypeCode.INT,
    "uint": DataTypeCode.UINT,
    "float": DataTypeCode.FLOAT,
    "handle": DataTypeCode.HANDLE,
    "bfloat": DataTypeCode.BFLOAT,
    "complex": DataTypeCode.COMPLEX,
}
_DEFAULT_BITS = {"int": 32, "uint": 32, "float": 32, "handle": 64, "bfloat": 16, "complex": 64}
_PATTERN = re.compile(r"^(int|uint|float|handle|bfloat|complex)(\d*)(?:x(\d+))?$")
# v0.19's names; TVM 0.20 and later call the same two formats float8_e4m3fn/float8_e5m2
_FLOAT8 = {
    "e4m3_float8": DataTypeCode.E4M3_FLOAT8,
    "e5m2_float8": DataTypeCode.E5M2_FLOAT8,
    "float8_e4m3fn": DataTypeCode.E4M3_FLOAT8,
    "float8_e5m2": DataTypeCode.E5M2_FLOAT8,
}


def _optional_ml_dtypes() -> Any:
    try:
        import ml_dtypes
    except ImportError:  # optional extra 'dtypes'
        return None
    return ml_dtypes


_ML_DTYPES = _optional_ml_dtypes()


def _storage_numpy_dtype(code: int, bits: int) -> np.dtype[Any]:
    """Numpy dtype holding one scalar lane; raises DataTypeError when numpy has none."""
    if code == DataTypeCode.INT:
        if bits in (8, 16, 32, 64):
            return np.dtype(f"int{bits}")
        if bits in (1, 4):  # sub-byte ints take one byte per element (TVM's layout)
            return np.dtype("int8")
    elif code == DataTypeCode.UINT:
        if bits == 1:
            return np.dtype("bool")
        if bits in (8, 16, 32, 64):
            return np.dtype(f"uint{bits}")
        if bits == 4:
            return np.dtype("uint8")
    elif code == DataTypeCode.FLOAT and bits in (16, 32, 64):
        return np.dtype(f"float{bits}")
    elif code == DataTypeCode.BOOL and bits == 8:
        return np.dtype("bool")
    elif code == DataTypeCode.BFLOAT and bits == 16:
        return np.dtype(_ML_DTYPES.bfloat16) if _ML_DTYPES else np.dtype("uint16")
    elif code == DataTypeCode.E4M3_FLOAT8 and bits == 8:
        return np.dtype(_ML_DTYPES.float8_e4m3fn) if _ML_DTYPES else np.dtype("uint8")
    elif code == DataTypeCode.E5M2_FLOAT8 and bits == 8:
        return np.dtype(_ML_DTYPES.float8_e5m2) if _ML_DTYPES else np.dtype("uint8")
    elif code == DataTypeCode.COMPLEX and bits in (64, 128):
        return np.dtype(f"complex{bits}")
    elif code == DataTypeCode.HANDLE and bits == 64:
        return np.dtype("uint64")
    raise DataTypeError(f"dtype (code={code}, bits={bits}) has no numpy equivalent")


class ItemSize(int):
    """Bytes per element: an ``int`` that may also be called, so that TVM v0.19's
    ``dtype.itemsize()`` (a method there) and ``dtype.itemsize`` (tvmrt's property, and
    numpy's) read the same number."""

    __slots__ = ()

    def __call__(self) -> int:
        return int(self)


class DataType(str):
    """A TVM dtype: a ``str`` (``"float32"``) that also knows its DLPack encoding.

    Parameters
    ----------
    type_str
        A dtype string (``"float32"``, ``"int8"``, ``"bool"``, ``"bfloat16"``,
        ``"float32x4"``, ``"e4m3_float8"``), a numpy dtype, or another DataType (TVM's
        parameter name).

    Examples
    --------
    >>> t = DataType("float32x4")
    >>> (t.type_code, t.bits, t.lanes, t.itemsize)
    (2, 32, 4, 16)
    >>> t == "float32x4"
    True

    DataTypes are interned and immutable: ``t.lanes = 1`` (TVM's idiom for the scalar
    type) raises :class:`~tvmrt.error.ReadOnlyError`; use ``t.with_lanes(1)``.
    """

    type_code: int
    bits: int
    lanes: int

    _cache: ClassVar[dict[str, DataType]] = {}

    def __new__(cls, type_str: DTypeLike) -> DataType:
        if isinstance(type_str, DataType):
            return type_str
        if isinstance(type_str, np.dtype):  # every nd.array(numpy) asks: no name parsing
            found = _NUMPY_DTYPES.get(type_str)
            if found is None:
                found = _NUMPY_DTYPES.setdefault(type_str, cls(_from_numpy_name(type_str)))
            return found
        key = type_str if isinstance(type_str, str) else _from_numpy_name(type_str)
        cached = cls._cache.get(key)
        if cached is not None:
            return cached
        code, bits, lanes = _parse(key)
        self = super().__new__(cls, _format(code, bits, lanes))
        object.__setattr__(self, "type_code", int(code))
        object.__setattr__(self, "bits", bits)
        object.__setattr__(self, "lanes", lanes)
        object.__setattr__(self, "_itemsize", ItemSize((bits + 7) // 8 * lanes))
        cls._cache[key] = self
        return self

    @classmethod
    def from_code(cls, type_code: int, bits: int, lanes: int = 1) -> DataType:
        """Build a DataType from a DLPack ``(code, bits, lanes)`` triple.

        The tvm-ffi encoding of bool, ``(6, 8, 1)``, maps to ``"bool"`` like TVM's own
        ``(1, 1, 1)``.
        """
        if type_code == DataTypeCode.BOOL and bits == 8:
            type_code, bits = DataTypeCode.UINT, 1
        name = _format(int(type_code), int(bits), int(lanes))
        return cls(name)

    @property
    def itemsize(self) -> int:
        """Bytes per element as tvmrt stores it: ``ceil(bits / 8) * lanes``.

        Also callable, as TVM v0.19's method: ``t.itemsize() == t.itemsize`` (an
        :class:`ItemSize`; typed ``int`` so that arithmetic on it stays ``int``).
        """
        itemsize: ItemSize = self.__dict__["_itemsize"]
        return itemsize

    @property
    def numpy_dtype(self) -> np.dtype[Any]:
        """The numpy dtype of one lane (``uint16`` for bfloat16 without ml_dtypes)."""
        return _storage_numpy_dtype(self.type_code, self.bits)

    def with_lanes(self, lanes: int) -> DataType:
        """The same element type with ``lanes`` lanes (``float32x4`` -> ``float32``)."""
        return DataType.from_code(self.type_code, self.bits, lanes)

    def __setattr__(self, name: str, value: object) -> None:
        raise ReadOnlyError(
            f"DataType {str(self)!r} is immutable (instances are shared); cannot set {name!r}: "
            f"use with_lanes() or DataType.from_code(type_code, bits, lanes) for a new type"
        )

    def __delattr__(self, name: str) -> None:
        raise ReadOnlyError(f"DataType {str(self)!r} is immutable; cannot delete {name!r}")

    def __repr__(self) -> str:
        return f"DataType({str(self)!r})"

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (DataType, (str(self),))


DTypeLike = DataType | str | np.dtype[Any] | type

_NUMPY_DTYPES: dict[np.dtype[Any], DataType] = {}


def _from_numpy_name(dtype: object) -> str:
    try:
        np_dtype = np.dtype(dtype)  # type: ignore[call-overload]
    except TypeError as exc:
        raise DataTypeError(f"cannot interpret {dtype!r} as a dtype") from exc
    if np_dtype == np.bool_:
        return "bool"
    if _ML_DTYPES is not None:
        for name, ml in (
            ("bfloat16", "bfloat16"),
            ("e4m3_float8", "float8_e4m3fn"),
            ("e5m2_float8", "float8_e5m2"),
        ):
            if np_dtype == np.dtype(getattr(_ML_DTYPES, ml)):
                return name
    if np_dtype.kind in "iufc":
        return str(np_dtype.name)
    raise DataTypeError(f"numpy dtype {np_dtype} has no TVM equivalent")


def _parse(text: str) -> tuple[int, int, int]:
    if text == "bool":
        return DataTypeCode.UINT, 1, 1
    if text in ("", "void"):
        return DataTypeCode.HANDLE, 0, 0
    base, sep, lanes_text = text.partition("x")
    if base in _FLOAT8:
        lanes = int(lanes_text) if sep and lanes_text.isdigit() else 1
        if sep and not lanes_text.isdigit():
            raise DataTypeError(f"unknown type {text!r}")
        return _FLOAT8[base], 8, lanes
    match = _PATTERN.match(text)
    if match is None:
        raise DataTypeError(
            f"unknown type {text!r}; expected e.g. 'float32', 'int8', 'uint1', 'bool', "
            "'bfloat16' or 'float32x4'"
        )
    name, bits_text, lanes_text = match.groups()
    bits = int(bits_text) if bits_text else _DEFAULT_BITS[name]
    lanes = int(lanes_text) if lanes_text else 1
    if not 0 < bits < 256 or not 0 < lanes < 65536:
        raise DataTypeError(f"type {text!r} has bits or lanes out of range")
    return _BASES[name], bits, lanes


def _format(code: int, bits: int, lanes: int) -> str:
    if code == DataTypeCode.UINT and bits == 1 and lanes == 1:
        return "bool"
    if code == DataTypeCode.HANDLE and bits == 0 and lanes == 0:
        return "void"  # TVM v0.19's DataType.__repr__
    if code == DataTypeCode.HANDLE and bits == 64 and lanes == 1:
        return "handle"
    if code in (DataTypeCode.E4M3_FLOAT8, DataTypeCode.E5M2_FLOAT8):
        base = "e4m3_float8" if code == DataTypeCode.E4M3_FLOAT8 else "e5m2_float8"
        return base if lanes == 1 else f"{base}x{lanes}"
    names = {v: k for k, v in _BASES.items()}
    if code not in names:
        raise DataTypeError(f"unknown dtype code {code} (bits={bits}, lanes={lanes})")
    base = f"{names[DataTypeCode(code)]}{bits}"
    return base if lanes == 1 else f"{base}x{lanes}"
