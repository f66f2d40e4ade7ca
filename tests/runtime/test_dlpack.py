"""Tests of DLPack exchange (tvmrt.runtime._dlpack): zero copy both ways, lifetimes, errors."""

from __future__ import annotations

import ctypes
import gc
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tvmrt.runtime import Device, from_dlpack
from tvmrt.runtime._ctypes_api import (
    DLDataType,
    DLDevice,
    DLManagedTensor,
    DLManagedTensorVersioned,
    DLPackVersion,
    DLTensor,
    DLTensorDeleter,
)
from tvmrt.runtime._dlpack import (
    FLAG_IS_COPIED,
    FLAG_IS_SUBBYTE_TYPE_PADDED,
    FLAG_READ_ONLY,
)
from tvmrt.runtime.device_api import (
    HostDeviceAPI,
    find_device_api,
    register_device_api,
    unregister_device_api,
)
from tvmrt.runtime.ndarray import NDArray, array, empty, to_dlpack_capsule

# -- helpers: read capsules without consuming them, and a DLPack producer made with ctypes


def _pyapi(name: str, restype: Any, *argtypes: Any) -> Any:
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


_get_name = _pyapi("PyCapsule_GetName", ctypes.c_char_p, ctypes.py_object)
_get_pointer = _pyapi("PyCapsule_GetPointer", ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)
_capsule_new = _pyapi(
    "PyCapsule_New", ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p
)
_capsule_is_valid = _pyapi("PyCapsule_IsValid", ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)
_capsule_get_pointer_raw = _pyapi(
    "PyCapsule_GetPointer", ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p
)


@dataclass
class _Header:
    """What a capsule's ``DLManagedTensor(Versioned)`` says, copied out of it."""

    name: bytes
    data: int
    byte_offset: int
    device: tuple[int, int]
    dtype: tuple[int, int, int]
    shape: list[int]
    strides: list[int] | None
    flags: int | None  # None for a legacy capsule
    version: tuple[int, int] | None


def _header(capsule: Any) -> _Header:
    """Read an unconsumed capsule's header (copies: the capsule may go away after)."""
    name = _get_name(capsule)
    address = _get_pointer(capsule, name)
    flags = version = None
    if name == b"dltensor_versioned":
        managed = DLManagedTensorVersioned.from_address(address)
        flags, version = int(managed.flags), (managed.version.major, managed.version.minor)
        t = managed.dl_tensor
    else:
        assert name == b"dltensor"
        t = DLManagedTensor.from_address(address).dl_tensor
    return _Header(
        name=name,
        data=t.data or 0,
        byte_offset=t.byte_offset,
        device=(t.device.device_type, t.device.device_id),
        dtype=(t.dtype.code, t.dtype.bits, t.dtype.lanes),
        shape=[t.shape[i] for i in range(t.ndim)],
        strides=[t.strides[i] for i in range(t.ndim)] if t.strides else None,
        flags=flags,
        version=version,
    )


def _destroy_capsule(capsule: int) -> None:
    # Test producers' capsules are only dropped while no exception is pending.
    for name in (b"dltensor_versioned", b"dltensor"):
        if _capsule_is_valid(capsule, name):
            address = _capsule_get_pointer_raw(capsule, name)
            _Producer.live[address].deleter(address)


_capsule_destructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_destroy_capsule)


