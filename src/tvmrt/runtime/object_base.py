"""``Object``, the base of the runtime's objects (``tvm.runtime.Object``).

Below everything that is one: profiling reports and metrics (core), containers, strings and
shapes (:mod:`tvmrt.runtime.object`). tvmrt has no C++ object system; an Object is a Python
value, and two are the same object when they are the same Python object.
"""

from __future__ import annotations

__all__ = ["Object"]


class Object:
    """Base class of the runtime's objects (``tvm.runtime.Object``)."""

    __slots__ = ()

    def same_as(self, other: object) -> bool:
        """Whether ``other`` is this very object (TVM compares handles)."""
        return self is other

    def legacy_repr(self) -> str:
        """The object's text in TVM's legacy printer's form (its ``repr`` here)."""
        return repr(self)
