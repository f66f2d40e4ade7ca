"""Public API guards: error hierarchy, exports, TVM-style top-level names."""

from __future__ import annotations

import importlib

import pytest

import tvmrt
from support.paths import REPO
from tvmrt import error

BUILTIN_OF = {
    "InternalError": None,
    "GraphFormatError": ValueError,
    "ParamsFormatError": ValueError,
    "DataTypeError": ValueError,
    "ArrayError": ValueError,
    "FunctionNotFoundError": AttributeError,
    "InputNotFoundError": LookupError,
    "ModuleLoadError": OSError,
    "DeviceUnavailableError": None,
    "DeviceOutOfMemoryError": MemoryError,
    "KernelError": None,
    "FunctionAlreadyRegisteredError": ValueError,
    "GlobalFunctionNotFoundError": ValueError,
    "ModuleFileNotFoundError": ValueError,
    "InvalidArgumentError": ValueError,
    "ArgumentTypeError": TypeError,
    "ReadOnlyError": AttributeError,
    "UnsupportedError": NotImplementedError,
}


@pytest.mark.parametrize(("name", "builtin"), BUILTIN_OF.items())
def test_errors_are_tvm_errors_and_their_builtin(name, builtin):
    cls = getattr(error, name)
    assert issubclass(cls, error.TVMError)
    assert issubclass(cls, RuntimeError)
    if builtin is not None:
        assert issubclass(cls, builtin)
    assert cls.__doc__


def test_lookup_error_message_is_not_quoted():
    assert str(error.InputNotFoundError("no input 'x'")) == "no input 'x'"


def test_add_note_keeps_type():
    exc = ValueError("bad")
    error.add_note(exc, "while doing x")
    assert exc.__notes__ == ["while doing x"]


@pytest.mark.parametrize(
    "module",
    [
        "tvmrt",
        "tvmrt.runtime",
        "tvmrt.error",
        "tvmrt.contrib.graph_executor",
        "tvmrt.runtime.profiling",
        "tvmrt.testing",
    ],
)
def test_all_names_exist_and_are_documented(module):
    mod = importlib.import_module(module)
    assert mod.__doc__
    for name in mod.__all__:
        obj = getattr(mod, name)
        if callable(obj) or isinstance(obj, type):
            assert getattr(obj, "__doc__", None), f"{module}.{name} has no docstring"


def test_tvm_style_top_level():
    assert tvmrt.cpu(0) == tvmrt.runtime.cpu(0)
    assert tvmrt.nd.array([1.0]).numpy().tolist() == [1.0]
    assert tvmrt.TVMError is error.TVMError
    assert tvmrt.contrib.graph_executor.create is not None
    assert isinstance(tvmrt.__version__, str)


def test_api_reference_is_up_to_date():
    import subprocess
    import sys

    script = REPO / "scripts" / "gen_api_docs.py"
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
