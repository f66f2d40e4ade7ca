"""Straight-line programs: the executor's prepared kernel calls, compiled once per binding.

``run()`` could loop over ``(fn, args)`` pairs, but ``fn(*args)`` goes through
CPython's generic call path. Emitting one source line per call, ``f3(a3_0, a3_1)``,
gives every call site its own specialised instruction, which makes dispatch cheaper
than a plain Python loop calling the kernels by hand. The source holds only
identifiers this module generates; the objects themselves sit in the namespace.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

__all__ = ["compile_steps", "replace_step", "failed_step"]

_FILENAME = "<tvmrt graph program>"
_MARK = "__tvmrt_graph_program__"


def compile_steps(
    steps: Sequence[tuple[Callable[..., object], tuple[Any, ...]]],
) -> Callable[[], None]:
    """A function running ``fn(*args)`` for every step, in order.

    Line ``k + 2`` of the generated function is step ``k`` (see :func:`failed_step`).
    """
    namespace: dict[str, Any] = {_MARK: True}
    lines = ["def run():"]
    for k, (fn, args) in enumerate(steps):
        namespace[f"f{k}"] = fn
        names = []
        for j, arg in enumerate(args):
            namespace[f"a{k}_{j}"] = arg
            names.append(f"a{k}_{j}")
        lines.append(f"    f{k}({', '.join(names)})")
    lines.append("    return None")
    exec(compile("\n".join(lines), _FILENAME, "exec"), namespace)
    run: Callable[[], None] = namespace["run"]
    return run


def replace_step(
    program: Callable[[], None], k: int, step: tuple[Callable[..., object], tuple[Any, ...]]
) -> bool:
    """Make step ``k`` of ``program`` call ``step`` instead, without recompiling.

    The generated code looks its callables and arguments up by name in the program's
    namespace, so rebinding one step is a few dict stores. Returns False (nothing
    changed) if the new step takes a different number of arguments: recompile then.
    """
    namespace: dict[str, Any] = getattr(program, "__globals__", {})
    fn, args = step
    n = len(args)
    if _MARK not in namespace or f"f{k}" not in namespace or f"a{k}_{n}" in namespace:
        return False
    if n and f"a{k}_{n - 1}" not in namespace:
        return False
    namespace[f"f{k}"] = fn
    for j, arg in enumerate(args):
        namespace[f"a{k}_{j}"] = arg
    return True


def failed_step(program: Callable[[], None], tb: TracebackType | None) -> int | None:
    """Index of the step that raised, from a traceback through ``program``."""
    code = getattr(program, "__code__", None)
    while tb is not None:
        if tb.tb_frame.f_code is code:
            return tb.tb_lineno - 2
        tb = tb.tb_next
    return None
