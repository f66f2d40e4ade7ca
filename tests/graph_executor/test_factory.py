"""GraphExecutorFactory: lib["default"](dev), graph/params getters, binary round trip."""

from __future__ import annotations

import numpy as np
import pytest

from tvmrt import runtime
from tvmrt.binfmt.stream import ByteReader
from tvmrt.contrib import graph_executor
from tvmrt.error import FunctionNotFoundError, ParamsFormatError, TVMError
from tvmrt.runtime.graph_executor.factory import load_factory_binary, save_factory_binary
from tvmrt.testing import GraphBuilder, numpy_op_library

CPU = runtime.cpu()


def mlp_factory() -> graph_executor.GraphExecutorFactory:
    b = GraphBuilder()
    x = b.input("data", (1, 4))
    w = b.input("p0", (4, 3))
    bias = b.input("p1", (1, 3))
    (h,) = b.op("tvmgen_default_fused_dense", "matmul", [x, w], [(1, 3)])
    (y,) = b.op("tvmgen_default_fused_add", "add", [h, bias], [(1, 3)])
    b.output(y)
    rng = np.random.default_rng(1)
    params = {
        "p0": runtime.array(rng.uniform(size=(4, 3)).astype("float32")),
        "p1": runtime.array(rng.uniform(size=(1, 3)).astype("float32")),
    }
    return graph_executor.GraphExecutorFactory(b.to_json(), params, "default", numpy_op_library())


def test_default_creates_an_executor_with_params():
    lib = mlp_factory()
    mod = graph_executor.GraphModule(lib["default"](CPU))
    x = np.arange(4, dtype="float32").reshape(1, 4)
    mod.run(data=x)
    p = lib["get_graph_params"]()
    np.testing.assert_allclose(
        mod.get_output(0).numpy(), x @ p["p0"].numpy() + p["p1"].numpy(), rtol=1e-6
    )
    assert "tvmgen_default_fused_add" in lib["get_graph_json"]()
    assert lib.type_key == "GraphExecutorFactory"


def test_executors_share_the_factory_weights():
    lib = mlp_factory()
    mods = [graph_executor.GraphModule(lib["default"](CPU)) for _ in range(3)]
    w = lib.params["p0"].data_ptr
    assert all(m.get_input("p0").data_ptr == w for m in mods)  # weights held once
    # and no pool was allocated for them
    ex = mods[0].executor
    assert all(e.data_ptr != w or i == ex.graph.entry_id(1) for i, e in enumerate(ex.entries))


def test_params_of_another_shape_but_same_size_are_copied_not_shared():
    lib = mlp_factory()
    lib.params["p1"] = runtime.array(np.arange(3, dtype="float32"))  # (3,) vs graph (1, 3)
    mod = graph_executor.GraphModule(lib["default"](CPU))
    assert mod.get_input("p1").data_ptr != lib.params["p1"].data_ptr
    np.testing.assert_array_equal(mod.get_input("p1").numpy(), [[0, 1, 2]])


def test_remove_params_and_load_separately():
    lib = mlp_factory()
    blob = runtime.save_param_dict(lib["get_graph_params"]())
    bare = lib["remove_params"]()
    assert bare["get_graph_params"]() == {}
    mod = graph_executor.GraphModule(bare["default"](CPU))
    mod.load_params(blob)
    ref = graph_executor.GraphModule(lib["default"](CPU))
    x = np.ones((1, 4), "float32")
    mod.run(data=x)
    ref.run(data=x)
    np.testing.assert_array_equal(mod.get_output(0).numpy(), ref.get_output(0).numpy())


def test_binary_round_trip_is_byte_exact():
    lib = mlp_factory()
    payload = save_factory_binary(lib)
    reader = ByteReader(payload, "factory", ParamsFormatError)
    back = load_factory_binary(reader)
    assert reader.remaining == 0
    assert back.graph_json == lib.graph_json
    assert back.module_name == "default"
    assert list(back.params) == ["p0", "p1"]
    back.import_module(numpy_op_library())
    assert save_factory_binary(back) == payload


def test_truncated_binary_raises():
    payload = save_factory_binary(mlp_factory())
    for cut in (0, 7, 20, len(payload) // 2, len(payload) - 1):
        with pytest.raises(ParamsFormatError, match=r"truncated|claims|remain"):
            load_factory_binary(ByteReader(payload[:cut], "factory", ParamsFormatError))


def test_debug_create_checks_module_name_and_cuda_graph_is_absent():
    lib = mlp_factory()
    with pytest.raises(TVMError, match="holds model 'default', not 'other'"):
        lib["debug_create"]("other", CPU)
    with pytest.raises(FunctionNotFoundError, match="no CUDA graph executor"):
        lib["cuda_graph_create"](CPU)
    with pytest.raises(AttributeError):
        lib["nope"]


def test_tvm_graph_executor_factory_create_takes_name_array_pairs():
    """TVM's ``tvm.graph_executor_factory.create(graph_json, lib, name, n0, a0, ...)``."""
    made = mlp_factory()
    create = runtime.get_global_func("tvm.graph_executor_factory.create")
    pairs = [item for pair in made.params.items() for item in pair]
    factory = create(made.graph_json, made.lib, "default", *pairs)
    assert factory.type_key == "GraphExecutorFactory"
    assert factory.imported_modules == [made.lib]
    assert factory["get_graph_params"]().keys() == made.params.keys()
    with pytest.raises(TVMError, match=r"name, array pairs \(got 1 values\)"):
        create(made.graph_json, made.lib, "default", "p0")
    with pytest.raises(TVMError, match=r"a name \(str\) and an NDArray, got str and int"):
        create(made.graph_json, made.lib, "default", "p0", 3)
