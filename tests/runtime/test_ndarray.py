"""NDArray: creation, copies, views, alignment, TVM's copyfrom semantics."""

from __future__ import annotations

import numpy as np
import pytest

from tvmrt import runtime
from tvmrt.error import ArrayError
from tvmrt.testing import emulated_device

pytestmark = pytest.mark.arm  # numpy-only: also runs on emulated ARM (make test-arm)


@pytest.mark.parametrize(
    "dtype", ["float32", "float16", "float64", "int8", "uint16", "int64", "bool"]
)
def test_array_round_trip(dtype):
    src = (np.arange(12) % 3).astype(dtype).reshape(3, 4)
    arr = runtime.array(src)
    assert arr.shape == (3, 4)
    assert arr.dtype == dtype
    assert arr.device == runtime.cpu()
    out = arr.numpy()
    np.testing.assert_array_equal(out, src)
    assert out.ctypes.data != arr.data_ptr  # numpy() copies, like TVM


@pytest.mark.parametrize("shape", [(), (0,), (5,), (2, 3, 4), (1, 0, 3)])
def test_empty_is_64_byte_aligned(shape):
    for _ in range(8):
        arr = runtime.empty(shape, "float32")
        assert arr.data_ptr % 64 == 0
        assert arr.shape == shape
        assert arr.byte_offset == 0
        assert arr.is_contiguous


def test_array_from_list_and_ndarray():
    # numpy's default integer, as tvm.nd.array gives: int64, but int32 on 32-bit ARM
    assert runtime.array([1, 2, 3]).dtype == str(np.array([1, 2, 3]).dtype)
    assert runtime.array([1.0, 2.0]).dtype == "float64"
    a = runtime.array(np.ones(3, "float32"))
    b = runtime.array(a)
    assert b.data_ptr != a.data_ptr
    np.testing.assert_array_equal(b.numpy(), 1)


def test_copyfrom_numpy_converts_dtype_and_checks_shape():
    arr = runtime.empty((2, 2), "float32")
    arr.copyfrom(np.full((2, 2), 2.5, dtype="float64"))
    np.testing.assert_array_equal(arr.numpy(), 2.5)
    arr.copyfrom([[1, 2], [3, 4]])
    np.testing.assert_array_equal(arr.numpy(), [[1, 2], [3, 4]])
    arr.copyfrom(np.arange(8, dtype="float32").reshape(2, 4)[:, ::2])  # non-contiguous source
    np.testing.assert_array_equal(arr.numpy(), [[0, 2], [4, 6]])
    with pytest.raises(
        ArrayError, match=r"array shape do not match the shape of NDArray \(4,\) vs \(2, 2\)"
    ):
        arr.copyfrom(np.zeros(4))
    with pytest.raises(TypeError, match="array must be an array_like data"):
        arr.copyfrom(object())


def test_copyfrom_ndarray_checks_byte_size_only():
    a = runtime.empty((4,), "float32")
    a.copyfrom(runtime.array(np.arange(4, dtype="int32")))  # same bytes: reinterpreted, as TVM
    assert a.numpy().view("int32").tolist() == [0, 1, 2, 3]
    with pytest.raises(ArrayError, match="The size in bytes must exactly match"):
        a.copyfrom(runtime.empty((3,), "float32"))


def test_copyto_device_and_array():
    a = runtime.array(np.arange(3, dtype="float32"))
    b = a.copyto(runtime.cpu())
    assert b.data_ptr != a.data_ptr
    np.testing.assert_array_equal(b.numpy(), [0, 1, 2])
    with emulated_device(runtime.cuda().device_type):
        c = a.copyto(runtime.cuda())
        assert c.device == runtime.cuda()
        np.testing.assert_array_equal(c.copyto(runtime.cpu()).numpy(), [0, 1, 2])


def test_setitem_whole_array():
    a = runtime.empty((3,), "float32")
    a[:] = 7
    np.testing.assert_array_equal(a.numpy(), 7)
    a[:] = np.array([1, 2, 3])
    np.testing.assert_array_equal(a.numpy(), [1, 2, 3])
    with pytest.raises(ValueError, match="only supports assignment to the whole array"):
        a[1] = 3


def test_create_view():
    a = runtime.array(np.arange(6, dtype="float32"))
    v = a._create_view((2, 3))
    assert v.data_ptr == a.data_ptr
    v.numpy_view()[0, 0] = 42
    assert a.numpy()[0] == 42
    w = a._create_view((2,), "int32", relative_byte_offset=8)
    assert w.data_ptr == a.data_ptr + 8
    with pytest.raises(ArrayError, match=r"the NDArray being viewed only contains 24 bytes"):
        a._create_view((7,))


def test_vector_dtype_has_lanes_dimension_in_numpy():
    a = runtime.empty((2,), "float32x4")
    assert a.shape == (2,)
    assert a.numpy().shape == (2, 4)
    assert a.nbytes == 32


def test_bfloat16_stores_rounded_bits():
    a = runtime.empty((3,), "bfloat16")
    a.copyfrom(np.array([1.0, -2.5, 3.140625], dtype="float32"))
    bits = a.numpy_view().view("uint16")
    assert bits.tolist() == [0x3F80, 0xC020, 0x4049]


def test_asnumpy_is_deprecated():
    with pytest.warns(DeprecationWarning, match="asnumpy"):
        runtime.array([1.0]).asnumpy()


def test_dltensor_describes_the_memory():
    a = runtime.array(np.zeros((2, 3), "float16"))
    dl = a.dltensor()
    assert dl.data == a.data_ptr
    assert (dl.device.device_type, dl.device.device_id) == (1, 0)
    assert dl.ndim == 2
    assert (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes) == (2, 16, 1)
    assert [dl.shape[0], dl.shape[1]] == [2, 3]
    assert not dl.strides


def test_repr_and_len():
    a = runtime.array(np.arange(2, dtype="float32"))
    assert repr(a).startswith("<tvmrt.NDArray shape=(2,), cpu(0)>")
    assert len(a) == 2
    with pytest.raises(TypeError, match="0-d"):
        len(runtime.empty(()))
    with pytest.raises(TypeError, match=r"use tvmrt\.runtime\.empty"):
        runtime.NDArray()


def test_bad_shapes():
    with pytest.raises(ValueError, match="dimension -1 is negative"):
        runtime.empty((2, -1))
    with pytest.raises(TypeError, match="is not an integer"):
        runtime.empty((2.5,))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="memory scope 'texture'"):
        runtime.empty((2,), mem_scope="texture")
