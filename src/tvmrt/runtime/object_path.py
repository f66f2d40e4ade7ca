"""``tvm.runtime.ObjectPath``: a path from a root object to a descendant, and path pairs.

TVM builds these in C++ (``src/node/object_path.cc``) for structural-equality reports;
tvmrt has no IR, so they are plain immutable Python values with TVM v0.19's API and text:
``ObjectPath.root().attr("body").array_index(2)`` prints as ``<root>.body[2]``.
"""

from __future__ import annotations

from typing import Any

from tvmrt.error import IndexOutOfRangeError, UsageError
from tvmrt.runtime.object import Object

__all__ = [
    "ObjectPath",
    "RootPath",
    "AttributeAccessPath",
    "UnknownAttributeAccessPath",
    "ArrayIndexPath",
    "MissingArrayElementPath",
    "MapValuePath",
    "MissingMapEntryPath",
    "ObjectPathPair",
]


class ObjectPath(Object):
    """A path to an object from a root object; make one with :meth:`root`."""

    __slots__ = ("_length", "_parent", "_step")

    _parent: ObjectPath | None
    _step: Any
    _length: int

    def __init__(self) -> None:
        raise UsageError(
            "ObjectPath can't be initialized directly. "
            "Use ObjectPath.root() to create a path to the root object"
        )

    @classmethod
    def _extend(cls, parent: ObjectPath | None, step: Any) -> ObjectPath:
        path = object.__new__(cls)
        path._parent, path._step = parent, step
        path._length = 1 if parent is None else len(parent) + 1
        return path

    @staticmethod
    def root(root_name: str | None = None) -> ObjectPath:
        """The path of a root object, printed as ``root_name`` or ``<root>``."""
        return RootPath._extend(None, root_name)

    def _last(self) -> str:
        return "<root>" if self._step is None else str(self._step)

    def __str__(self) -> str:
        parts: list[str] = []
        node: ObjectPath | None = self
        while node is not None:
            parts.append(node._last())
            node = node._parent
        return "".join(reversed(parts))

    def __repr__(self) -> str:
        return str(self)

    def _nodes(self) -> tuple[tuple[type, Any], ...]:
        out: list[tuple[type, Any]] = []
        node: ObjectPath | None = self
        while node is not None:
            out.append((type(node), node._step))
            node = node._parent
        return tuple(reversed(out))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectPath) and self._nodes() == other._nodes()

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self._nodes())

    @property
    def parent(self) -> ObjectPath | None:
        """The path one step shorter; ``None`` for a root."""
        return self._parent

    def __len__(self) -> int:
        return self._length

    def get_prefix(self, length: int) -> ObjectPath:
        """The first ``length`` steps of this path (1 <= length <= len(self))."""
        if length < 1:
            raise IndexOutOfRangeError("Prefix length must be at least 1")
        if length > len(self):
            raise IndexOutOfRangeError("Attempted to get a prefix longer than the path itself")
        node = self
        while len(node) > length and node._parent is not None:
            node = node._parent
        return node

    def is_prefix_of(self, other: ObjectPath) -> bool:
        """Whether ``other`` starts with this whole path."""
        return len(self) <= len(other) and other.get_prefix(len(self)) == self

    def attr(self, attr_key: str | None) -> ObjectPath:
        """This path, then attribute ``attr_key`` (``None``: an unknown attribute)."""
        if attr_key is None:
            return UnknownAttributeAccessPath._extend(self, ".<unknown attribute>")
        return AttributeAccessPath._extend(self, f".{attr_key}")

    def array_index(self, index: int) -> ObjectPath:
        """This path, then element ``index`` of an array."""
        return ArrayIndexPath._extend(self, f"[{int(index)}]")

    def missing_array_element(self, index: int) -> ObjectPath:
        """This path, then an element ``index`` the array lacks."""
        return MissingArrayElementPath._extend(self, f"[<missing element #{int(index)}>]")

    def map_value(self, key: object) -> ObjectPath:
        """This path, then the value of ``key`` in a map (a string key prints quoted)."""
        shown = f'"{key}"' if isinstance(key, str) else str(key)
        return MapValuePath._extend(self, f"[{shown}]")

    def missing_map_entry(self) -> ObjectPath:
        """This path, then an entry the map lacks."""
        return MissingMapEntryPath._extend(self, "[<missing entry>]")


class RootPath(ObjectPath):
    """The first step of every path."""

    __slots__ = ()


class AttributeAccessPath(ObjectPath):
    """A step into a named attribute."""

    __slots__ = ()


class UnknownAttributeAccessPath(ObjectPath):
    """A step into an attribute whose name is unknown."""

    __slots__ = ()


class ArrayIndexPath(ObjectPath):
    """A step into an array element."""

    __slots__ = ()


class MissingArrayElementPath(ObjectPath):
    """A step to an array element that is not there."""

    __slots__ = ()


class MapValuePath(ObjectPath):
    """A step into a map's value."""

    __slots__ = ()


class MissingMapEntryPath(ObjectPath):
    """A step to a map entry that is not there."""

    __slots__ = ()


class ObjectPathPair(Object):
    """Two paths, one into each object compared for structural equality."""

    __slots__ = ("_lhs", "_rhs")

    def __init__(self, lhs_path: ObjectPath, rhs_path: ObjectPath) -> None:
        self._lhs, self._rhs = lhs_path, rhs_path

    @property
    def lhs_path(self) -> ObjectPath:
        """The path into the left-hand object."""
        return self._lhs

    @property
    def rhs_path(self) -> ObjectPath:
        """The path into the right-hand object."""
        return self._rhs
