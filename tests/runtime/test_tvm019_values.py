"""Values as TVM 0.19 gives them (issue 47, item 5): graph input and output dtypes as
``String`` objects, ADT slices, views refused in TVM's words (``NDArray::CreateView``), and
``NDArray.is_view``. Each was a difference TVM's own runtime tests
(``tests/python/runtime/test_runtime_nd_array.py``, ``test_runtime_packed_func.py``) find."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import tvmrt
from support.paths import REPO
from tvmrt import runtime
from tvmrt.contrib import graph_executor
from tvmrt.runtime.container import ADT
from tvmrt.runtime.object import String
from tvmrt.runtime.packed_values import ndarray_from_dltensor

DIGITS = REPO / "examples" / "digits" / "model"


def test_graph_input_and_output_dtypes_are_strings() -> None:
    lib = runtime.load_module(str(DIGITS / "deploy.so"))
    module = graph_executor.create((DIGITS / "deploy.json").read_text(), lib, runtime.cpu())
    module.load_params((DIGITS / "deploy.params").read_bytes())
    shapes, dtypes = module.get_input_info()
    assert dtypes == {"image": "float32"}
    assert all(isinstance(d, String) for d in dtypes.values())
    assert shapes["image"] == (360, 64)
    _, out_dtypes = module.get_output_info()
    assert all(isinstance(d, String) and d == "float32" for d in out_dtypes.values())


def test_an_adt_slices_as_tvms_does() -> None:
    adt = ADT(0, [1, 2, 3, 4])
    assert adt[1:3] == [2, 3]
    assert adt[-2:] == [3, 4]
    assert adt[::2] == [1, 3]
    assert adt[:] == [1, 2, 3, 4]
    with pytest.raises(IndexError):
        adt[2:9]  # TVM's helper does not clamp: past the end is an error


@pytest.mark.parametrize(
    ("shape", "offset", "words"),
    [
        ([2048], 0, "the NDArray being viewed only contains 4096 bytes"),
        ([1024], 2048 * 4, "would occupy bytes 8192 <= i_byte < 12288"),
        ([1024], 512 * 4, "would occupy bytes 2048 <= i_byte < 6144"),
    ],
)
def test_a_view_outside_its_array_is_refused_in_tvms_words(
    shape: list[int], offset: int, words: str
) -> None:
    array = tvmrt.nd.array(np.arange(1024, dtype="int32"))
    with pytest.raises(ValueError, match=words):
        array._create_view(shape, relative_byte_offset=offset)


def test_a_subview_is_checked_against_its_immediate_parent() -> None:
    view = tvmrt.nd.array(np.arange(1024, dtype="int32"))._create_view([512])
    with pytest.raises(ValueError, match="would occupy bytes 2048 <= i_byte < 4096"):
        view._create_view([512], relative_byte_offset=512 * 4)
    assert view._create_view([256], relative_byte_offset=256 * 4).numpy()[0] == 256


def test_is_view_is_true_only_for_a_borrowed_dltensor() -> None:
    array = tvmrt.nd.array(np.arange(3, dtype="int64"))
    assert not array.is_view
    assert not array._create_view([3]).is_view  # TVM's CreateView makes an owning array
    borrowed = ndarray_from_dltensor(ctypes.addressof(array.dltensor()))
    assert borrowed.is_view
    assert borrowed.numpy().tolist() == [0, 1, 2]