class _Producer:
    """A DLPack producer written with ctypes that counts how often its deleter runs.

    It exports ``memory`` (a numpy array, kept alive until the deleter runs) under any
    header: device, dtype, shape, strides, byte_offset, flags, version.
    """

    live: ClassVar[dict[int, _Producer]] = {}

    def __init__(
        self,
        memory: np.ndarray[Any, Any],
        *,
        shape: tuple[int, ...],
        strides: tuple[int, ...] | None = None,
        byte_offset: int = 0,
        dtype: tuple[int, int, int] = (2, 32, 1),
        device: tuple[int, int] = (1, 0),
        versioned: bool = True,
        flags: int = 0,
        version: tuple[int, int] = (1, 1),
    ) -> None:
        self.memory = memory
        self.deleted = 0
        self.deleter = DLTensorDeleter(self._delete)
        ndim = len(shape)
        self._shape = (ctypes.c_int64 * max(ndim, 1))(*shape)
        self._strides = None if strides is None else (ctypes.c_int64 * max(ndim, 1))(*strides)
        self._tensor = DLTensor(
            data=memory.ctypes.data,
            device=DLDevice(*device),
            ndim=ndim,
            dtype=DLDataType(*dtype),
            shape=ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64)),
            strides=None
            if self._strides is None
            else ctypes.cast(self._strides, ctypes.POINTER(ctypes.c_int64)),
            byte_offset=byte_offset,
        )
        self.versioned, self.flags, self.version = versioned, flags, version
        self._managed: dict[int, Any] = {}

    def capsule(self) -> Any:
        managed: Any
        if self.versioned:
            managed = DLManagedTensorVersioned(
                version=DLPackVersion(*self.version),
                deleter=self.deleter,
                flags=self.flags,
                dl_tensor=self._tensor,
            )
            name = b"dltensor_versioned"
        else:
            managed = DLManagedTensor(dl_tensor=self._tensor, deleter=self.deleter)
            name = b"dltensor"
        address = ctypes.addressof(managed)
        self._managed[address] = managed
        _Producer.live[address] = self
        destructor = ctypes.cast(_capsule_destructor, ctypes.c_void_p)
        return _capsule_new(address, name, destructor)

    def _delete(self, address: int) -> None:
        self.deleted += 1
        del self._managed[address]
        del _Producer.live[address]

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.capsule()

    def __dlpack_device__(self) -> tuple[int, int]:
        return (self._tensor.device.device_type, self._tensor.device.device_id)


def _collect() -> None:
    gc.collect()
    gc.collect()


# -- numpy -> tvmrt -> numpy --------------------------------------------------------------

DTYPES = [
    "float16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bool",
    "complex64",
    "complex128",
]


def _sample(dtype: str, shape: tuple[int, ...] = (3, 4)) -> np.ndarray[Any, Any]:
    values = np.arange(int(np.prod(shape))).reshape(shape)
    return (values % 2 == 1) if dtype == "bool" else values.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_round_trip_shares_memory(dtype: str) -> None:
    arr = _sample(dtype)
    nd = from_dlpack(arr)
    assert isinstance(nd, NDArray)
    assert (nd.shape, nd.dtype, nd.device) == ((3, 4), dtype, Device(1, 0))
    assert nd.data_ptr == arr.ctypes.data
    assert nd.is_contiguous
    back = np.from_dlpack(nd)
    assert back.ctypes.data == nd.data_ptr
    assert back.dtype == arr.dtype
    np.testing.assert_array_equal(back, arr)


@pytest.mark.parametrize("dtype", ["float32", "int64", "uint8", "bool"])
def test_writes_are_seen_on_both_sides(dtype: str) -> None:
    arr = np.zeros((2, 3), dtype)
    nd = from_dlpack(arr)
    arr[0, 1] = 1
    assert nd.numpy()[0, 1] == 1
    nd.numpy_view()[1, 2] = 1
    assert arr[1, 2] == 1
    back = np.from_dlpack(nd)
    back[1, 0] = 1
    assert arr[1, 0] == 1
    nd.copyfrom(np.ones((2, 3), dtype))
    assert arr.all()


def test_bool_is_exported_as_dlpack_bool_and_imports_as_tvm_bool() -> None:
    nd = from_dlpack(np.array([True, False, True]))
    assert nd.dtype == "bool"
    assert (nd.dtype.type_code, nd.dtype.bits) == (1, 1)  # TVM v0.19's encoding inside
    for max_version in (None, (1, 0)):
        assert _header(nd.__dlpack__(max_version=max_version)).dtype == (6, 8, 1)  # numpy, torch
    np.testing.assert_array_equal(np.from_dlpack(nd), [True, False, True])


def test_legacy_tvm_bool_encoding_imports_as_bool() -> None:
    memory = np.array([1, 0, 1], np.uint8)
    producer = _Producer(memory, shape=(3,), dtype=(1, 1, 1), versioned=False)
    nd = from_dlpack(producer)
    assert nd.dtype == "bool"
    np.testing.assert_array_equal(nd.numpy(), [True, False, True])


