"""TVM v0.19 fidelity: the errors TVM users catch, the tvm.runtime surface, export_library.

Each expectation cites what TVM v0.19's source does (docs/tvm-compat.md has the table).
"""

from __future__ import annotations

import ctypes
import pickle
import shutil
import tarfile
import warnings

import numpy as np
import pytest

import tvmrt
from tvmrt import error, runtime
from tvmrt.contrib import graph_executor


# -- item 2: errors ------------------------------------------------------------------
def test_get_global_func_unknown_is_value_error_and_tvm_error():
    # TVM: python/tvm/_ffi/registry.py raises ValueError("Cannot find global function ...")
    with pytest.raises(ValueError, match=r"Cannot find global function no\.such\.func") as info:
        runtime.get_global_func("no.such.func")
    assert isinstance(info.value, error.TVMError)
    assert isinstance(info.value, AttributeError)  # tvmrt's FunctionNotFoundError before
    assert runtime.get_global_func("no.such.func", allow_missing=True) is None


def test_register_taken_name_is_internal_error_like_tvm():
    # TVM: Registry::Register fails ICHECK(can_override) -> tvm.error.InternalError
    runtime.register_func("test.compat.taken", lambda: 1, override=True)
    with pytest.raises(error.InternalError, match=r"'test\.compat\.taken' is already registered"):
        runtime.register_func("test.compat.taken", lambda: 2)
    with pytest.raises(ValueError, match="already registered"):
        runtime.register_func("test.compat.taken", lambda: 2)
    assert runtime.get_global_func("test.compat.taken")() == 1
    runtime.register_func("test.compat.taken", lambda: 3, override=True)
    assert runtime.get_global_func("test.compat.taken")() == 3
    runtime.remove_global_func("test.compat.taken")


def test_missing_module_file_is_value_error_and_file_not_found(tmp_path):
    # TVM: load_module raises ValueError(f"cannot find file {path}")
    missing = tmp_path / "nope.so"
    with pytest.raises(ValueError, match=r"nope\.so") as info:
        runtime.load_module(str(missing))
    assert isinstance(info.value, error.TVMError)
    assert isinstance(info.value, FileNotFoundError)
    assert "nope.so" in str(info.value)


def test_argument_errors_are_tvm_errors():
    with pytest.raises(error.TVMError):
        runtime.save_param_dict([1, 2])  # type: ignore[arg-type]
    with pytest.raises(error.TVMError):
        runtime.register_func(3)  # type: ignore[call-overload]
    with pytest.raises(error.TVMError):
        runtime.profiling.Report([], {}, {"x": object()})  # type: ignore[dict-item]


def test_time_evaluator_number_zero_is_refused():
    # TVM divides by number (speed = duration / number): number=0 gives inf or nan
    mod = runtime.PyModule()
    mod.add_function("f", lambda: None)
    with pytest.raises(error.InvalidArgumentError, match="must be > 0"):
        mod.time_evaluator("f", tvmrt.cpu(), number=0)
    with pytest.raises(ValueError, match="must be > 0"):
        mod.time_evaluator("f", tvmrt.cpu(), number=0)


def test_get_source_only_where_there_is_source(artifacts):
    lib = runtime.load_module(str(artifacts / "mobilenet_v1" / "deploy_lib.so"))
    with pytest.raises(error.UnsupportedError, match=r"Module\[library\] does not support"):
        lib.get_source()
    with pytest.raises(NotImplementedError):
        lib.save("x.o")


# -- item 3: the tvm.runtime surface -------------------------------------------------
def test_string_and_shape_tuple_compare_like_tvm():
    s = runtime.String("data")
    assert s == "data"
    assert isinstance(s, str)
    assert isinstance(s, runtime.Object)
    shape = runtime.ShapeTuple([1, 3, np.int64(224), 224])
    assert shape == (1, 3, 224, 224)
    assert shape == [1, 3, 224, 224]
    assert shape != (1, 3, 224)
    assert len(shape) == 4
    assert shape[-1] == 224
    assert all(type(d) is int for d in shape)
    assert hash(shape) == hash((1, 3, 224, 224))
    assert shape.same_as(shape)
    assert not shape.same_as(runtime.ShapeTuple([1, 3, 224, 224]))
    with pytest.raises(TypeError):
        runtime.ShapeTuple([1.5])
    with pytest.raises(error.TVMError):
        runtime.ShapeTuple(7)


def test_convert_and_const_follow_tvm_rules():
    converted = runtime.convert({"a": [1, "b"], "c": 2.5})
    assert converted == {"a": [1, "b"], "c": 2.5}
    assert isinstance(converted["a"][1], runtime.String)
    assert runtime.convert_to_object(None) is None
    func = runtime.convert(lambda x: x + 1)
    assert isinstance(func, runtime.PackedFunc)
    assert func(1) == 2
    with pytest.raises(ValueError, match="key of map"):
        runtime.convert({(1, 2): 3})
    with pytest.raises(TypeError):
        runtime.convert(object())

    class Generic(runtime.ObjectGeneric):
        def asobject(self):
            return runtime.String("generic")

    assert runtime.convert(Generic()) == "generic"
    # TVM's _scalar_type_inference: int32/float32 unless the value needs 64 bits
    assert runtime.const(3).dtype == "int32"
    assert runtime.const(2**40).dtype == "int64"
    assert runtime.const(0.5).dtype == "float32"
    assert runtime.const(1e300).dtype == "float64"
    assert runtime.const(True).dtype == "bool"
    assert runtime.const(np.float16(1.5)).dtype == "float16"
    assert runtime.const(7, "int8") == 7
    assert int(runtime.const(7, "float32")) == 7


