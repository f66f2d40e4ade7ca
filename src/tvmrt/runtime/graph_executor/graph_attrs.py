"""The ``attrs`` tables of a graph JSON, converted row by row into compact, shared values.

Each table (``shape``, ``dltype`` or NNVM's ``dtype``, ``storage_id``, ``device_index``,
``storage_scope``) is ``[type tag, [row, ...]]``. A row is checked and converted as it is
read (:func:`rows`), equal shapes and scopes are shared through the parse's ``memo``, and
:func:`parse_attrs` checks the tables against each other and the entry count. Used by
:mod:`tvmrt.runtime.graph_executor.graph`, which streams the rows from the JSON text.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from tvmrt.error import DataTypeError, GraphFormatError
from tvmrt.runtime.dtype import DataType
from tvmrt.runtime.graph_executor.graph_types import MAX_ENTRY_BYTES, NNVM_TYPE_FLAGS

__all__ = ["TABLES", "Rows", "rows", "parse_attrs", "fail", "as_int", "as_list"]

_MAX_NDIM = 64


def fail(where: str, message: str) -> GraphFormatError:
    """The error for a bad graph field: ``graph JSON: <where>: <message>``."""
    return GraphFormatError(f"graph JSON: {where}: {message}")


def as_int(value: object, where: str, minimum: int = 0) -> int:
    """``value`` if it is an integer >= ``minimum`` (not a bool), else a GraphFormatError."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(where, f"expected an integer, got {value!r}")
    if value < minimum:
        raise fail(where, f"expected an integer >= {minimum}, got {value}")
    return value


def as_list(value: object, where: str) -> list[Any]:
    """``value`` if it is a JSON array, else a GraphFormatError."""
    if not isinstance(value, list):
        raise fail(where, f"expected a JSON array, got {type(value).__name__}")
    return value


class Rows(tuple):  # type: ignore[type-arg]
    """A table's rows, converted while the JSON was streamed (see :func:`parse_graph`)."""


def _shape_row(eid: int, value: object, memo: dict[Any, Any]) -> tuple[int, ...]:
    dims = as_list(value, f"attrs['shape'][{eid}]")
    if len(dims) > _MAX_NDIM:
        raise fail(f"attrs['shape'][{eid}]", f"has {len(dims)} dims, at most {_MAX_NDIM}")
    for d in dims:
        if type(d) is not int or d < 0:
            as_int(d, f"attrs['shape'][{eid}]")
    shape = tuple(dims)
    found: tuple[int, ...] = memo.setdefault(shape, shape)
    return found


def _dltype_row(eid: int, text: object, memo: dict[Any, Any]) -> DataType:
    if not isinstance(text, str):
        raise fail(f"attrs['dltype'][{eid}]", f"expected a dtype string, got {text!r}")
    try:
        return DataType(text)
    except DataTypeError as exc:
        raise fail(f"attrs['dltype'][{eid}]", str(exc)) from None


def _flag_row(eid: int, flag: object, memo: dict[Any, Any]) -> DataType:
    if isinstance(flag, bool) or not isinstance(flag, int) or flag not in NNVM_TYPE_FLAGS:
        raise fail(
            f"attrs['dtype'][{eid}]",
            f"unknown NNVM type flag {flag!r}; known flags are {sorted(NNVM_TYPE_FLAGS)}",
        )
    return DataType(NNVM_TYPE_FLAGS[flag])


def _sid_row(eid: int, value: object, memo: dict[Any, Any]) -> int:
    if type(value) is int and value >= 0:
        return value
    return as_int(value, f"attrs['storage_id'][{eid}]")


def _device_row(eid: int, value: object, memo: dict[Any, Any]) -> int:
    if type(value) is int and value >= 1:
        return value
    return as_int(value, f"attrs['device_index'][{eid}]", 1)


def _scope_row(eid: int, scope: object, memo: dict[Any, Any]) -> str:
    if not isinstance(scope, str):
        raise fail(f"attrs['storage_scope'][{eid}]", f"expected a string, got {scope!r}")
    if "texture" in scope:
        raise fail(
            f"attrs['storage_scope'][{eid}]",
            f"texture scope {scope!r} needs an OpenCL texture backend, which tvmrt lacks",
        )
    found: str = memo.setdefault(scope, scope)
    return found