@pytest.mark.parametrize("shape", [(), (0,), (2, 0, 3), (0, 0)])
def test_zero_dim_and_zero_size(shape: tuple[int, ...]) -> None:
    arr = np.full(shape, 7, np.float32)
    nd = from_dlpack(arr)
    assert nd.shape == shape
    assert nd.ndim == len(shape)
    if arr.size:
        assert nd.data_ptr == arr.ctypes.data
    back = np.from_dlpack(nd)
    assert back.shape == shape
    np.testing.assert_array_equal(back, arr)


def test_zero_size_with_null_data_pointer() -> None:
    producer = _Producer(np.zeros(0, np.float32), shape=(4, 0))
    producer._tensor.data = None
    nd = from_dlpack(producer)
    assert nd.shape == (4, 0)
    assert nd.numpy().shape == (4, 0)
    del nd
    _collect()
    assert producer.deleted == 1


@pytest.mark.parametrize(
    "make",
    [
        lambda a: a.T,
        lambda a: a[:, ::2],
        lambda a: a[::-1],
        lambda a: a[::2, ::-3],
        lambda a: a[1:, 2:].T,
    ],
    ids=["transposed", "strided", "reversed", "mixed", "offset-transposed"],
)
def test_non_contiguous_inputs_keep_their_strides(make: Any) -> None:
    base = np.arange(48, dtype=np.float64).reshape(6, 8)
    arr = make(base)
    nd = from_dlpack(arr)
    assert not nd.is_contiguous
    assert nd.data_ptr == arr.ctypes.data
    assert nd.numpy_view().strides == arr.strides
    np.testing.assert_array_equal(nd.numpy(), arr)
    back = np.from_dlpack(nd)
    assert back.ctypes.data == arr.ctypes.data
    assert back.strides == arr.strides
    nd.numpy_view()[...] = -1
    assert (arr == -1).all()
    assert (base == -1).sum() == arr.size


def test_broadcast_zero_strides_import_read_only() -> None:
    arr = np.broadcast_to(np.arange(3, dtype=np.int32), (4, 3))
    nd = from_dlpack(arr)  # read-only: needs (and gets) a versioned capsule
    assert nd.numpy_view().strides == (0, 4)
    assert not nd.numpy_view().flags.writeable
    np.testing.assert_array_equal(nd.numpy(), arr)


@given(data=st.data())
def test_any_numpy_view_imports_unchanged(data: st.DataObject) -> None:
    dtype = data.draw(st.sampled_from(["int8", "float32", "int64", "complex128", "bool"]))
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5))
    base = data.draw(hnp.arrays(dtype, shape))
    view = base[data.draw(hnp.basic_indices(shape, allow_newaxis=False, allow_ellipsis=True))]
    if not isinstance(view, np.ndarray):  # indexing every axis gives a numpy scalar
        view = base[...]
    if view.ndim > 1 and data.draw(st.booleans()):
        view = view.transpose(data.draw(st.permutations(range(view.ndim))))
    nd = from_dlpack(view)
    assert nd.shape == view.shape
    np.testing.assert_array_equal(nd.numpy(), view)
    if view.size:
        assert nd.data_ptr == view.ctypes.data
        assert np.from_dlpack(nd).ctypes.data == view.ctypes.data
    np.testing.assert_array_equal(np.from_dlpack(nd), view)


# -- byte_offset -------------------------------------------------------------------------------


def test_import_honours_byte_offset() -> None:
    memory = np.arange(10, dtype=np.float32)
    producer = _Producer(memory, shape=(2, 3), byte_offset=3 * 4)
    nd = from_dlpack(producer)
    assert nd.byte_offset == 12
    assert nd.data_ptr == memory.ctypes.data + 12
    np.testing.assert_array_equal(nd.numpy(), [[3, 4, 5], [6, 7, 8]])
    assert nd.dltensor().data == memory.ctypes.data  # kernels see data + byte_offset
    back = np.from_dlpack(nd)
    assert back.ctypes.data == memory.ctypes.data + 12


