"""DataType: TVM's dtype strings, DLPack codes and numpy mapping."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tvmrt.error import DataTypeError
from tvmrt.runtime import DataType, DataTypeCode


@pytest.mark.parametrize(
    ("text", "code", "bits", "lanes", "itemsize", "np_dtype"),
    [
        ("float32", 2, 32, 1, 4, "float32"),
        ("float16", 2, 16, 1, 2, "float16"),
        ("float64", 2, 64, 1, 8, "float64"),
        ("int8", 0, 8, 1, 1, "int8"),
        ("int64", 0, 64, 1, 8, "int64"),
        ("uint8", 1, 8, 1, 1, "uint8"),
        ("bool", 1, 1, 1, 1, "bool"),
        ("bfloat16", 4, 16, 1, 2, None),
        ("float32x4", 2, 32, 4, 16, "float32"),
        ("int4", 0, 4, 1, 1, "int8"),
        ("handle", 3, 64, 1, 8, "uint64"),
        ("e4m3_float8", 7, 8, 1, 1, None),
    ],
)
def test_parse(text, code, bits, lanes, itemsize, np_dtype):
    t = DataType(text)
    assert (t.type_code, t.bits, t.lanes, t.itemsize) == (code, bits, lanes, itemsize)
    assert t == text
    if np_dtype is not None:
        assert t.numpy_dtype == np.dtype(np_dtype)
    else:
        assert t.numpy_dtype.itemsize == itemsize


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [("float", "float32"), ("int", "int32"), ("uint", "uint32"), ("uint1", "bool")],
)
def test_aliases_print_canonically(alias, canonical):
    assert DataType(alias) == canonical


def test_from_code_and_ffi_bool():
    assert DataType.from_code(2, 32) == "float32"
    assert DataType.from_code(DataTypeCode.BOOL, 8) == "bool"  # tvm-ffi and numpy encoding
    assert DataType.from_code(2, 32, 4) == "float32x4"


def test_from_numpy():
    assert DataType(np.float32) == "float32"
    assert DataType(np.dtype("bool")) == "bool"
    assert DataType(np.dtype("uint16")) == "uint16"


def test_is_a_cached_str():
    assert DataType("float32") is DataType("float32")
    assert isinstance(DataType("int8"), str)
    assert repr(DataType("int8")) == "DataType('int8')"


@pytest.mark.parametrize("bad", ["floaty", "float32x", "int0", "x4", "float32x0", "int300"])
def test_unknown_strings(bad):
    with pytest.raises(DataTypeError, match=rf"(unknown type {bad!r}|out of range)"):
        DataType(bad)


def test_unknown_code_and_numpy_dtype():
    with pytest.raises(DataTypeError, match="unknown dtype code 99"):
        DataType.from_code(99, 8)
    with pytest.raises(DataTypeError, match="has no TVM equivalent"):
        DataType(np.dtype("U3"))


@given(
    st.sampled_from(["int", "uint", "float"]),
    st.sampled_from([8, 16, 32, 64]),
    st.sampled_from([1, 2, 4, 8, 16]),
)
def test_round_trip_through_codes(base, bits, lanes):
    text = f"{base}{bits}" + (f"x{lanes}" if lanes > 1 else "")
    t = DataType(text)
    assert DataType.from_code(t.type_code, t.bits, t.lanes) == t
