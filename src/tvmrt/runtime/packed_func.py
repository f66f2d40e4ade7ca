"""``PackedFunc``: a named callable with TVM's calling convention (tensors in, outputs in place)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tvmrt.error import ArgumentTypeError

if TYPE_CHECKING:
    from tvmrt.runtime.ndarray import NDArray

__all__ = ["PackedFunc", "BoundCall", "PreparedCall", "convert_to_tvm_func"]

BoundCall = Callable[[], object]
"""A zero-argument callable that runs one function on arguments fixed in advance."""

PreparedCall = tuple[Callable[..., object], tuple[Any, ...]]
"""A callable and the exact arguments to call it with: ``fn(*args)`` runs the kernel."""


class PackedFunc:
    """A function callable from Python and bindable by the graph executor.

    The base class wraps a Python callable. Compiled-library loaders subclass it and
    override :meth:`__call__` and :meth:`prepare_call` to go through the kernel ABI.

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
            raise ArgumentTypeError(f"PackedFunc needs a callable, got {type(func).__name__}")
        self._func = func
        self.name = name if name is not None else getattr(func, "__name__", "<anonymous>")

    def __call__(self, *args: Any) -> Any:
        return self._func(*args)

    @property
    def wrapped(self) -> Callable[..., Any]:
        """The Python callable this function calls (tvmrt; for compiled functions, the
        loader's own calling code)."""
        return self._func

    def prepare_call(self, args: Sequence[NDArray]) -> PreparedCall:
        """Prepare a call on fixed tensor arguments, for a loop that runs it many times.

        Returns ``(fn, fn_args)`` such that ``fn(*fn_args)`` runs this function on
        ``args``. The graph executor prepares every kernel once at creation, and
        ``run()`` is a loop of ``fn(*fn_args)``. Compiled functions pack their C
        argument arrays here, so nothing is converted per call. A subclass overrides
        this or :meth:`bind_arrays`.
        """
        if type(self).bind_arrays is not PackedFunc.bind_arrays:
            return (self.bind_arrays(args), ())
        return (self._func, tuple(args))

    def bind_arrays(self, args: Sequence[NDArray]) -> BoundCall:
        """Like :meth:`prepare_call`, as one zero-argument callable."""
        fn, fn_args = self.prepare_call(args)
        return functools.partial(fn, *fn_args)

    def __repr__(self) -> str:
        return f"PackedFunc({self.name!r})"


def convert_to_tvm_func(pyfunc: Callable[..., Any]) -> PackedFunc:
    """A Python callable as a :class:`PackedFunc` (``tvm.runtime.packed_func``'s name).

    Raises
    ------
    ArgumentTypeError
        If ``pyfunc`` is not callable.
    """
    return PackedFunc(pyfunc)
