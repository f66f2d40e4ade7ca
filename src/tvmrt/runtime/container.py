"""TVM's runtime containers: ``ADT`` and ``tuple_object`` (the Relay VM hands them out),
``Array`` (the Relax VM's tuples, TVM's ``tvm.ir.container.Array`` / ``tvm_ffi.Array``), and
``String`` and ``ShapeTuple`` (:mod:`tvmrt.runtime.object`), as ``tvm.runtime.container``.

``tvm.runtime.container.ADT`` is an algebraic data type value: an int32 constructor tag
and its fields (tensors or more ADTs). A Relay tuple is an ADT with tag 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from tvmrt.error import ArgumentTypeError, InputIndexError
from tvmrt.runtime.object import Object, ShapeTuple, String

__all__ = ["ADT", "Array", "tuple_object", "ShapeTuple", "String"]


class ADT(Object):
    """An algebraic data type value: ``tag`` and ``fields``, indexable like a tuple.

    Parameters
    ----------
    tag
        The constructor tag (an int32; tuples use 0).
    fields
        The constructor's fields.
    """

    __slots__ = ("__weakref__", "fields", "tag")  # weakref: a VM's live budget tracks it

    def __init__(self, tag: int, fields: Iterable[Any]) -> None:
        if not isinstance(tag, int) or not -(1 << 31) <= tag < 1 << 31:
            raise ArgumentTypeError(f"ADT tag must be an int32, got {tag!r}")
        self.tag = tag
        self.fields: tuple[Any, ...] = tuple(fields)

    def __getitem__(self, idx: int | slice) -> Any:
        if isinstance(idx, slice):  # TVM's getitem_helper: a list, negative ends from the back
            n = len(self.fields)
            start = 0 if idx.start is None else idx.start + (n if idx.start < 0 else 0)
            stop = n if idx.stop is None else idx.stop + (n if idx.stop < 0 else 0)
            return [self[i] for i in range(start, stop, 1 if idx.step is None else idx.step)]
        if not isinstance(idx, int):
            raise ArgumentTypeError(
                f"ADT index must be an int or a slice, got {type(idx).__name__}"
            )
        if not -len(self.fields) <= idx < len(self.fields):
            raise InputIndexError(f"ADT field index {idx} out of range: it has {len(self.fields)}")
        return self.fields[idx]

    def __len__(self) -> int:
        return len(self.fields)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fields)

    def __repr__(self) -> str:
        return f"ADT(tag={self.tag}, fields={list(self.fields)!r})"


def tuple_object(fields: Sequence[Any] | None = None) -> ADT:
    """A Relay tuple value (an ADT with tag 0) of ``fields``."""
    return ADT(0, () if fields is None else fields)


class Array(tuple[Any, ...], Object):
    """An immutable sequence of runtime values (a Relax tuple): indexable, sized, iterable,
    and equal to a list or tuple of the same items, as TVM's ``Array``.

    >>> a = Array([1, 2])
    >>> a == [1, 2], len(a), a[-1]
    (True, 2, 2)
    """

    __slots__ = ()

    def __new__(cls, items: Iterable[Any] = ()) -> Array:
        return super().__new__(cls, items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, list):
            other = tuple(other)
        return tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = tuple.__hash__

    def __repr__(self) -> str:
        return f"[{', '.join(repr(item) for item in self)}]"
