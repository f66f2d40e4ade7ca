"""TVM's ``AotModule`` face over the C runtime's AOT executor (issue 43, item 2).

``factory["default"](cpu(0))`` of an AOT factory read from its file is the C runtime's
``AotExecutor`` (``runtime/executor/_aot_native.py``); ``TVMRT_AOT_ENGINE=python`` keeps the
Python engine, which is the reference here, with TVM 0.16's golden.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from support.fixtures import artifact_folder
from tvmrt import runtime
from tvmrt.error import ArgumentTypeError, ArrayError, TVMError, UnsupportedError
from tvmrt.runtime.executor.aot_executor import AotModule
from tvmrt.runtime.native_module import NativeModule


def _folder() -> Path:
    return artifact_folder("relay016") / "aot-so"


def _module(monkeypatch: pytest.MonkeyPatch, engine: str) -> AotModule:
    monkeypatch.setenv("TVMRT_AOT_ENGINE", engine)
    lib = runtime.load_module(str(_folder() / "deploy.so"))
    executor = lib["default"](runtime.cpu(0))
    assert isinstance(executor, NativeModule) == (engine == "native")
    return AotModule(executor)


def test_the_c_executor_runs_the_factory_bitwise_as_the_python_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with np.load(_folder() / "golden.npz") as npz:
        golden = dict(npz)
    got = {}
    for engine in ("native", "python"):
        m = _module(monkeypatch, engine)
        assert m.get_input_info() == ({"data": (1, 3, 16, 16)}, {"data": "float32"})
        assert [t.name for t in m.outputs] == ["output0"]
        assert m.entry_name == "tvmgen_default___tvm_main__"
        m.set_input("data", golden["data"])
        m.run()
        got[engine] = m.get_output(0).numpy()
        np.testing.assert_array_equal(m.get_input("data").numpy(), golden["data"])
    np.testing.assert_array_equal(got["native"], golden["output_0"])
    assert got["native"].tobytes() == got["python"].tobytes()


def test_factory_params_are_set_in_each_c_executor(monkeypatch: pytest.MonkeyPatch) -> None:
    # this build links its weights; a factory's params (TVM's non-linked AOT builds) are
    # copied into each new executor's inputs, as the Python engine copies them
    data = np.random.default_rng(3).standard_normal((1, 3, 16, 16)).astype("float32")
    for engine in ("native", "python"):
        monkeypatch.setenv("TVMRT_AOT_ENGINE", engine)
        lib = runtime.load_module(str(_folder() / "deploy.so"))
        lib.params = {"data": runtime.array(data)}
        first, second = (AotModule(lib["default"](runtime.cpu(0))) for _ in range(2))
        first.set_input("data", np.zeros_like(data))  # one executor's inputs are its own
        np.testing.assert_array_equal(second.get_input("data").numpy(), data)


def test_bad_calls_get_the_python_engines_words(monkeypatch: pytest.MonkeyPatch) -> None:
    native, python = _module(monkeypatch, "native"), _module(monkeypatch, "python")
    calls = [
        ("set_input", ("nope", np.zeros((1, 3, 16, 16), "float32"))),
        ("set_input", ("data", np.zeros((2, 2), "float32"))),
        ("get_input_index", ("nope",)),
        ("get_output", (5,)),
        ("get_input", (7,)),
        ("get_input", (-1,)),
        ("get_input", (3.5,)),
        ("get_output", (3.5,)),
        ("get_output", (-1,)),
        ("set_input", (2.0, np.zeros((1, 3, 16, 16), "float32"))),
    ]
    for name, args in calls:
        words = []
        for m in (native, python):
            with pytest.raises(TVMError) as err:
                getattr(m, name)(*args)
            words.append(f"{type(err.value).__name__}: {err.value}")
        assert words[0] == words[1], (name, words)
    # the executors' own functions, as a C program or TVM's face calls them
    raw_calls = [("get_input_index", (3,)), ("get_output", (None,)), ("get_output", ("out",))]
    for name, args in raw_calls:
        words = []
        for m in (native, python):
            with pytest.raises(TVMError) as err:
                m.module[name](*args)
            words.append(f"{type(err.value).__name__}: {err.value}")
        assert words[0] == words[1], (name, words)


def test_what_the_c_engine_refuses_runs_on_python_or_is_an_error_when_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lib = runtime.load_module(str(_folder() / "deploy.so"))
    lib.import_module(runtime.load_module(str(_folder() / "deploy.so")).imported_modules[0])
    monkeypatch.delenv("TVMRT_AOT_ENGINE", raising=False)
    assert not isinstance(lib["default"](runtime.cpu(0)), NativeModule)  # changed in Python
    monkeypatch.setenv("TVMRT_AOT_ENGINE", "native")
    with pytest.raises(UnsupportedError, match="changed after loading"):
        lib["default"](runtime.cpu(0))


def test_an_out_argument_is_a_writable_ndarray_on_both_engines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the C executor wrote a read-only NDArray given as out; the Python engine raised
    # numpy's words for it, and "device type must be a str or int" for a numpy out
    frozen = np.zeros((1, 10), "float32")
    frozen.setflags(write=False)
    read_only = runtime.NDArray.from_host_memory(frozen, runtime.DataType("float32"), runtime.cpu())
    for engine in ("native", "python"):
        m = _module(monkeypatch, engine)
        with pytest.raises(ArgumentTypeError, match=r"get_output\(0\): out must be an NDArray"):
            m.get_output(0, np.zeros((1, 10), "float32"))
        with pytest.raises(ArrayError, match=r"get_output\(0\): out is read-only"):
            m.get_output(0, read_only)
        with pytest.raises(ArrayError, match=r"get_input\('data'\): out is read-only"):
            m.get_input("data", read_only)
        assert not frozen.any()
