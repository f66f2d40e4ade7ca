"""``PackedFunc``: a named callable with TVM's calling convention (tensors in, outputs in place)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tvmrt.runtime.ndarray import NDArray

__all__ = ["PackedFunc", "BoundCall"]

BoundCall = Callable[[], object]
"""A zero-argument callable that runs one function on arguments fixed in advance."""


class PackedFunc:
    """A function callable from Python and bindable by the graph executor.

    The base class wraps a Python callable. Compiled-library loaders subclass it and
    override :meth:`__call__` and :meth:`bind_arrays` to go through the kernel ABI.

    Parameters
    ----------
    func
        The Python callable to wrap.
    name
        A name for messages and tables (defaults to ``func.__name__``).

    Examples
    --------
    >>> f = PackedFunc(lambda a, b: a + b, "add")
    >>> f(1, 2)
    3
    """

    __slots__ = ("_func", "name")

    def __init__(self, func: Callable[..., Any], name: str | None = None) -> None:
        if not callable(func):
            raise TypeError(f"PackedFunc needs a callable, got {type(func).__name__}")
        self._func = func
        self.name = name if name is not None else getattr(func, "__name__", "<anonymous>")

    def __call__(self, *args: Any) -> Any:
        return self._func(*args)

    def bind_arrays(self, args: Sequence[NDArray]) -> BoundCall:
        """Prepare a call on fixed tensor arguments, for a loop that runs it many times.

        The graph executor binds every kernel once at creation; ``run()`` then only
        calls the returned objects. Compiled functions pack their C argument arrays
        here, so nothing is converted per call.
        """
        return functools.partial(self._func, *args)

    def __repr__(self) -> str:
        return f"PackedFunc({self.name!r})"