def test_import_strided_with_byte_offset_and_negative_stride() -> None:
    memory = np.arange(12, dtype=np.int16)
    # elements 9, 7, 5, 3: start at element 9 through byte_offset, walk back 2 at a time
    producer = _Producer(memory, shape=(4,), strides=(-2,), byte_offset=9 * 2, dtype=(0, 16, 1))
    nd = from_dlpack(producer)
    np.testing.assert_array_equal(nd.numpy(), [9, 7, 5, 3])
    assert nd.data_ptr == memory.ctypes.data + 18
    assert not nd.is_contiguous


def test_export_of_a_view_with_offset_points_at_its_first_element() -> None:
    whole = array(np.arange(16, dtype=np.float32))
    part = whole._create_view((2, 2), relative_byte_offset=8 * 4)
    back = np.from_dlpack(part)
    assert back.ctypes.data == part.data_ptr == whole.data_ptr + 32
    np.testing.assert_array_equal(back, [[8, 9], [10, 11]])
    head = _header(part.__dlpack__())
    assert head.data + head.byte_offset == part.data_ptr


# -- capsules: versioned and legacy, consumption ------------------------------------------------


def test_capsule_kind_follows_max_version() -> None:
    nd = array(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert _header(nd.__dlpack__()).name == b"dltensor"
    assert _header(nd.to_dlpack()).name == b"dltensor"
    assert _header(nd.__dlpack__(max_version=(0, 8))).name == b"dltensor"
    head = _header(nd.__dlpack__(max_version=(1, 0)))
    assert head.name == b"dltensor_versioned"
    assert head.version is not None
    assert head.version[0] == 1
    assert head.flags == 0
    assert (head.shape, head.dtype, head.device) == ([2, 3], (2, 32, 1), (1, 0))
    assert (head.data, head.byte_offset) == (nd.data_ptr, 0)
    assert _header(nd.__dlpack__(max_version=(2, 3))).name == b"dltensor_versioned"


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_raw_capsules_of_both_kinds_import(max_version: tuple[int, int] | None) -> None:
    arr = np.arange(5, dtype=np.int32)
    capsule = arr.__dlpack__(max_version=max_version)
    nd = from_dlpack(capsule)
    assert nd.data_ptr == arr.ctypes.data
    assert _get_name(capsule) in (b"used_dltensor", b"used_dltensor_versioned")


def test_consuming_a_capsule_twice_raises() -> None:
    capsule = array(np.ones(3, np.float32)).__dlpack__(max_version=(1, 0))
    from_dlpack(capsule)
    with pytest.raises(BufferError, match="already consumed"):
        from_dlpack(capsule)
    legacy = np.ones(3).__dlpack__()
    np.from_dlpack(_Holder(legacy))
    with pytest.raises(BufferError, match="already consumed"):
        from_dlpack(legacy)


class _Holder:
    """Hands out one fixed capsule (so a test can look at it after a consumer took it)."""

    def __init__(self, capsule: Any) -> None:
        self.capsule = capsule

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


def test_producer_without_max_version_gets_the_legacy_call() -> None:
    calls: list[dict[str, Any]] = []
    arr = np.arange(4.0)

    class OldProducer:
        def __dlpack__(self, stream: int | None = None) -> Any:
            calls.append({"stream": stream})
            return arr.__dlpack__()

    nd = from_dlpack(OldProducer())
    assert nd.data_ptr == arr.ctypes.data
    assert calls == [{"stream": None}]


def test_versioned_request_is_preferred() -> None:
    seen: list[Any] = []
    arr = np.arange(4.0)

    class Producer:
        def __dlpack__(self, **kwargs: Any) -> Any:
            seen.append(kwargs)
            return arr.__dlpack__(**kwargs)

    from_dlpack(Producer())
    assert seen[0]["max_version"][0] == 1


def test_tvmrt_from_dlpack_of_tvmrt_ndarray_shares_memory() -> None:
    nd = array(np.arange(6, dtype=np.float32).reshape(2, 3))
    other = from_dlpack(nd)
    assert other.data_ptr == nd.data_ptr
    assert (other.shape, other.dtype, other.device) == (nd.shape, nd.dtype, nd.device)
    other.numpy_view()[0, 0] = 42
    assert nd.numpy()[0, 0] == 42


# -- dtypes beyond numpy's: bfloat16, float8, vectors, sub-byte ints --------------------------


def test_bfloat16_exports_code_4_and_round_trips() -> None:
    nd = empty((2, 3), "bfloat16")
    nd.copyfrom(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert _header(nd.__dlpack__(max_version=(1, 0))).dtype == (4, 16, 1)
    other = from_dlpack(nd)
    assert other.dtype == "bfloat16"
    assert other.data_ptr == nd.data_ptr
    np.testing.assert_array_equal(
        other.numpy_view().view(np.uint16), nd.numpy_view().view(np.uint16)
    )


@pytest.mark.parametrize(("dtype", "code"), [("e4m3_float8", 10), ("e5m2_float8", 12)])
def test_float8_uses_dlpack_1_1_codes(dtype: str, code: int) -> None:
    nd = empty((4,), dtype)
    assert _header(nd.__dlpack__(max_version=(1, 1))).dtype == (code, 8, 1)
    other = from_dlpack(nd)
    assert other.dtype == dtype
    assert other.data_ptr == nd.data_ptr


@pytest.mark.parametrize(("code", "name"), [(7, "float8_e3m4"), (17, "float4_e2m1fn")])
def test_dlpack_float_formats_tvmrt_lacks_are_refused(code: int, name: str) -> None:
    producer = _Producer(np.zeros(4, np.uint8), shape=(4,), dtype=(code, 8, 1))
    capsule = producer.capsule()
    with pytest.raises(BufferError, match=name):
        from_dlpack(capsule)
    assert _get_name(capsule) == b"dltensor_versioned"  # refused, so not consumed


def test_vector_dtype_exports_lanes_and_element_strides() -> None:
    nd = empty((2, 3), "float32x4")
    nd.copyfrom(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    head = _header(nd.__dlpack__(max_version=(1, 0)))
    assert (head.shape, head.dtype) == ([2, 3], (2, 32, 4))
    assert head.strides in (None, [3, 1])  # in vector elements, not lanes
    other = from_dlpack(nd)
    assert (other.shape, other.dtype, other.data_ptr) == ((2, 3), "float32x4", nd.data_ptr)
    np.testing.assert_array_equal(other.numpy(), nd.numpy())


def test_vector_dtype_import_from_a_strided_producer() -> None:
    memory = np.arange(32, dtype=np.int32)  # 8 vectors of 4 lanes
    producer = _Producer(memory, shape=(3,), strides=(2,), dtype=(0, 32, 4))
    nd = from_dlpack(producer)
    assert (nd.shape, nd.dtype) == ((3,), "int32x4")
    np.testing.assert_array_equal(nd.numpy(), memory.reshape(8, 4)[0:6:2])


def test_sub_byte_ints_are_flagged_padded() -> None:
    nd = empty((5,), "int4")
    nd.copyfrom(np.array([1, -2, 3, -4, 5]))
    head = _header(nd.__dlpack__(max_version=(1, 1)))
    assert head.dtype == (0, 4, 1)
    assert (head.flags or 0) & FLAG_IS_SUBBYTE_TYPE_PADDED
    other = from_dlpack(nd)
    assert other.dtype == "int4"
    np.testing.assert_array_equal(other.numpy(), [1, -2, 3, -4, 5])


def test_packed_sub_byte_ints_are_refused() -> None:
    producer = _Producer(np.zeros(4, np.uint8), shape=(8,), dtype=(0, 4, 1))
    capsule = producer.capsule()  # held here: a ctypes destructor must not run mid-raise
    with pytest.raises(BufferError, match="packed"):
        from_dlpack(capsule)


@pytest.mark.parametrize(
    ("dtype", "match"),
    [((42, 32, 1), "unknown type code"), ((2, 8, 1), "not supported"), ((2, 32, 0), "lanes")],
)
def test_bad_dtypes_are_refused(dtype: tuple[int, int, int], match: str) -> None:
    producer = _Producer(np.zeros(4, np.float32), shape=(4,), dtype=dtype)
    capsule = producer.capsule()
    with pytest.raises(BufferError, match=match):
        from_dlpack(capsule)
    del capsule
    _collect()
    assert producer.deleted == 1  # refused, so the producer frees it


# -- read-only ---------------------------------------------------------------------------


def test_read_only_numpy_array_imports_read_only() -> None:
    arr = np.arange(4.0)
    arr.flags.writeable = False
    nd = from_dlpack(arr)
    assert nd.data_ptr == arr.ctypes.data
    assert not nd.numpy_view().flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        nd.numpy_view()[0] = 1
    # re-export: versioned capsules carry the flag, legacy ones cannot (as in numpy)
    assert (_header(nd.__dlpack__(max_version=(1, 0))).flags or 0) & FLAG_READ_ONLY
    back = np.from_dlpack(nd)
    assert not back.flags.writeable
    assert back.ctypes.data == arr.ctypes.data
    again = from_dlpack(nd)
    assert again.data_ptr == arr.ctypes.data
    assert not again.numpy_view().flags.writeable
    with pytest.raises(BufferError, match="readonly"):
        nd.__dlpack__()


def test_read_only_flag_of_a_versioned_producer() -> None:
    memory = np.arange(3, dtype=np.float32)
    nd = from_dlpack(_Producer(memory, shape=(3,), flags=FLAG_READ_ONLY))
    assert not nd.numpy_view().flags.writeable
    writable = from_dlpack(_Producer(memory, shape=(3,)))
    assert writable.numpy_view().flags.writeable


# -- export options: device, stream, copy -----------------------------------------------------


def test_dlpack_device() -> None:
    assert array(np.ones(2)).__dlpack_device__() == (1, 0)


def test_stream_must_be_none_or_minus_one_on_cpu() -> None:
    nd = array(np.ones(2, np.float32))
    assert _header(nd.__dlpack__(stream=None)).name == b"dltensor"
    assert _header(nd.__dlpack__(stream=-1)).name == b"dltensor"
    with pytest.raises(BufferError, match="stream must be None or -1"):
        nd.__dlpack__(stream=1)


def test_export_to_another_device_needs_copy() -> None:
    nd = array(np.ones(2, np.float32))
    with pytest.raises(BufferError, match=r"requested device cuda\(0\).*copy=True"):
        nd.__dlpack__(max_version=(1, 0), dl_device=(2, 0))
    with pytest.raises(BufferError, match="cannot copy"):
        nd.__dlpack__(max_version=(1, 0), dl_device=(2, 0), copy=True)
    head = _header(nd.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=False))
    assert head.data == nd.data_ptr


def test_copy_true_exports_a_flagged_copy() -> None:
    nd = array(np.arange(6, dtype=np.int32).reshape(2, 3))
    head = _header(to_dlpack_capsule(nd, max_version=(1, 0), copy=True))
    assert (head.flags or 0) & FLAG_IS_COPIED
    assert head.data != nd.data_ptr
    copied = np.from_dlpack(_Holder(nd.__dlpack__(max_version=(1, 0), copy=True)))
    np.testing.assert_array_equal(copied, nd.numpy())
    copied[0, 0] = 99
    assert nd.numpy()[0, 0] == 0
    assert _header(nd.__dlpack__(max_version=(1, 0), copy=False)).flags == 0


def test_numpy_from_dlpack_with_copy() -> None:
    nd = array(np.arange(3.0))
    copied = np.from_dlpack(nd, copy=True)
    assert copied.ctypes.data != nd.data_ptr
    np.testing.assert_array_equal(copied, [0, 1, 2])


# -- devices other than the CPU ----------------------------------------------------------------

EXT_DEV = 12  # kDLExtDev: an emulated accelerator with host memory


class _HostBackedAPI(HostDeviceAPI):
    name = "emulated"

    def __init__(self) -> None:
        self.syncs = 0

    def sync(self, dev: Device, stream: int = 0) -> None:
        self.syncs += 1

    def attribute(self, dev: Device, name: str) -> Any:
        return dev.device_id == 0 if name == "exist" else None


@pytest.fixture
def ext_dev() -> Iterator[_HostBackedAPI]:
    previous = find_device_api(EXT_DEV)
    api = _HostBackedAPI()
    register_device_api(EXT_DEV, api, override=True)
    yield api
    if previous is None:
        unregister_device_api(EXT_DEV)
    else:
        register_device_api(EXT_DEV, previous, override=True)


def test_host_backed_device_round_trip(ext_dev: _HostBackedAPI) -> None:
    nd = empty((3,), "float32", Device(EXT_DEV, 0))
    nd.copyfrom(np.arange(3, dtype=np.float32))
    assert nd.__dlpack_device__() == (EXT_DEV, 0)
    assert _header(nd.__dlpack__(max_version=(1, 0))).device == (EXT_DEV, 0)
    other = from_dlpack(nd)
    assert other.device == Device(EXT_DEV, 0)
    assert other.data_ptr == nd.data_ptr
    nd.__dlpack__(stream=7)  # host-backed: synchronise, no stream to hand over
    assert ext_dev.syncs == 1


def test_host_backed_device_copies_to_cpu_on_request(ext_dev: _HostBackedAPI) -> None:
    nd = empty((3,), "float32", Device(EXT_DEV, 0))
    nd.copyfrom(np.arange(3, dtype=np.float32))
    copied = np.from_dlpack(_Holder(nd.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=True)))
    np.testing.assert_array_equal(copied, [0, 1, 2])
    assert copied.ctypes.data != nd.data_ptr


def test_consumer_refusing_the_device_keeps_its_error(ext_dev: _HostBackedAPI) -> None:
    nd = empty((3,), "float32", Device(EXT_DEV, 0))
    ref = weakref.ref(nd)
    with pytest.raises((RuntimeError, BufferError), match=r"(?i)device"):
        np.from_dlpack(nd)
    del nd
    _collect()
    assert ref() is None


def test_import_from_a_device_without_backend_is_refused() -> None:
    class VulkanTensor:  # a device type tvmrt has no backend for
        def __dlpack_device__(self) -> tuple[int, int]:
            return (7, 1)

        def __dlpack__(self, **kwargs: Any) -> Any:
            raise AssertionError("asked for a capsule although the device was refused")

    with pytest.raises(BufferError, match=r"vulkan\(1\).*no host-accessible backend"):
        from_dlpack(VulkanTensor())


def test_refused_raw_capsule_is_left_to_its_producer() -> None:
    producer = _Producer(np.zeros(4, np.float32), shape=(4,), device=(2, 0))
    capsule = producer.capsule()
    with pytest.raises(BufferError, match="cuda"):
        from_dlpack(capsule)
    assert _get_name(capsule) == b"dltensor_versioned"
    assert producer.deleted == 0
    del capsule
    _collect()
    assert producer.deleted == 1


def test_unsupported_major_version_is_refused() -> None:
    producer = _Producer(np.zeros(4, np.float32), shape=(4,), version=(2, 0))
    capsule = producer.capsule()
    with pytest.raises(BufferError, match=r"version 2\.0"):
        from_dlpack(capsule)
    assert _get_name(capsule) == b"dltensor_versioned"


def test_not_a_producer() -> None:
    with pytest.raises(TypeError, match="__dlpack__"):
        from_dlpack([1, 2, 3])
    capsule = _capsule_new(8, b"something_else", None)
    with pytest.raises(BufferError, match="not a DLPack capsule"):
        from_dlpack(capsule)


# -- lifetimes: nothing freed early, nothing leaked --------------------------------------------


def test_deleting_the_numpy_producer_keeps_memory_valid() -> None:
    arr = np.arange(1000, dtype=np.float64)
    ref = weakref.ref(arr)
    nd = from_dlpack(arr)
    view = nd.numpy_view()
    del arr
    _collect()
    assert ref() is not None  # the capsule's manager still holds it
    np.testing.assert_array_equal(nd.numpy(), np.arange(1000))
    del nd
    _collect()
    assert ref() is not None  # a view of the memory outlives the NDArray
    assert view[999] == 999
    del view
    _collect()
    assert ref() is None  # the deleter ran: numpy released the array


@pytest.mark.parametrize("versioned", [True, False])
def test_deleter_runs_exactly_once_after_the_last_user(versioned: bool) -> None:
    memory = np.arange(6, dtype=np.float32)
    producer = _Producer(memory, shape=(2, 3), versioned=versioned)
    nd = from_dlpack(producer)
    again = from_dlpack(nd)  # tvmrt -> tvmrt keeps the first NDArray alive
    back = np.from_dlpack(again)
    del nd, again
    _collect()
    assert producer.deleted == 0
    np.testing.assert_array_equal(back, memory.reshape(2, 3))
    del back
    _collect()
    assert producer.deleted == 1
    assert not producer._managed


def test_exported_ndarray_lives_until_the_consumer_lets_go() -> None:
    nd = array(np.arange(4, dtype=np.int32))
    ref = weakref.ref(nd)
    consumer = np.from_dlpack(nd)
    del nd
    _collect()
    assert ref() is not None
    consumer[0] = 5
    kept = ref()
    assert kept is not None
    assert kept.numpy()[0] == 5
    del kept
    del consumer
    _collect()
    assert ref() is None


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_unconsumed_capsule_releases_the_ndarray(max_version: tuple[int, int] | None) -> None:
    nd = array(np.arange(4, dtype=np.int32))
    ref = weakref.ref(nd)
    capsule = nd.__dlpack__(max_version=max_version)
    del nd
    _collect()
    assert ref() is not None
    del capsule
    _collect()
    assert ref() is None


def test_consumer_refusing_the_dtype_keeps_its_error_and_releases() -> None:
    nd = empty((2,), "bfloat16")  # numpy has no DLPack bfloat16
    ref = weakref.ref(nd)
    with pytest.raises((RuntimeError, BufferError, TypeError), match=r"(?i)dtype"):
        np.from_dlpack(nd)
    del nd
    _collect()
    assert ref() is None


def test_round_trips_leak_nothing() -> None:
    producers = [_Producer(np.arange(8, dtype=np.float32), shape=(8,)) for _ in range(5)]
    for producer in producers:
        for _ in range(3):
            nd = from_dlpack(producer)
            np.from_dlpack(from_dlpack(nd)).sum()
            capsule = nd.__dlpack__(max_version=(1, 0))
            del nd, capsule
    _collect()
    assert [p.deleted for p in producers] == [3] * 5
    assert not _Producer.live


# -- torch (runs where torch is installed) -----------------------------------------------------


def test_torch_round_trip_zero_copy() -> None:
    torch = pytest.importorskip("torch")
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    nd = from_dlpack(t)
    assert nd.data_ptr == t.data_ptr()
    assert (nd.shape, nd.dtype) == ((3, 4), "float32")
    back = torch.from_dlpack(nd)
    assert back.data_ptr() == t.data_ptr()
    back[0, 0] = 100
    assert t[0, 0].item() == 100
    assert nd.numpy()[0, 0] == 100
    tt = t.t()
    nt = from_dlpack(tt)
    assert not nt.is_contiguous
    assert torch.from_dlpack(nt).stride() == tt.stride()


@pytest.mark.parametrize(
    ("name", "expected"),
    [("bfloat16", "bfloat16"), ("bool", "bool"), ("float8_e4m3fn", "e4m3_float8")],
)
def test_torch_special_dtypes(name: str, expected: str) -> None:
    torch = pytest.importorskip("torch")
    t = torch.zeros(2, 3, dtype=getattr(torch, name))
    nd = from_dlpack(t)
    assert nd.dtype == expected
    assert nd.data_ptr == t.data_ptr()
    back = torch.from_dlpack(nd)
    assert back.dtype == t.dtype
    assert back.data_ptr() == t.data_ptr()
    if name == "bfloat16":
        assert _header(nd.__dlpack__(max_version=(1, 0))).dtype == (4, 16, 1)
