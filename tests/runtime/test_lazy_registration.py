"""tvmrt's own global functions and device backends are imported when first used.

``import tvmrt`` must not import a driver, the debug executor or a loader: they are
reached through the lazy tables (:mod:`tvmrt.runtime.builtins`, the backend table of
:mod:`tvmrt.runtime.device`). Each check runs in a fresh interpreter, where nothing else
has imported them yet.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tvmrt.runtime.builtins import BUILTIN_FUNCTIONS

# imported on first use only: a driver's backend, the debug executor, the loaders (the
# tar and package loaders and the link step, OpenCL device code)
LAZY_MODULES = (
    "tvmrt.runtime.backends.opencl",
    "tvmrt.runtime.graph_executor.debug",
    "tvmrt.runtime.loaders",
    "tvmrt.runtime.loaders.dispatch",
    "tvmrt.binfmt.archive",
    "tvmrt.runtime.loaders.link",
    "tvmrt.runtime.loaders.packages",
    "tvmrt.runtime.loaders.opencl",
    "tvmrt.runtime.vm",
)


def _child(code: str) -> object:
    """Run ``code`` in a new interpreter; it prints one JSON value, returned here."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _imported_after(statements: str) -> set[str]:
    code = f"import json, sys\n{statements}\nprint(json.dumps(sorted(sys.modules)))"
    found = _child(code)
    assert isinstance(found, list)
    return set(found)


def test_import_tvmrt_imports_no_backend_debug_executor_or_loader() -> None:
    imported = _imported_after("import tvmrt")
    assert "tvmrt.runtime" in imported
    assert sorted(imported & set(LAZY_MODULES)) == []


@pytest.mark.parametrize(
    ("use", "module"),
    [
        pytest.param(
            "tvmrt.runtime.get_global_func('tvm.graph_executor_debug.create')",
            "tvmrt.runtime.graph_executor.debug",
            id="debug-executor",
        ),
        pytest.param(
            "tvmrt.runtime.get_global_func('runtime.module.loadfile_tar')",
            "tvmrt.runtime.loaders.dispatch",
            id="tar-loader",
        ),
        pytest.param(
            "tvmrt.runtime.get_global_func('runtime.module.loadbinary_opencl')",
            "tvmrt.runtime.loaders.opencl",
            id="opencl-loader",
        ),
        pytest.param("tvmrt.opencl(0).exist", "tvmrt.runtime.backends.opencl", id="opencl"),
    ],
)
def test_first_use_imports_the_module(use: str, module: str) -> None:
    assert module in _imported_after(f"import tvmrt\n{use}")


def test_every_builtin_resolves_through_get_global_func() -> None:
    code = """
import importlib, json
from tvmrt.runtime import PackedFunc, get_global_func, list_global_func_names
from tvmrt.runtime.builtins import BUILTIN_FUNCTIONS

problems = []
listed = set(list_global_func_names())
for name, target in sorted(BUILTIN_FUNCTIONS.items()):
    module_path, _, attribute = target.partition(":")
    func = get_global_func(name, allow_missing=True)
    expected = getattr(importlib.import_module(module_path), attribute)
    if name not in listed:
        problems.append(f"{name}: not in list_global_func_names()")
    # a function implemented in C is a PackedFunc already and is registered as it is
    same = func is expected if isinstance(expected, PackedFunc) else (
        isinstance(func, PackedFunc) and func.wrapped is expected
    )
    if not same or func.name != name:
        problems.append(f"{name}: get_global_func gave {func!r}, expected {target}")
print(json.dumps(problems))
"""
    assert _child(code) == []
    assert BUILTIN_FUNCTIONS  # the table is not empty
