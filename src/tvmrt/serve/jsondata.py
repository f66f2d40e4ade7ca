"""Tensor data in JSON, both ways, refusing what does not fit instead of wrapping it.

Input rules (docs/serving.md, "Tensor data in JSON"):

* integers and ``BOOL`` take JSON integers in the datatype's range (``BOOL``: ``true``,
  ``false``, 0 or 1); a value out of range is refused naming it and the range, never
  wrapped (UINT8 ``300`` is not 44);
* floats take finite JSON numbers within the datatype's range. JSON has no NaN or
  Infinity: the bare tokens Python's parser accepts, and numbers that overflow to
  infinity (``1e309``), are refused; send non-finite values as binary data, which is
  taken as is;
* a body may hold at most the model's input elements plus :data:`SPARE_VALUES` JSON
  values (counted, before parsing, as its commas and brackets), so a request's parse
  costs memory in proportion to the model, not to whatever the client sends.

Output rule: finite floats are JSON numbers; NaN, +inf and -inf are the strings
``"NaN"``, ``"Infinity"`` and ``"-Infinity"``, so every answer is strict JSON (RFC 8259).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from tvmrt.error import InvalidArgumentError

__all__ = ["SPARE_VALUES", "short", "count_values", "array_from_json", "json_data"]

SPARE_VALUES = 4096
_SHORT = 80


def short(value: object, limit: int = _SHORT) -> str:
    """``repr(value)`` cut to ``limit`` characters, for error messages that echo input."""
    if isinstance(value, list) and len(value) > limit:  # never repr a huge list whole
        value = value[:limit]
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def count_values(raw: bytes | bytearray) -> int:
    """An upper bound on the values in a JSON text: its commas, brackets and braces, plus 1."""
    return raw.count(b",") + raw.count(b"[") + raw.count(b"{") + 1


def _flat(data: object) -> Iterator[object]:
    """The leaves of nested lists, row-major (an iterative walk: no recursion limit)."""
    stack: list[Iterator[object]] = [iter(data if isinstance(data, list) else [data])]
    while stack:
        for item in stack[-1]:
            if isinstance(item, list):
                stack.append(iter(item))
                break
            yield item
        else:
            stack.pop()


def _bad_value(name: str, datatype: str, dtype: np.dtype[Any], data: object) -> str:
    """The message for the first value of ``data`` that does not fit ``dtype``."""
    where = f"input {name!r} ({datatype})"
    for index, v in enumerate(_flat(data)):
        at = f"{where}: value {short(v)} at index {index}"
        if dtype.kind == "b":
            if type(v) is bool or (type(v) is int and v in (0, 1)):
                continue
            return f"{at} is not a boolean; expected true, false, 0 or 1"
        if type(v) is bool or not isinstance(v, (int, float)):
            return (
                f'input {name!r}: "data" must hold {datatype} numbers; value {short(v)} '
                f"at index {index} is not a number"
            )
        if dtype.kind in "iu":
            if type(v) is not int:
                return f"{at} is not an integer"
            info = np.iinfo(dtype)
            if not info.min <= v <= info.max:
                return f"{at} is out of range [{info.min}, {info.max}]"
            continue
        f = float(v)
        if f != f or f in (float("inf"), float("-inf")):
            return (
                f"{at} is not finite; JSON has no NaN or Infinity "
                "(send non-finite values as binary data)"
            )
        top = float(np.finfo(dtype).max)
        if abs(f) > top:
            return f"{at} is out of range [{-top:g}, {top:g}]"
    return f'{where}: "data" must hold {datatype} values'


def array_from_json(
    data: object, name: str, datatype: str, dtype: np.dtype[Any], shape: tuple[int, ...]
) -> np.ndarray[Any, Any]:
    """``data`` (flat or nested, row-major) as an array of ``dtype`` and ``shape``.

    Raises
    ------
    InvalidArgumentError
        A ``ValueError``, with the message to answer 400 with: ragged data, a wrong
        element count, or the first value (and its flat index) that is not of the
        datatype or not in its range.
    """
    try:
        arr = np.asarray(data)
    except (ValueError, TypeError, RecursionError):
        raise InvalidArgumentError(
            f'input {name!r}: "data" is not a regular (non-ragged) list'
        ) from None
    count = int(np.prod(shape, dtype=np.int64))
    if arr.size != count:
        raise InvalidArgumentError(
            f"input {name!r}: {arr.size} values, expected {count} for {list(shape)}"
        )
    if not _fits(arr, dtype):
        raise InvalidArgumentError(_bad_value(name, datatype, dtype, data))
    return arr.astype(dtype, copy=False).reshape(shape)


def _fits(arr: np.ndarray[Any, Any], dtype: np.dtype[Any]) -> bool:
    """Whether every value of a parsed JSON array converts to ``dtype`` exactly in range."""
    if arr.size == 0:
        return arr.dtype.kind in "biuf"
    kind = arr.dtype.kind
    if dtype.kind == "b":
        return kind == "b" or (kind in "iu" and int(arr.min()) >= 0 and int(arr.max()) <= 1)
    if dtype.kind in "iu":
        if kind not in "iu":  # floats, or ints past 64 bits that numpy made floats/objects
            return False
        info = np.iinfo(dtype)
        return info.min <= int(arr.min()) and int(arr.max()) <= info.max
    if kind not in "iuf":  # booleans, strings, objects
        return False
    wide = arr.astype(np.float64)
    if not np.isfinite(wide).all():
        return False
    return float(np.abs(wide).max()) <= float(np.finfo(dtype).max)


_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def json_data(arr: np.ndarray[Any, Any]) -> list[Any]:
    """An output's values for JSON: a flat list, non-finite floats as strings."""
    flat = arr.reshape(-1)
    values: list[Any] = flat.tolist()
    if flat.dtype.kind == "f":
        for i in np.flatnonzero(~np.isfinite(flat)).tolist():
            values[i] = _NON_FINITE[repr(float(flat[i]))]
    return values
