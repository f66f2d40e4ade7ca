"""TVM's ``GraphModule`` face over the C runtime's graph executor (issue 43, item 2).

The C executor is reached the way TVM's Python reaches libtvm_runtime's: the library is
loaded by the C runtime (``native_module.load_file``), its factory's ``default(dev)`` gives a
``GraphExecutor`` module of the C runtime, and ``GraphModule`` wraps it unchanged. Every
packed function the face calls must be there, with the Python engine's results and words:
the Python engine, over the same file, is the reference; TVM 0.16's goldens are the other.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tvmrt import runtime
from tvmrt.contrib import graph_executor
from tvmrt.error import (
    ArgumentTypeError,
    ArrayError,
    InputNotFoundError,
    InvalidArgumentError,
    ParamsFormatError,
    TVMError,
    UnsupportedError,
)
from tvmrt.runtime import native_module


def _both(path: Path) -> tuple[graph_executor.GraphModule, graph_executor.GraphModule]:
    """(C engine, Python engine) executors of one factory library, on the CPU."""
    c_lib = native_module.load_file(str(path))
    c_mod = graph_executor.GraphModule(c_lib["default"](runtime.cpu()))
    before = os.environ.get("TVMRT_GRAPH_ENGINE")
    os.environ["TVMRT_GRAPH_ENGINE"] = "python"  # the reference, whatever the C engine runs
    try:
        py_mod = graph_executor.GraphModule(
            runtime.load_module(str(path))["default"](runtime.cpu())
        )
    finally:
        if before is None:
            del os.environ["TVMRT_GRAPH_ENGINE"]
        else:
            os.environ["TVMRT_GRAPH_ENGINE"] = before
    assert c_mod.module.type_key == py_mod.module.type_key == "GraphExecutor"
    assert isinstance(c_mod.module, native_module.NativeModule)
    assert not isinstance(py_mod.module, native_module.NativeModule)
    return c_mod, py_mod


def _golden(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as npz:
        return dict(npz)


def _info(mod: graph_executor.GraphModule, outputs: bool = False) -> tuple[Any, Any]:
    shapes, dtypes = mod.get_output_info() if outputs else mod.get_input_info()
    return {k: tuple(v) for k, v in shapes.items()}, {k: str(v) for k, v in dtypes.items()}


def test_the_face_runs_a_factory_on_the_c_executor(artifacts: Path) -> None:
    folder = artifacts / "relay016" / "systemlib-so"
    golden = _golden(folder / "golden.npz")
    c_mod, py_mod = _both(folder / "deploy.so")
    for mod in (c_mod, py_mod):
        mod.set_input("data", golden["data"])
        mod.run()
    got = c_mod.get_output(0).numpy()
    np.testing.assert_array_equal(got, golden["output_0"])
    np.testing.assert_array_equal(got, py_mod.get_output(0).numpy())
    got[...] = 0  # numpy() is a copy, not the executor's memory
    np.testing.assert_array_equal(c_mod.get_output(0).numpy(), golden["output_0"])
    # the same round trips through the face: an input read back, an output copied out
    np.testing.assert_array_equal(c_mod.get_input("data").numpy(), golden["data"])
    out = runtime.empty(got.shape, str(got.dtype))
    c_mod.get_output(0, out)
    np.testing.assert_array_equal(out.numpy(), golden["output_0"])
    assert c_mod.get_num_inputs() == py_mod.get_num_inputs()
    assert c_mod.get_num_outputs() == py_mod.get_num_outputs() == 1


def test_input_info_leaves_out_params_as_the_python_engine(artifacts: Path, tmp_path: Path) -> None:
    """TVM's get_input_info lists the inputs no params were loaded for: every one after the
    factory's embedded params (TVM sets those as inputs), the data only after ``load_params`` and ``load_params_from_file`` of a bare executor,
    and after ``share_params``, both engines list the same names, shapes and dtypes."""
    path = artifacts / "relay016" / "systemlib-so" / "deploy.so"
    c_mod, py_mod = _both(path)
    assert _info(c_mod) == _info(py_mod)
    assert _info(c_mod, outputs=True) == _info(py_mod, outputs=True)

    py_lib = runtime.load_module(str(path))
    c_lib = native_module.load_file(str(path))
    graph = py_lib["get_graph_json"]()
    blob = runtime.save_param_dict(py_lib["get_graph_params"]())
    params_file = tmp_path / "deploy.params"
    params_file.write_bytes(blob)
    bare_py = graph_executor.create(graph, py_lib, runtime.cpu())
    bare_c = graph_executor.GraphModule(
        native_module.c_global("tvm.graph_executor.create")(graph, c_lib, 1, 0)
    )
    every = _info(bare_py)
    assert _info(bare_c) == every
    assert len(every[0]) == 7  # data and six weights
    bare_py.load_params(blob)
    bare_c.load_params_from_file(params_file)
    assert _info(bare_c) == _info(bare_py) == ({"data": (1, 3, 16, 16)}, {"data": "float32"})

    # weights shared from another executor are params too
    sharing = graph_executor.GraphModule(
        native_module.c_global("tvm.graph_executor.create")(graph, c_lib, 1, 0)
    )
    sharing.share_params(bare_c, blob)
    assert _info(sharing) == _info(bare_c)
    golden = _golden(path.parent / "golden.npz")
    sharing.run(data=golden["data"])
    np.testing.assert_array_equal(sharing.get_output(0).numpy(), golden["output_0"])


def test_output_keys_are_the_python_engines(artifacts: Path) -> None:
    """A node with two outputs is keyed ``name:index``; every key the info gives, and the
    bare node name, finds the same output in both engines; an unknown one is refused in
    the same words."""
    folder = artifacts / "contrib" / "sort-topk"
    golden = _golden(folder / "golden.npz")
    c_mod, py_mod = _both(folder / "deploy.so")
    keys = _info(py_mod, outputs=True)
    assert _info(c_mod, outputs=True) == keys
    assert sum(":" in k for k in keys[0]) == 2, keys
    for mod in (c_mod, py_mod):
        mod.run(x=golden["x"])
    names = [*keys[0], *{k.split(":")[0] for k in keys[0]}]
    for key in names:
        index = c_mod.get_output_index(key)
        assert index == py_mod.get_output_index(key) >= 0, key
        np.testing.assert_array_equal(
            c_mod.get_output(key).numpy(), py_mod.get_output(key).numpy(), err_msg=key
        )
    assert c_mod.get_output_index("nope") == py_mod.get_output_index("nope") == -1
    words = []
    for mod in (c_mod, py_mod):
        with pytest.raises(InputNotFoundError) as err:
            mod.get_output("nope")
        words.append(str(err.value))
    assert words[0] == words[1], words
    for i in range(c_mod.get_num_outputs()):
        np.testing.assert_array_equal(c_mod.get_output(i).numpy(), golden[f"output_{i}"])


def test_bad_keys_get_the_python_engines_words(artifacts: Path) -> None:
    """A key of the wrong type names its type and value, and a negative index is out of
    range, on both engines (the C executor gave None for get_input(-1), and a type code)."""
    c_mod, py_mod = _both(artifacts / "batched" / "cnn-b1" / "deploy_lib.so")
    x = np.zeros((1, 1, 8, 8), "float32")
    calls: list[tuple[str, Any]] = [
        ("get_input(-1)", lambda m: m.get_input(-1)),
        ("get_input(3.5)", lambda m: m.get_input(3.5)),
        ("get_output(-1)", lambda m: m.get_output(-1)),
        ("get_output(3.5)", lambda m: m.get_output(3.5)),
        ("set_input(3.5, x)", lambda m: m.set_input(3.5, x)),
        ("set_input(-1, x)", lambda m: m.set_input(-1, x)),
        ("module set_input(None, x)", lambda m: m.module["set_input"](None, runtime.array(x))),
    ]
    for what, call in calls:
        words = []
        for mod in (c_mod, py_mod):
            with pytest.raises(TVMError) as err:
                call(mod)
            words.append(f"{type(err.value).__name__}: {err.value}")
        assert words[0] == words[1], (what, words)


def test_run_from_inputs_and_end_to_end_benchmark(artifacts: Path) -> None:
    folder = artifacts / "relay016" / "systemlib-so"
    golden = _golden(folder / "golden.npz")
    c_mod, _ = _both(folder / "deploy.so")
    outs = c_mod.module["run_from_inputs"](1, 0, "data", golden["data"])
    assert len(outs) == 1
    np.testing.assert_array_equal(outs[0].numpy(), golden["output_0"])
    result = c_mod.benchmark(
        runtime.cpu(), number=1, repeat=2, end_to_end=True, data=golden["data"]
    )
    assert len(result.results) == 2
    assert min(result.results) > 0
    with pytest.raises(InvalidArgumentError, match="even number of key-value pairs"):
        c_mod.module["run_from_inputs"](1, 0, "data")


def test_a_params_file_of_another_format_is_refused(artifacts: Path, tmp_path: Path) -> None:
    c_mod, _ = _both(artifacts / "relay016" / "systemlib-so" / "deploy.so")
    bad = tmp_path / "bad.params"
    bad.write_bytes(b"not a params blob, just text")
    with pytest.raises(ParamsFormatError, match="does not start with the magic"):
        c_mod.load_params_from_file(bad)
    with pytest.raises(ParamsFormatError):
        c_mod.load_params_from_file(tmp_path / "missing.params")


def test_numpy_arguments_reach_c_as_the_arrays_they_are(artifacts: Path) -> None:
    """A writable C-contiguous numpy input is handed to C as a DLTensor of its own memory
    (the executor copies from it); a read-only or Fortran-ordered one, or one of another
    dtype, goes through the Python conversion: every route gives the same answer. (An
    ``out`` is an NDArray, as on the Python engine:
    test_a_bad_out_argument_is_refused_in_the_python_engines_words.)"""
    folder = artifacts / "relay016" / "systemlib-so"
    golden = _golden(folder / "golden.npz")
    c_mod, _ = _both(folder / "deploy.so")
    frozen = golden["data"].copy()
    frozen.setflags(write=False)
    variants = {
        "writable": golden["data"].copy(),
        "read-only": frozen,
        "fortran": np.asfortranarray(golden["data"]),
    }
    for label, x in variants.items():
        c_mod.set_input("data", x)
        c_mod.run()
        out = runtime.empty(golden["output_0"].shape, str(golden["output_0"].dtype))
        c_mod.get_output(0, out)  # written in place
        np.testing.assert_array_equal(out.numpy(), golden["output_0"], err_msg=label)
    # another dtype is converted, as TVM's set_input (copyfrom) and the Python engine do;
    # another shape is refused in the Python engine's words
    c_mod.set_input("data", golden["data"].astype("float64"))
    c_mod.run()
    np.testing.assert_array_equal(c_mod.get_output(0).numpy(), golden["output_0"])
    words = []
    for mod in _both(folder / "deploy.so"):
        with pytest.raises(ArrayError) as err:
            mod.set_input("data", np.zeros((2, 2), "float32"))
        words.append(str(err.value))
    assert words[0] == words[1], words
    assert words[0].startswith("input 'data': "), words
    with pytest.raises(ArrayError, match=r"out has shape \(3,\) and dtype int64"):
        c_mod.get_output(0, runtime.empty((3,), "int64"))


def test_a_loaded_factory_runs_on_the_c_engine_with_its_weights_held_once(
    artifacts: Path,
) -> None:
    """``load_module(...)["default"](cpu())`` is the C runtime's executor; each executor of
    the factory views the factory's own param arrays (no copy), as the Python engine's do.
    (A factory of TVM 0.16's non-maximum suppression: three params, a kernel that calls
    the runtime's sort by name.)"""
    folder = artifacts / "contrib" / "nms-static"
    golden = _golden(folder / "golden.npz")
    lib = runtime.load_module(str(folder / "deploy.so"))
    first, second = (graph_executor.GraphModule(lib["default"](runtime.cpu())) for _ in "ab")
    assert isinstance(first.module, native_module.NativeModule)
    weights = lib["get_graph_params"]()
    assert weights
    for name, array in weights.items():
        assert first.get_input(name).data_ptr == array.data_ptr, name
        assert second.get_input(name).data_ptr == array.data_ptr, name
    first.run(data=golden["data"])
    np.testing.assert_array_equal(first.get_output(0).numpy(), golden["output_0"])
    assert first.storage_plan.total_bytes > 0


def test_the_python_engine_runs_what_the_c_engine_must_not(
    artifacts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(artifacts / "contrib" / "nms-static" / "deploy.so")
    golden = _golden(Path(path).parent / "golden.npz")

    def engine_of(module: object) -> str:
        return "c" if isinstance(module, native_module.NativeModule) else "python"

    lib = runtime.load_module(path)
    assert engine_of(lib["default"](runtime.cpu())) == "c"
    # no params left in the factory: a new factory, not the file
    bare = lib["remove_params"]()
    assert engine_of(bare["default"](runtime.cpu())) == "python"
    # imports changed after loading: the file no longer holds all of the module
    changed = runtime.load_module(path)
    changed.import_module(runtime.load_module(path))
    assert engine_of(changed["default"](runtime.cpu())) == "python"
    monkeypatch.setenv("TVMRT_GRAPH_ENGINE", "python")
    mod = graph_executor.GraphModule(lib["default"](runtime.cpu()))
    assert engine_of(mod.module) == "python"
    mod.run(data=golden["data"])
    np.testing.assert_array_equal(mod.get_output(0).numpy(), golden["output_0"])
    monkeypatch.setenv("TVMRT_GRAPH_ENGINE", "native")
    assert engine_of(lib["default"](runtime.cpu())) == "c"
    with pytest.raises(UnsupportedError, match="cannot run on the C engine: the library was not"):
        bare["default"](runtime.cpu())
    monkeypatch.setenv("TVMRT_GRAPH_ENGINE", "fast")
    with pytest.raises(ArgumentTypeError, match="TVMRT_GRAPH_ENGINE must be unset"):
        lib["default"](runtime.cpu())


def test_long_names_are_whole_in_the_info(artifacts: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An input name of 500 characters is a key of the info maps, whole, in both engines."""
    path = str(artifacts / "contrib" / "nms-static" / "deploy.so")
    lib = runtime.load_module(path)
    doc = json.loads(lib["get_graph_json"]())
    long_name = "input_" + "x" * 494
    doc["nodes"][doc["arg_nodes"][0]]["name"] = long_name
    text = json.dumps(doc)
    c_mod = graph_executor.create(text, lib, runtime.cpu())
    assert isinstance(c_mod.module, native_module.NativeModule)
    monkeypatch.setenv("TVMRT_GRAPH_ENGINE", "python")
    py_mod = graph_executor.create(text, lib, runtime.cpu())
    assert not isinstance(py_mod.module, native_module.NativeModule)
    assert long_name in _info(c_mod)[0]
    assert _info(c_mod) == _info(py_mod)


def test_a_library_importing_tvm_functions_by_name_runs_on_the_c_executor(
    artifacts: Path,
) -> None:
    """TVM 0.16's system-library build imports TVMBackendAllocWorkspace & co. by name and
    registers its functions at load: with tvmrt's names global (the normal case) its graph
    runs on the C executor, bitwise TVM's golden."""
    folder = artifacts / "relay016" / "systemlib-so"
    golden = _golden(folder / "golden.npz")
    mod = graph_executor.GraphModule(
        runtime.load_module(str(folder / "deploy.so"))["default"](runtime.cpu())
    )
    assert isinstance(mod.module, native_module.NativeModule)
    mod.set_input("data", golden["data"])
    mod.run()
    np.testing.assert_array_equal(mod.get_output(0).numpy(), golden["output_0"])


@pytest.mark.parametrize("name", ["dense-cblas", "dense-mkl", "dense-dnnl"])
def test_kernels_calling_a_function_registered_in_python_run_on_the_c_executor(
    artifacts: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """TVM's BLAS offload calls ``tvm.contrib.<blas>.matmul`` by name, which only Python's
    registry has: the C runtime asks it (TVMBackendGetFuncFromEnv), and the C executor's
    output is bitwise the Python engine's (the same matmul), near TVM's golden."""
    folder = artifacts / "contrib" / name
    golden = _golden(folder / "golden.npz")
    outs = []
    for engine in ("", "python"):
        monkeypatch.setenv("TVMRT_GRAPH_ENGINE", engine)
        lib = runtime.load_module(str(folder / "deploy.so"))
        mod = graph_executor.GraphModule(lib["default"](runtime.cpu()))
        assert isinstance(mod.module, native_module.NativeModule) == (engine == "")
        mod.run(a=golden["a"])
        outs.append(mod.get_output(0).numpy())
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[0], golden["output_0"], rtol=1e-5, atol=1e-5)


def test_a_library_written_over_another_at_one_path_is_the_new_one(
    artifacts: Path, tmp_path: Path
) -> None:
    """An RPC server keeps an uploaded file's name: a second model uploaded as deploy.so
    is another library at the same path. The C runtime loads the bytes the file holds now
    (dlopen of the path would hand back the first library, still mapped)."""
    first = artifacts / "batched" / "cnn-b1" / "deploy_lib.so"
    second = artifacts / "relay016" / "linkparams-so"
    path = tmp_path / "deploy.so"
    shutil.copyfile(first, path)
    held = graph_executor.GraphModule(runtime.load_module(str(path))["default"](runtime.cpu()))
    assert isinstance(held.module, native_module.NativeModule)
    shutil.copyfile(second / "deploy.so", tmp_path / "next.so")
    os.replace(tmp_path / "next.so", path)  # as an upload replaces the file
    golden = _golden(second / "golden.npz")
    mod = graph_executor.GraphModule(runtime.load_module(str(path))["default"](runtime.cpu()))
    assert isinstance(mod.module, native_module.NativeModule)
    mod.set_input("data", golden["data"])
    mod.run()
    np.testing.assert_array_equal(mod.get_output(0).numpy(), golden["output_0"])
    assert held.get_num_inputs() != mod.get_num_inputs() or held.get_input_info() != (
        mod.get_input_info()
    )


def test_a_param_name_holding_a_nul_byte_is_refused_by_the_c_executor(artifacts: Path) -> None:
    """C names are C strings: the C runtime read "x\\0junk" as "x" and loaded that
    input. It refuses the blob now; the Python engine keeps TVM's reading (a name of
    ``std::string``, which no input has, so it is ignored)."""
    c_mod, py_mod = _both(artifacts / "batched" / "cnn-b1" / "deploy_lib.so")
    blob = runtime.save_param_dict({"x\x00junk": runtime.array(np.ones((1, 1, 8, 8), "float32"))})
    for mod in (c_mod, py_mod):
        mod.set_input("x", np.zeros((1, 1, 8, 8), "float32"))
    with pytest.raises(ParamsFormatError, match=r"names\[0\] contains a NUL byte"):
        c_mod.load_params(bytes(blob))
    py_mod.load_params(bytes(blob))
    for mod in (c_mod, py_mod):
        np.testing.assert_array_equal(mod.get_input("x").numpy(), 0)


def test_zero_copy_bindings_keep_their_memory(artifacts: Path) -> None:
    """The C executor holds what it views: a factory's weights after the factory itself is
    gone, and an NDArray bound with set_input_zero_copy after the caller dropped it (as the
    Python engine keeps the NDArray). Freed memory is then reused, so a view of it would
    read garbage."""
    folder = artifacts / "batched" / "cnn-b1"
    golden = _golden(folder.parent / "golden.npz")
    x, want = golden["x"][:1], golden["y"][:1]
    # the factory is a temporary: nothing but the executor refers to its weights
    mod = graph_executor.GraphModule(
        runtime.load_module(str(folder / "deploy_lib.so"))["default"](runtime.cpu())
    )
    assert isinstance(mod.module, native_module.NativeModule)
    mod.set_input_zero_copy("x", runtime.ndarray.array(x.copy()))  # dropped at once
    gc.collect()
    junk = [np.full(4096, np.nan, "float32") for _ in range(2000)]
    mod.run()
    np.testing.assert_allclose(mod.get_output(0).numpy(), want, rtol=1e-5, atol=1e-6)
    del junk


def test_a_bad_out_argument_is_refused_in_the_python_engines_words(artifacts: Path) -> None:
    """The C executor checks an out argument's shape and dtype; a numpy array (which TVM's
    face refuses too) and a read-only NDArray it cannot see, so the face refuses them before
    C is called: the C runtime once copied into a read-only out, and into a copy of a numpy
    one that could not be viewed, and said nothing."""
    c_mod, py_mod = _both(artifacts / "relay016" / "systemlib-so" / "deploy.so")
    shape = tuple(c_mod.get_output(0).shape)
    frozen = np.zeros(shape, "float32")
    frozen.setflags(write=False)
    read_only = runtime.NDArray.from_host_memory(frozen, runtime.DataType("float32"), runtime.cpu())
    outs: list[object] = [
        np.zeros(shape, "float32"),
        np.zeros(shape[::-1], "float32").T,  # Fortran order: no C view of it
        read_only,
        runtime.empty((2, 2), "float32"),
    ]
    calls = [("get_output", 0), ("get_output", "no_such_output"), ("get_input", "data")]
    for out in outs:
        for name, key in calls:
            words = []
            for mod in (c_mod, py_mod):
                with pytest.raises((ArgumentTypeError, ArrayError, InputNotFoundError)) as err:
                    getattr(mod, name)(key, out)
                words.append((type(err.value), str(err.value)))
            assert words[0] == words[1], (name, key, type(out).__name__)
    np.testing.assert_array_equal(frozen, 0)


def _aligned(shape: tuple[int, ...], writable: bool) -> np.ndarray:
    """Zeros at a 64-byte boundary (what a zero-copy binding needs), maybe read-only."""
    count = int(np.prod(shape))
    raw = np.zeros(count + 16, "float32")
    start = (-raw.ctypes.data % 64) // 4
    view = raw[start : start + count].reshape(shape)
    view.setflags(write=writable)
    return view


def test_zero_copy_bindings_are_refused_in_the_python_engines_words(artifacts: Path) -> None:
    """The C executor checks a binding's shape, dtype, device, layout and alignment; the face
    refuses a numpy array (bound as a copy before, so the graph wrote where nobody looked)
    and a read-only NDArray as an output (written by kernels before) first. Every case gives
    both engines' words, and a read-only input binding is taken by both."""
    c_mod, py_mod = _both(artifacts / "relay016" / "systemlib-so" / "deploy.so")
    shapes = {"input": tuple(c_mod.get_input(0).shape), "output": tuple(c_mod.get_output(0).shape)}

    def ndarray(values: np.ndarray) -> runtime.NDArray:
        return runtime.NDArray.from_host_memory(values, runtime.DataType("float32"), runtime.cpu())

    for which, shape in shapes.items():
        frozen = _aligned(shape, writable=False)
        values: list[object] = [
            _aligned(shape, writable=True),
            frozen,
            ndarray(frozen),
            ndarray(_aligned((1, *shape), writable=True)),
            ndarray(np.zeros(int(np.prod(shape)) + 1, "float32")[1:].reshape(shape)),  # unaligned
        ]
        key = "data" if which == "input" else 0
        for value in values:
            words = []
            for mod in (c_mod, py_mod):
                bind = mod.set_input_zero_copy if which == "input" else mod.set_output_zero_copy
                try:
                    bind(key, value)
                    words.append("bound")
                except (ArgumentTypeError, ArrayError) as err:
                    words.append(f"{type(err).__name__}: {err}")
            assert words[0] == words[1], (which, words)
        assert not frozen.any()
    with pytest.raises(InputNotFoundError):  # the key before the value, as the Python engine
        c_mod.set_output_zero_copy("no_such_output", np.zeros(3))


def test_an_input_bound_to_read_only_memory_is_never_written(artifacts: Path) -> None:
    """The face tells the C executor that a binding's memory is read-only (tvmrt's third
    argument of set_input_zero_copy): set_input, in every form, and load_params of a blob
    naming that input are refused in the Python engine's words; the C runtime wrote it."""
    c_mod, py_mod = _both(artifacts / "relay016" / "systemlib-so" / "deploy.so")
    shape = tuple(c_mod.get_input("data").shape)
    blob = runtime.save_param_dict({"data": np.ones(shape, "float32")})
    attempts: list[tuple[str, Any]] = [
        ("set_input", np.ones(shape, "float32")),
        ("set_input", np.ones(shape, "float64")),  # converted first on the C engine
        ("set_input", runtime.array(np.ones(shape, "float32"))),
        ("load_params", blob),
    ]
    for mod in (c_mod, py_mod):
        frozen = _aligned(shape, writable=False)
        mod.set_input_zero_copy(
            "data",
            runtime.NDArray.from_host_memory(frozen, runtime.DataType("float32"), runtime.cpu()),
        )
        for name, value in attempts:
            with pytest.raises(ArrayError, match="input 'data' is bound to read-only memory"):
                getattr(mod, name)(*(("data", value) if name == "set_input" else (value,)))
        assert not frozen.any(), "the read-only memory was written"
        mod.set_input_zero_copy("data", runtime.empty(shape, "float32"))  # writable again
        mod.set_input("data", np.ones(shape, "float32"))


def test_odd_arguments_get_the_python_engines_answers(artifacts: Path) -> None:
    """Values other than arrays and blobs other than bytes, through both engines: a list or
    a scalar is converted by numpy as TVM's set_input (copyfrom) does (the C executor
    refused them before), a str blob gets load_param_dict's words."""
    c_mod, py_mod = _both(artifacts / "relay016" / "systemlib-so" / "deploy.so")
    shape = tuple(c_mod.get_input("data").shape)
    calls: list[tuple[str, tuple[Any, ...]]] = [
        ("set_input", ("data", [[1.0, 2.0]])),
        ("set_input", ("data", np.ones(shape, "float32").tolist())),
        ("set_input", ("data", "hello")),
        ("set_input", ("data", None)),
        ("set_input", ("data", 3.0)),
        ("set_input", ("data", np.ones((2, 2), "float32"))),
        ("set_input", (99, np.ones(shape, "float32"))),
        ("load_params", ("abc",)),
        ("load_params", (b"garbage",)),
        ("load_params", (np.frombuffer(runtime.save_param_dict({}), "uint8"),)),
        ("get_output", (99,)),
        ("get_input_index", ("nope",)),
    ]
    for name, args in calls:
        answers = []
        for mod in (c_mod, py_mod):
            try:
                getattr(mod, name)(*args)
                answers.append("ok")
            except Exception as err:
                answers.append(f"{type(err).__name__}: {err}")
        assert answers[0] == answers[1], (name, answers)
    np.testing.assert_array_equal(c_mod.get_input("data").numpy(), np.ones(shape))
