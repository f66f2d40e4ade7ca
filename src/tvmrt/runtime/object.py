"""TVM's Python object layer, as far as runtime users touch it.

``Object`` and ``ObjectGeneric`` (``tvm.runtime.Object``/``ObjectGeneric``), the two
containers a runtime hands to Python (``String``, ``ShapeTuple``), and ``convert`` /
``convert_to_object`` / ``const``. tvmrt has no C++ object system, so these are plain
Python values: a ``String`` is a ``str``, a ``ShapeTuple`` a ``tuple`` of ints, and both
compare equal to the builtin values they hold, as TVM's do.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from numbers import Number
from typing import Any, SupportsIndex

from tvmrt.error import ArgumentTypeError, InvalidArgumentError, UnsupportedError
from tvmrt.runtime.object_base import Object

__all__ = [
    "Object",
    "ObjectGeneric",
    "String",
    "ShapeTuple",
    "Constant",
    "convert",
    "convert_to_object",
    "const",
]


class ObjectGeneric:
    """A Python class that converts itself to a runtime object (``asobject``)."""

    def asobject(self) -> Any:
        """The runtime object this value stands for."""
        raise UnsupportedError(f"{type(self).__name__} does not implement asobject()")


class String(str, Object):
    """A runtime string (``tvm.runtime.String``): a ``str`` that is also an ``Object``.

    >>> String("conv2d") == "conv2d"
    True
    """

    __slots__ = ()

    def __new__(cls, content: object = "") -> String:
        # TVM's signature: String(content)
        return super().__new__(cls, content)


class ShapeTuple(tuple[int, ...], Object):
    """A shape (``tvm.runtime.ShapeTuple``): a tuple of ints, equal to tuples and lists.

    Parameters
    ----------
    shape
        A list or tuple of integers (numpy integers are accepted).

    Examples
    --------
    >>> s = ShapeTuple([1, 3, 224, 224])
    >>> s == (1, 3, 224, 224), s == [1, 3, 224, 224], len(s), s[-1]
    (True, True, 4, 224)
    """

    __slots__ = ()

    def __new__(cls, shape: Any = ()) -> ShapeTuple:
        if not isinstance(shape, (list, tuple)):
            raise ArgumentTypeError(
                f"ShapeTuple takes a list or tuple of ints, got {type(shape).__name__}"
            )
        dims = []
        for dim in shape:
            if isinstance(dim, bool) or not isinstance(dim, SupportsIndex):
                raise ArgumentTypeError(
                    f"ShapeTuple dimensions must be ints, got {dim!r} ({type(dim).__name__})"
                )
            dims.append(operator.index(dim))
        return super().__new__(cls, dims)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, list):
            other = tuple(other)
        return tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = tuple.__hash__

    def legacy_repr(self) -> str:
        """``[1, 3, 224, 224]``, as TVM's legacy printer shows a shape."""
        return f"[{', '.join(str(d) for d in self)}]"


class Constant(Object):
    """A typed scalar made by :func:`const`: ``value`` and ``dtype`` like TVM's IntImm/FloatImm.

    TVM's ``const`` builds a TIR expression, which only exists in a compiler; tvmrt keeps
    what a runtime can use: the value with its dtype. ``int()``, ``float()`` and ``==``
    work on the value.
    """

    __slots__ = ("dtype", "value")

    value: int | float | bool
    dtype: str

    def __init__(self, value: int | float | bool, dtype: str) -> None:
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "dtype", dtype)

    def __setattr__(self, name: str, value: object) -> None:
        from tvmrt.error import ReadOnlyError

        raise ReadOnlyError(f"Constant is immutable; cannot set {name!r}")

    def __int__(self) -> int:
        return int(self.value)

    def __float__(self) -> float:
        return float(self.value)

    def __bool__(self) -> bool:
        return bool(self.value)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Constant):
            return self.value == other.value and self.dtype == other.dtype
        return bool(self.value == other)

    def __hash__(self) -> int:
        return hash((self.value, self.dtype))

    def __repr__(self) -> str:
        return f"const({self.value!r}, {self.dtype!r})"


def _infer_dtype(value: object) -> str:
    """TVM's ``_scalar_type_inference``: int32/float32 unless the value needs 64 bits."""
    dtype = getattr(value, "dtype", None)
    if dtype is not None:
        return str(dtype)
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, float):
        return "float32" if -3.40282347e38 <= value <= 3.40282347e38 else "float64"
    if isinstance(value, int):
        return "int32" if -(2**31) <= value < 2**31 else "int64"
    raise UnsupportedError(f"Cannot automatically inference the type. value={value!r}")


def const(value: Any, dtype: str | None = None, span: object = None) -> Constant:
    """A typed scalar (``tvm.runtime.const``); ``dtype`` is inferred as TVM does.

    >>> const(3), const(2.5), const(3, "int64").dtype
    (const(3, 'int32'), const(2.5, 'float32'), 'int64')

    Raises
    ------
    UnsupportedError
        If ``dtype`` is None and the value is not a bool, int, float or numpy scalar.
    """
    from tvmrt.runtime.dtype import DataType

    name = str(DataType(dtype if dtype is not None else _infer_dtype(value)))
    scalar = value.item() if hasattr(value, "item") else value
    if not isinstance(scalar, (bool, int, float)):
        raise ArgumentTypeError(f"const takes a number, got {type(value).__name__}")
    kind = DataType(name).type_code
    if name == "bool":
        return Constant(bool(scalar), name)
    return Constant(float(scalar) if kind in (2, 4) else int(scalar), name)


def convert_to_object(value: Any) -> Any:
    """Convert a Python value to the runtime's form (``tvm.runtime.convert_to_object``).

    Objects, numbers and ``None`` stay as they are; ``str`` becomes :class:`String`;
    lists and tuples become lists of converted items (TVM's ``Array``); dicts become
    dicts of converted values (TVM's ``Map``; keys must be strings, numbers or
    objects); an :class:`ObjectGeneric` gives its ``asobject()``; a callable becomes a
    :class:`~tvmrt.runtime.PackedFunc`.

    Raises
    ------
    InvalidArgumentError
        A dict key is not a string, number or object (``ValueError`` in TVM).
    ArgumentTypeError
        The value has no runtime form (``TypeError`` in TVM).
    """
    from tvmrt.runtime.ndarray import NDArray
    from tvmrt.runtime.packed_func import PackedFunc

    if isinstance(value, (Object, NDArray, PackedFunc)):
        return value
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    if isinstance(value, str):
        return String(value)
    if isinstance(value, (list, tuple)):
        return [convert_to_object(item) for item in value]
    if isinstance(value, Mapping):
        for key in value:
            if not isinstance(key, (Object, str, Number)):
                raise InvalidArgumentError(
                    f"key of map must already been a container type, got {type(key).__name__}"
                )
        return {convert_to_object(k): convert_to_object(v) for k, v in value.items()}
    if isinstance(value, ObjectGeneric):
        return value.asobject()
    if callable(value):
        return PackedFunc(_as_callable(value), getattr(value, "__name__", "lambda"))
    raise ArgumentTypeError(f"don't know how to convert type {type(value)} to object")


def _as_callable(value: Any) -> Callable[..., Any]:
    return value  # type: ignore[no-any-return]


def convert(value: Any) -> Any:
    """Same as :func:`convert_to_object` (TVM keeps both names)."""
    return convert_to_object(value)