_RowConverter = Callable[[int, Any, dict[Any, Any]], Any]
TABLES: dict[str, tuple[str, _RowConverter]] = {
    "shape": ("list_shape", _shape_row),
    "dltype": ("list_str", _dltype_row),
    "dtype": ("list_int", _flag_row),  # NNVM graphs: mshadow type flags, not dltype
    "storage_id": ("list_int", _sid_row),
    "device_index": ("list_int", _device_row),
    "storage_scope": ("list_str", _scope_row),
}


def rows(key: str, raw: Iterable[object], memo: dict[Any, Any]) -> Rows:
    convert = TABLES[key][1]
    return Rows(convert(eid, value, memo) for eid, value in enumerate(raw))


def _table(attrs: dict[str, Any], key: str, memo: dict[Any, Any], required: bool) -> Rows | None:
    if key not in attrs:
        if required:
            raise fail("attrs", f"missing required table {key!r}")
        return None
    value = attrs[key]
    if isinstance(value, Rows):
        return value
    tag = TABLES[key][0]
    value = as_list(value, f"attrs[{key!r}]")
    if len(value) != 2 or value[0] != tag:
        raise fail(f"attrs[{key!r}]", f"expected [{tag!r}, [...]], got type tag {value[:1]!r}")
    return rows(key, as_list(value[1], f"attrs[{key!r}] data"), memo)


def parse_attrs(
    attrs_obj: object, num_entries: int, memo: dict[Any, Any]
) -> tuple[
    tuple[tuple[int, ...], ...],
    tuple[DataType, ...],
    tuple[int, ...] | None,
    tuple[int, ...] | None,
    tuple[str, ...] | None,
]:
    if not isinstance(attrs_obj, dict):
        raise fail("attrs", f"expected an object, got {type(attrs_obj).__name__}")
    for key, value in attrs_obj.items():
        if key in TABLES:
            continue
        tag = value[0] if isinstance(value, list) and value else None
        if tag not in ("list_int", "size_t"):
            raise fail("attrs", f"cannot skip graph attr {key!r} with type tag {tag!r}")

    def check_len(table: Rows, key: str) -> Rows:
        if len(table) != num_entries:
            raise fail(
                f"attrs[{key!r}]",
                f"has {len(table)} items but the graph has {num_entries} entries",
            )
        return table

    shapes = check_len(_table(attrs_obj, "shape", memo, True) or Rows(), "shape")
    dltype_table = _table(attrs_obj, "dltype", memo, False)
    if dltype_table is not None:
        dltypes = check_len(dltype_table, "dltype")
    else:
        flags = _table(attrs_obj, "dtype", memo, False)
        if flags is None:
            raise fail("attrs", "missing required table 'dltype'")
        dltypes = check_len(flags, "dtype")
    for eid, (dt, shape) in enumerate(zip(dltypes, shapes, strict=True)):
        bits = dt.bits * dt.lanes
        if not (bits % 8 == 0 or bits in (1, 4)):
            raise fail(f"attrs['dltype'][{eid}]", f"{dt} has {bits} bits per element")
        nbytes = math.prod(shape) * dt.itemsize
        if nbytes >= MAX_ENTRY_BYTES:
            raise fail(
                f"attrs['shape'][{eid}]",
                f"shape {shape} of {dt} takes {nbytes} bytes; no machine can hold an "
                f"entry of {MAX_ENTRY_BYTES} bytes (2**48) or more",
            )
    sids = _table(attrs_obj, "storage_id", memo, False)
    if sids is not None:
        check_len(sids, "storage_id")
        if sids and max(sids) >= 4 * num_entries + 1024:
            raise fail("attrs['storage_id']", f"storage id {max(sids)} is implausibly large")
    devs = _table(attrs_obj, "device_index", memo, False)
    if devs is not None:
        check_len(devs, "device_index")
    scopes = _table(attrs_obj, "storage_scope", memo, False)
    if scopes is not None:
        check_len(scopes, "storage_scope")
    return (
        tuple(shapes),
        tuple(dltypes),
        None if sids is None else tuple(sids),
        None if devs is None else tuple(devs),
        None if scopes is None else tuple(scopes),
    )
