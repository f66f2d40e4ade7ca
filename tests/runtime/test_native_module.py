"""Values crossing into the C runtime and back through runtime/native_module.py.

The glue's FastCall converts the common arguments in C; anything else (a tuple holding an
array the C runtime cannot view, a Relay VM ADT) is converted by ``_to_c`` into a C object
made by one of the runtime's global functions. These are read back with the runtime's own
readers (``runtime.ArraySize``, ``runtime.GetADTTag`` ...), so what C received is checked,
not what Python meant to send.
"""

from __future__ import annotations

import numpy as np
import pytest

from tvmrt.error import ArgumentTypeError
from tvmrt.runtime import cpu
from tvmrt.runtime.container import ADT
from tvmrt.runtime.dtype import DataType
from tvmrt.runtime.native_module import c_global
from tvmrt.runtime.ndarray import NDArray, array
from tvmrt.runtime.object import ShapeTuple


def _strided(values: np.ndarray) -> NDArray:
    """An NDArray over every other value of a wider array: no C array can view it."""
    wide = np.repeat(values, 2, axis=-1)
    return NDArray.from_host_memory(wide[..., ::2], DataType(str(values.dtype)), cpu(), wide)


def test_a_tuple_with_an_array_c_cannot_view_reaches_c_as_an_array_of_its_items():
    items = (ShapeTuple([2, 3]), _strided(np.arange(4, dtype="float32")), 7)
    assert c_global("runtime.ArraySize")(items) == 3
    shape = c_global("runtime.ArrayGetItem")(items, 0)
    assert isinstance(shape, ShapeTuple)
    assert list(shape) == [2, 3]
    got = c_global("runtime.ArrayGetItem")(items, 1)
    np.testing.assert_array_equal(got.numpy(), np.arange(4, dtype="float32"))
    assert c_global("runtime.GetShapeTupleSize")(ShapeTuple([4, 5, 6])) == 3


def test_a_relay_adt_goes_in_as_a_c_adt_and_comes_back_as_an_adt():
    a = np.arange(6, dtype="float32").reshape(2, 3)
    inner = ADT(3, [array(a), _strided(np.arange(3, dtype="int32"))])  # one view, one copy
    outer = ADT(0, [inner, array(np.ones(2, "float64"))])
    assert c_global("runtime.GetADTSize")(outer) == 2
    assert c_global("runtime.GetADTTag")(inner) == 3
    back = c_global("runtime.GetADTFields")(outer, 0)  # a C ADT, as Python sees it
    assert isinstance(back, ADT)
    assert (back.tag, len(back.fields)) == (3, 2)
    np.testing.assert_array_equal(back.fields[0].numpy(), a)
    np.testing.assert_array_equal(back.fields[1].numpy(), np.arange(3, dtype="int32"))
    ones = c_global("runtime.GetADTFields")(outer, 1)
    assert ones.dtype == "float64"
    assert ones.numpy().tolist() == [1.0, 1.0]


def test_an_adt_field_c_cannot_hold_is_refused_in_its_words():
    with pytest.raises(ArgumentTypeError, match="an ADT field must be an NDArray, a DLTensor"):
        c_global("runtime.GetADTSize")(ADT(0, [1.5]))


@pytest.mark.parametrize(
    "values",
    [
        np.arange(6, dtype="float16").reshape(2, 3),
        np.arange(-3, 3, dtype="int8"),
        np.arange(4, dtype="uint16").reshape(2, 1, 2),
        np.array([0.5, -2.0]),
        np.array([True, False, True]),
        np.zeros((2, 0), "float32"),
    ],
    ids=lambda v: f"{v.dtype}{list(v.shape)}",
)
def test_numpy_of_a_c_array_copies_its_values_the_first_time_and_after(values):
    # numpy() of a C array: the long way the first time a dtype is seen, then one glue call
    # (host_copy); both copies, equal to what went in
    item = c_global("runtime.ArrayGetItem")
    for _ in range(2):
        got = item((array(values),), 0)  # the C array viewing it (bool: a C copy)
        out = got.numpy()
        assert (out.dtype, out.shape) == (values.dtype, values.shape)
        np.testing.assert_array_equal(out, values)
        out[...] = 0  # a copy: the C array keeps its values
        np.testing.assert_array_equal(got.numpy(), values)
