"""``pip install .`` on a machine without a C compiler (or without Python's headers) says
what is missing and how to install it, instead of setuptools' bare ``[Errno 2] No such
file or directory: 'gcc'``.

setup.py cannot be imported (it runs ``setup()``), so its check is taken from its source
and run against a compiler object like the one setuptools hands ``build_extensions``.
"""

from __future__ import annotations

import ast
import os
import shutil
import sysconfig
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from setuptools.errors import CompileError

from support.paths import REPO


def _check_toolchain() -> Callable[[object], None]:
    tree = ast.parse((REPO / "setup.py").read_text())
    (func,) = [
        n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_check_toolchain"
    ]
    scope: dict[str, Any] = {
        "os": os,
        "shutil": shutil,
        "sysconfig": sysconfig,
        "CompileError": CompileError,
    }
    exec(compile(ast.Module([func], type_ignores=[]), "setup.py", "exec"), scope)
    return scope["_check_toolchain"]  # type: ignore[no-any-return]


class _Compiler:
    def __init__(self, command: list[str]) -> None:
        self.compiler_so = command


def test_a_missing_compiler_is_named_with_how_to_install_one() -> None:
    check = _check_toolchain()
    with pytest.raises(CompileError, match="needs a C compiler: '/no/such/cc'") as info:
        check(_Compiler(["/no/such/cc", "-O2"]))
    assert "apt-get install gcc" in str(info.value)
    assert "$CC" in str(info.value)


def test_missing_python_headers_are_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler here")
    check = _check_toolchain()
    check(_Compiler([cc]))  # this machine builds tvmrt: nothing to say
    monkeypatch.setattr(sysconfig, "get_paths", lambda: {"include": str(tmp_path)})
    with pytest.raises(CompileError, match="needs Python's headers") as info:
        check(_Compiler([cc]))
    assert "python3-dev" in str(info.value)
