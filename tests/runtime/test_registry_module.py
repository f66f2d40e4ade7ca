"""Global function registry, PackedFunc, Module, PyModule, load_module dispatch, system_lib."""

from __future__ import annotations

from pathlib import Path

import pytest

from tvmrt import runtime
from tvmrt.error import FunctionNotFoundError, InvalidArgumentError, ModuleLoadError
from tvmrt.runtime import Module, PackedFunc, PyModule


def test_register_direct_decorator_and_override():
    def f(x):
        return x + 1

    runtime.register_func("test.reg.direct", f)
    assert runtime.get_global_func("test.reg.direct")(1) == 2

    @runtime.register_func("test.reg.decorated")
    def g(x):
        return x * 2

    assert g(2) == 4  # the decorator returns the function itself
    assert runtime.get_global_func("test.reg.decorated")(3) == 6

    @runtime.register_func
    def test_reg_by_name():
        return "named"

    assert runtime.get_global_func("test_reg_by_name")() == "named"
    with pytest.raises(
        ValueError, match=r"'test\.reg\.direct' is already registered; pass override=True"
    ):
        runtime.register_func("test.reg.direct", f)
    runtime.register_func("test.reg.direct", lambda x: x - 1, override=True)
    assert runtime.get_global_func("test.reg.direct")(1) == 0
    names = runtime.list_global_func_names()
    assert {"test.reg.direct", "test.reg.decorated", "test_reg_by_name"} <= set(names)
    assert names == sorted(names)
    for name in ("test.reg.direct", "test.reg.decorated", "test_reg_by_name"):
        runtime.remove_global_func(name)
    assert runtime.get_global_func("test.reg.direct", allow_missing=True) is None
    with pytest.raises(
        FunctionNotFoundError, match=r"Cannot find global function test\.reg\.direct"
    ):
        runtime.get_global_func("test.reg.direct")
    with pytest.raises(FunctionNotFoundError):
        runtime.remove_global_func("test.reg.direct")


def test_packed_func_wraps_and_binds():
    f = PackedFunc(lambda a, b: a + b, "add")
    assert f(1, 2) == 3
    assert f.name == "add"
    assert repr(f) == "PackedFunc('add')"
    bound = f.bind_arrays([1, 2])  # type: ignore[list-item]
    assert bound() == 3
    with pytest.raises(TypeError, match="needs a callable"):
        PackedFunc(3)  # type: ignore[arg-type]


def test_module_functions_and_imports():
    inner = PyModule({"inner_f": lambda: "inner"})
    outer = PyModule({"outer_f": lambda: "outer", "__tvm_main__": lambda: "main"})
    outer.import_module(inner)
    assert outer.imported_modules == [inner]
    assert outer["outer_f"]() == "outer"
    assert outer.get_function("inner_f", query_imports=True)() == "inner"
    assert outer.implements_function("inner_f", query_imports=True)
    assert not outer.implements_function("inner_f")
    assert outer.entry_func() == "main"
    assert outer() == "main"
    with pytest.raises(AttributeError, match="Module has no function 'inner_f'"):
        outer["inner_f"]
    with pytest.raises(ValueError, match="Can only take string as function name"):
        outer[3]  # type: ignore[index]
    with pytest.raises(TypeError, match="can only import a Module"):
        outer.import_module("x")  # type: ignore[arg-type]
    assert outer.type_key == "py"
    assert "type_key='py'" in repr(outer)


def test_an_import_cycle_is_refused_as_tvm_does():
    a, b, c = PyModule({}), PyModule({}), PyModule({})
    a.import_module(b)
    b.import_module(c)
    with pytest.raises(InvalidArgumentError, match="Cyclic dependency detected during import"):
        c.import_module(a)
    with pytest.raises(InvalidArgumentError, match="cannot import itself"):
        a.import_module(a)
    assert c.imported_modules == []
    assert a.imported_modules == [b]
    a.import_module(c)  # a diamond is no cycle
    assert a.implements_function("x", query_imports=True) is False


def test_module_base_has_no_functions():
    m = Module()
    assert m.type_key == "module"
    assert m.format == ""
    assert not m.implements_function("x")


def test_system_lib():
    runtime.register_system_lib_func("mylib_add", lambda a, b: a + b)
    lib = runtime.system_lib()
    assert lib is runtime.system_lib()
    assert lib["mylib_add"](1, 2) == 3
    assert runtime.system_lib("mylib_")["add"](2, 2) == 4
    assert lib.type_key == "system_lib"


def test_load_module_errors(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        runtime.load_module(tmp_path / "missing.so")
    weird = tmp_path / "model.weird"
    weird.write_bytes(b"x")
    with pytest.raises(
        ModuleLoadError, match=r"no loader for file kind 'weird'; supported kinds are"
    ):
        runtime.load_module(weird)
    # ModuleLoadError is an OSError, like ctypes' own load errors
    with pytest.raises(OSError, match="no loader"):
        runtime.load_module(weird)


def test_load_module_uses_registered_loader(tmp_path: Path):
    path = tmp_path / "model.tvmrttest"
    path.write_text("hello")
    runtime.register_func(
        "runtime.module.loadfile_tvmrttest",
        lambda p: PyModule({"read": lambda: Path(p).read_text()}),
    )
    try:
        assert runtime.load_module(path)["read"]() == "hello"
        assert runtime.load_module(str(path), fmt="tvmrttest")["read"]() == "hello"
    finally:
        runtime.remove_global_func("runtime.module.loadfile_tvmrttest")
