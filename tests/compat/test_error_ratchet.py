"""Ratchet: tvmrt raises TVMErrors, not bare builtins (issue 12 item 2).

Every ``raise SomeBuiltinError(...)`` left in ``src/tvmrt`` is counted per file. Files
not listed must have none, and the listed counts may only go down: convert a raise to a
class of ``tvmrt.error`` (each is also the builtin users catch) and lower the number.
"""

from __future__ import annotations

import ast
from pathlib import Path

from support.paths import REPO

SRC = REPO / "src" / "tvmrt"

BUILTINS = {
    "ValueError",
    "TypeError",
    "KeyError",
    "IndexError",
    "LookupError",
    "RuntimeError",
    "OSError",
    "FileNotFoundError",
    "AttributeError",
    "NotImplementedError",
    "MemoryError",
}

# Files allowed bare builtin raises, with their counts: none any more. Keep it that way.
REMAINING: dict[str, int] = {}


def bare_raises(path: Path) -> list[int]:
    """Line numbers of ``raise Builtin(...)`` in ``path``."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            func = node.exc.func
            if isinstance(func, ast.Name) and func.id in BUILTINS:
                lines.append(node.lineno)
    return lines


def test_no_new_bare_builtin_raises():
    grown = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        found = bare_raises(path)
        if len(found) > REMAINING.get(rel, 0):
            grown[rel] = found
    assert not grown, (
        "raise a tvmrt.error class (a TVMError that is also the builtin) instead of a bare "
        f"builtin; new bare raises at {grown}"
    )
