"""``tvmrt.register_extension``: objects of a registered class pass to compiled functions as
the handle they name (TVM 0.19's ``tests/python/runtime/test_runtime_extension.py``: a
``DLTensor``-compatible view), which tvmrt lacked (issue 47, item 4)."""

from __future__ import annotations

import numpy as np
import pytest

import tvmrt
from support.built import built
from support.paths import REPO
from tvmrt import runtime
from tvmrt.runtime._ctypes_api import ArgTypeCode
from tvmrt.runtime.module import ModulePropertyMask


@tvmrt.register_extension
class TensorView:
    """A user's own tensor type that is DLTensor-compatible, as TVM's test makes one."""

    _tvm_tcode = ArgTypeCode.DLTENSOR_HANDLE

    def __init__(self, arr: runtime.NDArray) -> None:
        self.arr = arr

    @property
    def _tvm_handle(self) -> int:
        return self.arr._tvm_handle


def test_an_extension_object_reaches_a_kernel_as_its_dltensor() -> None:
    models = built(REPO / "tests" / "native" / "build_tvm_apps.py", "tvm_apps")
    addone = runtime.load_module(str(models / "addone_dll.so"))["addone"]
    a = tvmrt.nd.array(np.arange(6, dtype="float32"))
    b = tvmrt.nd.empty((6,), "float32")
    addone(TensorView(a), TensorView(b))
    np.testing.assert_array_equal(b.numpy(), np.arange(6, dtype="float32") + 1)


def test_registration_needs_a_type_code_and_no_fcreate() -> None:
    class NoCode:
        pass

    with pytest.raises(TypeError, match="has no _tvm_tcode"):
        tvmrt.register_extension(NoCode)
    with pytest.raises(ValueError, match="fcreate is no longer supported"):
        tvmrt.register_extension(TensorView, fcreate=lambda h: h)


def test_a_handle_that_is_not_an_address_is_refused() -> None:
    @tvmrt.register_extension
    class Bad:
        _tvm_tcode = ArgTypeCode.DLTENSOR_HANDLE
        _tvm_handle = "nowhere"

    echo = tvmrt.runtime.load_module(
        str(built(REPO / "tests" / "native" / "build_tvm_apps.py", "tvm_apps") / "addone_dll.so")
    )["addone"]
    with pytest.raises(TypeError, match=r"Bad\._tvm_handle is str, expected an int address"):
        echo(Bad(), Bad())


def test_a_static_library_is_dso_exportable_as_in_tvm() -> None:
    # load_static_library's module said False: export_library could not take it
    obj = built(REPO / "tests" / "native" / "build_tvm_apps.py", "tvm_apps") / "addone_sys.o"
    static = runtime.load_static_library(str(obj), ["addonesys"])
    assert static.is_dso_exportable is True
    assert static.get_property_mask() & ModulePropertyMask.DSO_EXPORTABLE
