"""Small parts of TVM v0.19's runtime API that ported code relies on (issue 22, item 16).

Each expectation is TVM v0.19's, from its source: ``python/tvm/runtime/module.py``
(``is_dso_exportable`` is a property), ``python/tvm/_ffi/runtime_ctypes.py`` (``Device``'s
constants and ``texture_spatial_limit()``, ``DataType("void")`` prints ``void``),
``python/tvm/runtime/container.py`` (``String(content)``) and ``src/node/object_path.cc``
(how an ``ObjectPath`` prints and compares).
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

import tvmrt
from tvmrt.runtime import DataType, Device, ObjectPath, ObjectPathPair, String


def test_is_dso_exportable_is_a_property(artifacts: Path) -> None:
    lib = tvmrt.runtime.load_module(str(artifacts / "mobilenet_v1" / "deploy_lib.so"))
    assert lib.is_dso_exportable is False  # a plain .so: tvmrt holds no objects of it
    if lib.is_dso_exportable:  # the check TVM's export_library makes
        pytest.fail("a shared library read as exportable")


def test_device_class_constants_are_tvm_v019s() -> None:
    expected = {
        "kDLCPU": 1, "kDLCUDA": 2, "kDLCUDAHost": 3, "kDLOpenCL": 4, "kDLVulkan": 7,
        "kDLMetal": 8, "kDLVPI": 9, "kDLROCM": 10, "kDLROCMHost": 11, "kDLExtDev": 12,
        "kDLCUDAManaged": 13, "kDLOneAPI": 14, "kDLWebGPU": 15, "kDLHexagon": 16,
        "kDLAOCL": 32, "kDLSDAccel": 33, "kOpenGL": 34, "kDLMicroDev": 35,
    }  # fmt: skip
    assert {name: getattr(Device, name) for name in expected} == expected
    dev = tvmrt.cpu(0)
    assert dev.kDLCPU == dev.device_type
    assert Device.MASK2STR[Device.kDLCUDA] == "cuda"
    assert (Device.STR2MASK["llvm"], Device.STR2MASK["nvptx"]) == (1, 2)
    assert pickle.loads(pickle.dumps(dev)) == dev  # still a two-field value


def test_texture_spatial_limit_is_a_method_none_on_the_cpu() -> None:
    assert tvmrt.cpu(0).texture_spatial_limit() is None


def test_void_prints_as_void() -> None:
    void = DataType("void")
    assert str(void) == "void"
    assert (void.type_code, void.bits, void.lanes) == (3, 0, 0)
    assert DataType("") == void


def test_string_takes_content_by_keyword() -> None:
    s = String(content="conv2d")
    assert s == "conv2d"
    assert isinstance(s, tvmrt.runtime.Object)
    assert String("x") == "x"


def test_object_path_prints_and_compares_as_tvm() -> None:
    path = ObjectPath.root().attr("body").array_index(2).map_value("k").attr(None)
    assert str(path) == '<root>.body[2]["k"].<unknown attribute>'
    assert len(path) == 5
    assert str(ObjectPath.root("x").missing_array_element(3)) == "x[<missing element #3>]"
    assert str(ObjectPath.root().map_value(7).missing_map_entry()) == "<root>[7][<missing entry>]"
    assert path.get_prefix(2) == ObjectPath.root().attr("body")
    assert ObjectPath.root().attr("body").is_prefix_of(path)
    assert not ObjectPath.root("other").is_prefix_of(path)
    assert path.parent is not None
    assert str(path.parent) == '<root>.body[2]["k"]'
    assert ObjectPath.root().array_index(1) != ObjectPath.root().missing_array_element(1)
    assert type(path).__name__ == "UnknownAttributeAccessPath"
    with pytest.raises(IndexError, match="at least 1"):
        path.get_prefix(0)
    with pytest.raises(IndexError, match="longer than the path"):
        path.get_prefix(6)
    with pytest.raises(ValueError, match=r"Use ObjectPath.root\(\)"):
        ObjectPath()
    pair = ObjectPathPair(path, ObjectPath.root())
    assert (pair.lhs_path, pair.rhs_path) == (path, ObjectPath.root())
