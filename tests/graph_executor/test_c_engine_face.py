"""TVM's ``GraphModule`` face over the C runtime's graph executor (issue 43, item 2).

The C executor is reached the way TVM's Python reaches libtvm_runtime's: the library is
loaded by the C runtime (``native_module.load_file``), its factory's ``default(dev)`` gives a
``GraphExecutor`` module of the C runtime, and ``GraphModule`` wraps it unchanged. Every
packed function the face calls must be there, with the Python engine's results and words:
the Python engine, over the same file, is the reference; TVM 0.16's goldens are the other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tvmrt import runtime
from tvmrt.contrib import graph_executor
from tvmrt.error import ArrayError, InputNotFoundError, InvalidArgumentError, ParamsFormatError
from tvmrt.runtime import native_module


def _both(path: Path) -> tuple[graph_executor.GraphModule, graph_executor.GraphModule]:
    """(C engine, Python engine) executors of one factory library, on the CPU."""
    c_lib = native_module.load_file(str(path))
    py_lib = runtime.load_module(str(path))
    c_mod = graph_executor.GraphModule(c_lib["default"](runtime.cpu()))
    py_mod = graph_executor.GraphModule(py_lib["default"](runtime.cpu()))
    assert c_mod.module.type_key == py_mod.module.type_key == "GraphExecutor"
    assert isinstance(c_mod.module, native_module.NativeModule)
    return c_mod, py_mod


def _info(mod: graph_executor.GraphModule, outputs: bool = False) -> tuple[Any, Any]:
    shapes, dtypes = mod.get_output_info() if outputs else mod.get_input_info()
    return {k: tuple(v) for k, v in shapes.items()}, {k: str(v) for k, v in dtypes.items()}


def test_the_face_runs_a_factory_on_the_c_executor(artifacts: Path) -> None:
    folder = artifacts / "relay016" / "systemlib-so"
    golden = np.load(folder / "golden.npz")
    c_mod, py_mod = _both(folder / "deploy.so")
    for mod in (c_mod, py_mod):
        mod.set_input("data", golden["data"])
        mod.run()
    got = c_mod.get_output(0).numpy()
    np.testing.assert_array_equal(got, golden["output_0"])
    np.testing.assert_array_equal(got, py_mod.get_output(0).numpy())
    # the same round trips through the face: an input read back, an output copied out
    np.testing.assert_array_equal(c_mod.get_input("data").numpy(), golden["data"])
    out = runtime.empty(got.shape, str(got.dtype))
    c_mod.get_output(0, out)
    np.testing.assert_array_equal(out.numpy(), got)
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
    golden = np.load(path.parent / "golden.npz")
    sharing.run(data=golden["data"])
    np.testing.assert_array_equal(sharing.get_output(0).numpy(), golden["output_0"])


def test_output_keys_are_the_python_engines(artifacts: Path) -> None:
    """A node with two outputs is keyed ``name:index``; every key the info gives, and the
    bare node name, finds the same output in both engines; an unknown one is refused in
    the same words."""
    folder = artifacts / "contrib" / "sort-topk"
    golden = np.load(folder / "golden.npz")
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


def test_run_from_inputs_and_end_to_end_benchmark(artifacts: Path) -> None:
    folder = artifacts / "relay016" / "systemlib-so"
    golden = np.load(folder / "golden.npz")
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
    """A writable C-contiguous numpy array is handed to C as a DLTensor of its own memory
    (the executor copies an input from it, and writes an ``out`` into it); a read-only or
    Fortran-ordered one, or a dtype the fast path leaves alone, goes through the Python
    conversion: every route gives the same answer."""
    folder = artifacts / "relay016" / "systemlib-so"
    golden = np.load(folder / "golden.npz")
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
        out = np.zeros_like(golden["output_0"])
        c_mod.get_output(0, out)  # written in place
        np.testing.assert_array_equal(out, golden["output_0"], err_msg=label)
    with pytest.raises(ArrayError, match=r"dtype float32, got shape .* and dtype float64"):
        c_mod.set_input("data", golden["data"].astype("float64"))
    with pytest.raises(ArrayError, match=r"out has shape \(3,\) and dtype int64"):
        c_mod.get_output(0, np.zeros(3, dtype="int64"))