def test_enabled_answers_what_runs_here():
    assert runtime.enabled("cpu")
    assert runtime.enabled("llvm -mcpu=skylake")
    assert not runtime.enabled("stackvm")
    assert runtime.enabled("cuda") == tvmrt.cuda(0).exist
    with pytest.raises(ValueError, match="Unknown optional runtime"):
        runtime.enabled("quantum")


def test_ndarray_same_as_copyto_mem_scope_and_sync():
    a = tvmrt.nd.array(np.arange(6, dtype="float32").reshape(2, 3))
    assert a.same_as(a)
    assert not a.same_as(tvmrt.nd.array(a.numpy()))
    assert not a.same_as(a.numpy())
    b = a.copyto(tvmrt.cpu(0), mem_scope=None)
    np.testing.assert_array_equal(b.numpy(), a.numpy())
    assert not b.same_as(a)
    tvmrt.cpu(0).sync()
    tvmrt.cpu(0).sync(stream=None)


def test_nd_namespace_has_tvm_constructors_and_numpyasarray():
    for name in ("cpu", "cuda", "gpu", "opencl", "cl", "vulkan", "metal", "rocm", "ext_dev"):
        assert callable(getattr(tvmrt.nd, name)), name
    assert tvmrt.nd.cuda(1) == tvmrt.cuda(1)
    data = np.arange(6, dtype="int16").reshape(2, 3)
    tensor, shape = tvmrt.nd.numpyasarray(data)
    assert tensor.ndim == 2
    assert list(shape) == [2, 3]
    assert tensor.data == data.ctypes.data
    assert (tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes) == (0, 16, 1)
    view = np.ctypeslib.as_array(ctypes.cast(tensor.data, ctypes.POINTER(ctypes.c_int16)), (6,))
    np.testing.assert_array_equal(view, data.ravel())
    with pytest.raises(ValueError, match="C-contiguous"):
        tvmrt.nd.numpyasarray(data.T)


def test_report_and_debug_runtime_alias():
    assert runtime.Report is runtime.profiling.Report
    from tvmrt.contrib.debugger import debug_executor, debug_runtime

    assert debug_runtime.GraphModuleDebug is debug_executor.GraphModuleDebug
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(error.TVMError):
            debug_runtime.create("{}", runtime.PyModule(), tvmrt.cpu())
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)


def test_datatype_is_immutable_so_interning_is_safe():
    t = runtime.DataType("float32x4")
    with pytest.raises(AttributeError, match="immutable"):
        t.lanes = 1
    with pytest.raises(error.TVMError):
        del t.bits
    assert runtime.DataType("float32x4").lanes == 4
    assert tvmrt.nd.empty((2,), "float32x4").nbytes == 32  # not poisoned to 8
    assert t.with_lanes(1) == "float32"
    assert t.with_lanes(1).lanes == 1
    assert pickle.loads(pickle.dumps(t)).lanes == 4


# -- item 3: export_library ------------------------------------------------------------
def _run_factory(path, golden):
    module = graph_executor.GraphModule(runtime.load_module(str(path))["default"](tvmrt.cpu()))
    rows = []
    for sample in golden["float_input"]:  # one (1, 4) sample at a time
        module.set_input("float_input", sample[None])
        module.run()
        rows.append(module.get_output(0).numpy()[0])
    return np.stack(rows)


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no cc")
@pytest.mark.parametrize("suffix", ["so", "tar"])
def test_export_library_round_trips_a_factory(artifacts, tmp_path, suffix):
    folder = artifacts / "iris-factory"
    golden = np.load(folder / "golden.npz")
    factory = runtime.load_module(str(folder / "deploy_lib.tar"))
    assert factory.type_key == "GraphExecutorFactory"
    assert factory.is_dso_exportable is True
    out = tmp_path / f"again.{suffix}"
    factory.export_library(str(out))
    again = runtime.load_module(str(out))
    assert again.type_key == "GraphExecutorFactory"
    assert again["get_graph_json"]() == factory["get_graph_json"]()
    np.testing.assert_array_equal(_run_factory(out, golden), golden["output_0"])
    if suffix == "tar":
        with tarfile.open(out) as archive:
            assert sorted(archive.getnames()) == ["devc.c", "lib0.o"]  # TVM without LLVM
    # without params: TVM's remove_params, exported, then params loaded separately
    bare = factory["remove_params"]()
    bare.import_module(factory.imported_modules[0])
    bare_path = tmp_path / f"bare.{suffix}"
    bare.export_library(str(bare_path))
    assert runtime.load_module(str(bare_path))["get_graph_params"]() == {}


def test_export_library_refuses_shared_object_kernels(artifacts, tmp_path):
    lib = runtime.load_module(str(artifacts / "mobilenet_v1" / "deploy_lib.so"))
    assert lib.is_dso_exportable is False
    with pytest.raises(error.UnsupportedError, match="object files") as info:
        lib.export_library(str(tmp_path / "x.so"))
    assert isinstance(info.value, NotImplementedError)
    assert not (tmp_path / "x.so").exists()
    factory = runtime.load_module(str(artifacts / "iris-factory" / "deploy_lib.tar"))
    with pytest.raises(error.InvalidArgumentError, match="fcompile must be a callable"):
        factory.export_library(str(tmp_path / "y.so"), fcompile="gcc")
