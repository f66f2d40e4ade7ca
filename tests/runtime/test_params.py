"""Tests of TVM's params format (tvmrt.runtime.params): golden bytes, real files, fuzzing."""

from __future__ import annotations

import hashlib
import json
import math
import struct
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.fixtures import BUILT
from support.paths import ARTIFACTS
from tvmrt.binfmt.stream import ByteReader, ByteWriter
from tvmrt.error import DataTypeError, ParamsFormatError
from tvmrt.runtime import get_global_func
from tvmrt.runtime.dtype import DataType
from tvmrt.runtime.ndarray import NDArray, array, empty
from tvmrt.runtime.params import (
    MAX_NDIM,
    NDARRAY_LIST_MAGIC,
    load_param_dict,
    load_param_dict_from_file,
    read_named_ndarrays,
    read_ndarray,
    read_param_dict,
    read_param_names,
    save_param_dict,
    save_param_dict_to_file,
    write_ndarray,
    write_param_dict,
)
from tvmrt.runtime.tensor_record import DtypeCodes

# Spec §4.4: save_param_dict({"x": float32 [1, 2], "ab": int8 [[0, 1, 2], [3, 4, 5]]}).
GOLDEN = bytes.fromhex(
    "b79c04054f8de5f7"  # 0x000 list magic
    "0000000000000000"  # 0x008 reserved
    "0200000000000000"  # 0x010 2 names
    "0100000000000000"  # 0x018 len 1
    "78"  # 0x020 "x"
    "0200000000000000"  # 0x021 len 2
    "6162"  # 0x029 "ab"
    "0200000000000000"  # 0x02b 2 tensors
    "3fa1b496f0405edd"  # 0x033 tensor magic
    "0000000000000000"  # 0x03b reserved
    "01000000"
    "00000000"  # 0x043 device cpu, id 0
    "01000000"  # 0x04b ndim 1
    "02"
    "20"
    "0100"  # 0x04f float, 32 bits, 1 lane
    "0200000000000000"  # 0x053 shape[0] = 2
    "0800000000000000"  # 0x05b 8 data bytes
    "0000803f00000040"  # 0x063 1.0f, 2.0f
    "3fa1b496f0405edd"  # 0x06b tensor magic
    "0000000000000000"  # 0x073 reserved
    "01000000"
    "00000000"  # 0x07b cpu, 0
    "02000000"  # 0x083 ndim 2
    "00"
    "08"
    "0100"  # 0x087 int8
    "0200000000000000"  # 0x08b shape[0] = 2
    "0300000000000000"  # 0x093 shape[1] = 3
    "0600000000000000"  # 0x09b 6 data bytes
    "000102030405"  # 0x0a3
)
# byte offsets of fields in GOLDEN
NAMES_COUNT, NAME0_LEN, NAME1_LEN, TENSOR_COUNT = 0x10, 0x18, 0x21, 0x2B
T0, T0_DEVICE, T0_NDIM, T0_DTYPE, T0_SHAPE, T0_SIZE = 0x33, 0x43, 0x4B, 0x4F, 0x53, 0x5B
T1_SHAPE0, T1_SHAPE1, T1_SIZE = 0x8B, 0x93, 0x9B
RECORD_HEAD = "3fa1b496f0405edd00000000000000000100000000000000"

ARTIFACT_PARAMS = [
    "batched/cnn-b1/deploy_param.params",
    "batched/cnn-b4/deploy_param.params",
    "cross/aarch64/deploy_param.params",
    "cross/armv7hf/deploy_param.params",
    "lenet-params/deploy_param.params",
    "mobilenet_v1/deploy_param.params",
    "mobilenet_v2/deploy_param.params",
    "relayvm/cnn-static/late_bound_consts.params",
    "windows-dll/deploy.params",
    "wrn-arm32/wrn_8s_g0-rasp.params",
]
DTYPES = [
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "bfloat16",
    "int4",
    "uint4",
]


def golden_params() -> dict[str, Any]:
    return {
        "x": np.array([1.0, 2.0], dtype="float32"),
        "ab": np.array([[0, 1, 2], [3, 4, 5]], dtype="int8"),
    }


def patched(blob: bytes, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(blob)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def blob_with_record(record_hex: str, name: bytes = b"t") -> bytes:
    """A params blob with one name and one hand-written tensor record (hex)."""
    head = struct.pack("<QQQQ", NDARRAY_LIST_MAGIC, 0, 1, len(name)) + name
    return head + struct.pack("<Q", 1) + bytes.fromhex(record_hex)


def raw_bytes(arr: NDArray) -> bytes:
    return np.ascontiguousarray(arr.numpy_view()).tobytes()


def ndarray_from_bytes(shape: tuple[int, ...], dtype: str, data: bytes) -> NDArray:
    arr = empty(shape, dtype)
    arr.numpy_view().reshape(-1).view(np.uint8)[...] = np.frombuffer(data, dtype=np.uint8)
    return arr


# -- golden bytes -----------------------------------------------------------------------------
def test_save_param_dict_reproduces_spec_worked_example() -> None:
    blob = save_param_dict(golden_params())
    assert isinstance(blob, bytearray)
    assert len(blob) == 169
    assert bytes(blob) == GOLDEN


def test_save_param_dict_same_bytes_from_ndarrays() -> None:
    params = {name: array(value) for name, value in golden_params().items()}
    assert bytes(save_param_dict(params)) == GOLDEN


def test_load_param_dict_reads_spec_worked_example() -> None:
    params = load_param_dict(GOLDEN)
    assert list(params) == ["x", "ab"]
    x, ab = params["x"], params["ab"]
    assert (x.shape, x.dtype, ab.shape, ab.dtype) == ((2,), "float32", (2, 3), "int8")
    assert x.device.device_type == 1
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(ab.numpy(), [[0, 1, 2], [3, 4, 5]])


def test_float64_scalar_record_bytes() -> None:
    writer = ByteWriter()
    write_ndarray(writer, array(np.float64(3.5)))
    expected = RECORD_HEAD + "00000000" + "02400100" + "0800000000000000" + "0000000000000c40"
    assert bytes(writer.buffer) == bytes.fromhex(expected)
    arr = read_ndarray(ByteReader(writer.buffer, "record", ParamsFormatError))
    assert (arr.shape, arr.dtype, float(arr.numpy())) == ((), "float64", 3.5)


def test_float16_dtype_bytes() -> None:
    writer = ByteWriter()
    write_ndarray(writer, array(np.array([1.0], dtype="float16")))
    assert bytes(writer.buffer[28:32]) == bytes.fromhex("02100100")
    assert bytes(writer.buffer[-2:]) == bytes.fromhex("003c")  # 1.0 in half precision


def test_bool_is_written_as_tvm_v019_uint1() -> None:
    writer = ByteWriter()
    write_ndarray(writer, array(np.array([True, False, True])))
    assert bytes(writer.buffer[28:32]) == bytes.fromhex("01010100")  # code 1, bits 1
    assert bytes(writer.buffer[-11:]) == bytes.fromhex("0300000000000000010001")


@pytest.mark.parametrize(
    ("dtype_hex", "codes"),
    [("01010100", "legacy"), ("01010100", "ffi"), ("06080100", "ffi")],
    ids=["tvm-v0.19", "uint1-in-tvm-ffi", "tvm-ffi"],
)
def test_each_eras_bool_encoding_loads_as_bool(dtype_hex: str, codes: DtypeCodes) -> None:
    record = RECORD_HEAD + "01000000" + dtype_hex + "0300000000000000" * 2 + "010001"
    arr = load_param_dict(blob_with_record(record), dtype_codes=codes)["t"]
    assert arr.dtype == "bool"
    np.testing.assert_array_equal(arr.numpy(), [True, False, True])


def test_bfloat16_record() -> None:
    record = (
        RECORD_HEAD + "01000000" + "04100100" + "0100000000000000" + "0200000000000000" + "803f"
    )
    arr = load_param_dict(blob_with_record(record))["t"]
    assert (arr.dtype, arr.dtype.type_code) == ("bfloat16", 4)
    assert raw_bytes(arr) == bytes.fromhex("803f")  # 1.0 in bfloat16
    assert save_param_dict({"t": arr}) == blob_with_record(record)


# -- real TVM files ---------------------------------------------------------------------------
def file_names(blob: bytes) -> list[str]:
    reader = ByteReader(blob, "test", ParamsFormatError)
    reader.u64()
    reader.u64()
    return reader.strings()


@pytest.mark.parametrize("relpath", ARTIFACT_PARAMS)
def test_artifact_params_load_and_round_trip_byte_for_byte(artifacts: Path, relpath: str) -> None:
    path = artifacts / relpath
    blob = path.read_bytes()
    params = load_param_dict(blob)
    assert list(params) == file_names(blob)  # file order
    assert all(arr.data_ptr % 64 == 0 and arr.device.device_type == 1 for arr in params.values())
    assert save_param_dict(params) == blob
    assert list(load_param_dict_from_file(path)) == list(params)
    summary_path = path.with_name(path.name + ".summary.json")
    if summary_path.exists():
        summary = json.loads(summary_path.read_text())
        assert sorted(params) == sorted(summary)
        for name, arr in params.items():
            expected = summary[name]
            assert list(arr.shape) == expected["shape"], name
            assert arr.dtype == expected["dtype"], name
            assert hashlib.sha256(raw_bytes(arr)).hexdigest() == expected["sha256"], name


def test_every_artifact_params_file_is_covered(artifacts: Path) -> None:
    # the project's builds, and whatever third-party folders this machine has
    shared = {p.name for p in ARTIFACTS.iterdir() if p.is_dir()} if ARTIFACTS.is_dir() else set()
    names = set(BUILT) | shared
    found = sorted(
        f"{name}/{p.relative_to(artifacts / name).as_posix()}"
        for name in names
        for p in (artifacts / name).rglob("*.params")
    )
    assert found == sorted(p for p in ARTIFACT_PARAMS if p.split("/")[0] in names)


# -- round trips ------------------------------------------------------------------------------
@st.composite
def param_dicts(draw: st.DrawFn) -> dict[str, NDArray]:
    names = draw(st.lists(st.text(max_size=8), max_size=5, unique=True))
    params = {}
    for name in names:
        dtype = DataType(draw(st.sampled_from(DTYPES)))
        shape = tuple(draw(st.lists(st.integers(0, 4), max_size=4)))
        data = draw(st.binary(min_size=math.prod(shape) * dtype.itemsize, max_size=10**6))
        params[name] = ndarray_from_bytes(shape, dtype, data[: math.prod(shape) * dtype.itemsize])
    return params


@given(param_dicts())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_round_trip_every_dtype(params: dict[str, NDArray]) -> None:
    blob = save_param_dict(params)
    loaded = load_param_dict(blob)
    assert list(loaded) == list(params)
    for name, arr in params.items():
        got = loaded[name]
        assert (got.shape, got.dtype) == (arr.shape, arr.dtype)
        assert raw_bytes(got) == raw_bytes(arr)
    assert save_param_dict(loaded) == blob


@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_scalar_and_empty(dtype: str) -> None:
    params = {"scalar": empty((), dtype), "empty": empty((3, 0, 2), dtype)}
    params["scalar"].numpy_view().reshape(-1).view(np.uint8)[...] = 1
    loaded = load_param_dict(save_param_dict(params))
    assert loaded["scalar"].shape == ()
    assert raw_bytes(loaded["scalar"]) == raw_bytes(params["scalar"])
    assert (loaded["empty"].shape, loaded["empty"].dtype) == ((3, 0, 2), dtype)


def test_names_are_utf8_and_may_be_empty() -> None:
    params = {"": np.zeros(1, "int8"), "π/ünï": np.ones(1, "int8")}
    blob = save_param_dict(params)
    encoded = "π/ünï".encode()
    assert struct.pack("<Q", len(encoded)) + encoded in blob
    assert struct.pack("<QQ", 2, 0) in blob  # two names, the first one empty
    assert list(load_param_dict(blob)) == ["", "π/ünï"]


def test_duplicate_names_keep_the_last_tensor() -> None:
    blob = GOLDEN[:NAME1_LEN] + struct.pack("<Q", 1) + b"x" + GOLDEN[TENSOR_COUNT:]  # "ab" -> "x"
    params = load_param_dict(blob)
    assert list(params) == ["x"]
    assert params["x"].dtype == "int8"


def test_trailing_bytes_are_ignored() -> None:
    params = load_param_dict(GOLDEN + b"trailing junk")
    assert list(params) == ["x", "ab"]


def test_loaded_arrays_do_not_share_the_input_buffer() -> None:
    blob = bytearray(GOLDEN)
    x = load_param_dict(blob)["x"]
    blob[0x63:0x6B] = bytes(8)
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])
    assert x.numpy_view().flags.writeable


def test_accepts_memoryview_and_numpy_buffers() -> None:
    assert list(load_param_dict(memoryview(GOLDEN))) == ["x", "ab"]
    assert list(load_param_dict(np.frombuffer(GOLDEN, np.uint8))) == ["x", "ab"]  # type: ignore[arg-type]
    strided = memoryview(bytes(x for b in GOLDEN for x in (b, 0)))[::2]
    assert list(load_param_dict(strided)) == ["x", "ab"]


def test_load_rejects_str_and_non_buffers() -> None:
    with pytest.raises(TypeError, match="not str; use load_param_dict_from_file"):
        load_param_dict(GOLDEN.decode("latin-1"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="got int"):
        load_param_dict(3)  # type: ignore[arg-type]


def test_read_param_names_checks_the_header_only() -> None:
    assert read_param_names(GOLDEN) == ["x", "ab"]
    assert read_param_names(GOLDEN[:T0]) == ["x", "ab"]  # tensors are not read
    with pytest.raises(ParamsFormatError, match=r"number of tensors is 3, expected 2 .* 43$"):
        read_param_names(patched(GOLDEN, TENSOR_COUNT, "<Q", 3))
    with pytest.raises(ParamsFormatError, match=r"^params blob: list magic is 0x0+, expected"):
        read_param_names(bytes(16))


# -- values that are not NDArrays -------------------------------------------------------------
def test_save_accepts_numpy_lists_and_scalars() -> None:
    blob = save_param_dict({"l": [[1, 2], [3, 4]], "s": 2.5, "b": np.bool_(True)})
    loaded = load_param_dict(blob)
    assert (loaded["l"].shape, loaded["l"].dtype) == ((2, 2), "int64")
    assert (loaded["s"].shape, loaded["s"].dtype, float(loaded["s"].numpy())) == (
        (),
        "float64",
        2.5,
    )
    assert loaded["b"].dtype == "bool"


def test_save_makes_non_contiguous_and_big_endian_arrays_dense_little_endian() -> None:
    base = np.arange(24, dtype="float32").reshape(4, 6)
    expected = save_param_dict({"w": np.ascontiguousarray(base[:, ::2].T)})
    assert save_param_dict({"w": base[:, ::2].T}) == expected
    assert save_param_dict({"w": base[:, ::2].T.astype(">f4")}) == expected
    strided = NDArray.from_host_memory(base[:, ::2].T, DataType("float32"), array(base).device)
    assert not strided.is_contiguous
    assert save_param_dict({"w": strided}) == expected


def test_save_rejects_vector_dtypes() -> None:
    with pytest.raises(DataTypeError, match=r"param 'v' has vector dtype 'float32x4'.*lanes=1"):
        save_param_dict({"v": empty((2,), "float32x4")})
    with pytest.raises(DataTypeError, match=r"vector dtype 'int8x2'"):
        write_ndarray(ByteWriter(), empty((2,), "int8x2"))


def test_save_rejects_bad_names_and_values() -> None:
    with pytest.raises(TypeError, match=r"param name 1 is a int, expected str"):
        save_param_dict({1: np.zeros(1)})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match=r"param name '\\ud800' cannot be encoded"):
        save_param_dict({"\ud800": np.zeros(1)})
    with pytest.raises(DataTypeError, match=r"param 'o': numpy dtype object has no TVM"):
        save_param_dict({"o": np.array([object()])})
    with pytest.raises(TypeError, match="params must be a dict"):
        save_param_dict([("x", np.zeros(1))])  # type: ignore[arg-type]


# -- files and global functions ---------------------------------------------------------------
def test_file_variants(tmp_path: Path) -> None:
    path = tmp_path / "p.params"
    save_param_dict_to_file(golden_params(), path)
    assert path.read_bytes() == GOLDEN
    save_param_dict_to_file(golden_params(), str(path))
    assert list(load_param_dict_from_file(str(path))) == ["x", "ab"]
    assert list(load_param_dict_from_file(path)) == ["x", "ab"]
    path.write_bytes(GOLDEN[:100])
    with pytest.raises(ParamsFormatError, match=r"^params file '.*p\.params': truncated"):
        load_param_dict_from_file(path)


def test_tvm_global_functions_are_registered(tmp_path: Path) -> None:
    blob = get_global_func("runtime.SaveParams")(golden_params())
    assert bytes(blob) == GOLDEN
    assert list(get_global_func("runtime.LoadParams")(blob)) == ["x", "ab"]
    path = tmp_path / "g.params"
    get_global_func("runtime.SaveParamsToFile")(golden_params(), str(path))
    assert list(get_global_func("runtime.LoadParamsFromFile")(str(path))) == ["x", "ab"]


# -- record helpers ---------------------------------------------------------------------------
def test_record_helpers_compose_into_other_containers() -> None:
    writer = ByteWriter()
    writer.string("prefix")
    writer.u64(2)
    writer.strings(["a", "b"])
    write_ndarray(writer, array(np.arange(3, dtype="int32")))
    write_ndarray(writer, array(np.float32(1.5)))
    write_param_dict(writer, golden_params())
    writer.string("suffix")
    reader = ByteReader(writer.buffer, "factory blob", ParamsFormatError)
    assert reader.string() == "prefix"
    assert reader.u64() == 2
    arrays = read_named_ndarrays(reader, reader.strings())
    assert [a.shape for a in arrays.values()] == [(3,), ()]
    assert list(read_param_dict(reader)) == ["x", "ab"]
    assert reader.string() == "suffix"
    assert reader.remaining == 0


def test_read_ndarray_error_names_the_tensor_and_offset() -> None:
    blob = b"\0" * 5 + bytes.fromhex(
        RECORD_HEAD[:32] + "02000000" + "00000000" + "00000000" + "02200100"
    )
    reader = ByteReader(blob, "module blob", ParamsFormatError)
    reader.raw(5)
    with pytest.raises(
        ParamsFormatError,
        match=r"^module blob: tensor 'w' has device type 2, expected 1 \(CPU\).* offset 21$",
    ):
        read_ndarray(reader, "w")


# -- malformed input --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (b"", r"truncated: list magic needs 8 bytes but only 0 remain at byte offset 0$"),
        (
            patched(GOLDEN, 0, "<Q", 1),
            r"list magic is 0x0000000000000001, expected 0xf7e58d4f05049cb7 \(not a TVM "
            r"params blob\) at byte offset 0$",
        ),
        (
            patched(GOLDEN, NAMES_COUNT, "<Q", 2**63),
            r"number of names is 9223372036854775808, but only 145 bytes remain .* offset 16$",
        ),
        (
            patched(GOLDEN, NAME0_LEN, "<Q", 2**64 - 1),
            r"names\[0\] claims 18446744073709551615 bytes but only 137 remain at byte offset 24$",
        ),
        (
            patched(GOLDEN, TENSOR_COUNT, "<Q", 3),
            r"number of tensors is 3, expected 2 \(one per name\) at byte offset 43$",
        ),
        (
            patched(GOLDEN, T0, "<Q", 7),
            r"tensor 'x' magic is 0x0000000000000007, expected 0xdd5e40f096b4a13f "
            r"at byte offset 51$",
        ),
        (
            patched(GOLDEN, T0_DEVICE, "<i", 2),
            r"tensor 'x' has device type 2, expected 1 \(CPU\).* at byte offset 67$",
        ),
        (
            patched(GOLDEN, T0_NDIM, "<i", -1),
            rf"tensor 'x' has ndim -1, expected 0 to {MAX_NDIM} at byte offset 75$",
        ),
        (
            patched(GOLDEN, T0_NDIM, "<i", 2**31 - 1),
            r"tensor 'x' has ndim 2147483647, expected 0 to 32 at byte offset 75$",
        ),
        (
            patched(GOLDEN, T0_NDIM, "<i", 20),
            r"truncated: tensor 'x' shape and data_byte_size needs 168 bytes but only 86 remain "
            r"at byte offset 83$",
        ),
        (
            patched(GOLDEN, T0_SHAPE, "<q", -2),
            r"tensor 'x' has shape\[0\] = -2, expected >= 0 at byte offset 83$",
        ),
        (
            patched(GOLDEN, T1_SHAPE1, "<q", -1),
            r"tensor 'ab' has shape\[1\] = -1, expected >= 0 at byte offset 147$",
        ),
        (
            patched(GOLDEN, T0_SIZE, "<q", 12),
            r"tensor 'x' has data_byte_size 12, expected 8 \(shape \[2\] x 4 bytes of float32\) "
            r"at byte offset 91$",
        ),
        (
            patched(GOLDEN, T1_SIZE, "<q", -6),
            r"tensor 'ab' has data_byte_size -6, expected 6 .* at byte offset 155$",
        ),
        (
            GOLDEN[:-1],
            r"truncated: tensor 'ab' data needs 6 bytes but only 5 remain at byte offset 163$",
        ),
        (
            patched(GOLDEN, T0_DTYPE, "<I", 0x00042002),  # float32, 4 lanes
            r"tensor 'x' has dtype \(code=2, bits=32, lanes=4\), expected lanes=1: vector .* 79$",
        ),
        (
            patched(GOLDEN, T0_DTYPE, "<I", 0x00010808),  # code 8: TVM 0.20's float4
            r"tensor 'x' has dtype \(code=8, bits=8, lanes=1\): code 8 is float4_e2m1fn "
            r"\(TVM 0.20\) in TVM <= 0.20's table, which tvmrt does not support at .* 79$",
        ),
        (
            patched(GOLDEN, T0_DTYPE, "<I", 0x00012009),
            r"tensor 'x' has dtype \(code=9, bits=32, lanes=1\): code 9 is no 32-bit type "
            r"in TVM <= 0.20's table of dtype codes at byte offset 79$",
        ),
        (
            patched(GOLDEN, T0_DTYPE, "<I", 0x00010C02),  # float12
            r"tensor 'x' has unsupported dtype \(code=2, bits=12, lanes=1\): .* offset 79$",
        ),
    ],
)
def test_malformed_blob_message_names_field_and_offset(blob: bytes, message: str) -> None:
    with pytest.raises(ParamsFormatError, match=r"^params blob: " + message):
        load_param_dict(blob)


def test_huge_tensor_claim_raises_fast_without_allocating() -> None:
    record = (
        RECORD_HEAD
        + "01000000"
        + "02200100"
        + struct.pack("<q", 2**60).hex()
        + struct.pack("<q", 2**62).hex()
    )
    tracemalloc.start()
    try:
        with pytest.raises(ParamsFormatError, match=r"data needs 4611686018427387904 bytes but"):
            load_param_dict(blob_with_record(record))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_empty_tensor_with_huge_dimension_is_rejected() -> None:
    shape = struct.pack("<qq", 0, 2**62).hex()
    record = RECORD_HEAD + "02000000" + "02200100" + shape + "0000000000000000"
    with pytest.raises(ParamsFormatError, match=r"shape \[0, 4611686018427387904\] is too large"):
        load_param_dict(blob_with_record(record))


def test_truncation_at_every_length_raises_params_format_error() -> None:
    blob = save_param_dict(
        {"s": np.float64(3.5), "e": np.zeros((0, 3), "int8"), "b": np.array([True, False])}
    )
    for n in range(len(blob)):
        with pytest.raises(ParamsFormatError, match="at byte offset"):
            load_param_dict(blob[:n])
    for n in range(len(GOLDEN)):
        with pytest.raises(ParamsFormatError, match=r"(truncated|remain) .*at byte offset"):
            load_param_dict(GOLDEN[:n])


def load_or_format_error(blob: bytes) -> None:
    try:
        params = load_param_dict(blob)
    except ParamsFormatError as exc:
        message = str(exc)
    else:
        assert all(isinstance(arr, NDArray) for arr in params.values())
        return
    assert message.startswith("params blob: ")
    assert "at byte offset" in message


@given(st.lists(st.tuples(st.integers(0, len(GOLDEN) - 1), st.integers(0, 255)), max_size=6))
@settings(max_examples=500, deadline=None)
def test_flipped_bytes_only_raise_params_format_error(edits: list[tuple[int, int]]) -> None:
    blob = bytearray(GOLDEN)
    for offset, value in edits:
        blob[offset] = value
    load_or_format_error(bytes(blob))


@given(
    st.sampled_from(
        [NAMES_COUNT, NAME0_LEN, NAME1_LEN, TENSOR_COUNT, T0_SHAPE, T0_SIZE, T1_SHAPE0]
    ),
    st.sampled_from([2**31, 2**32 + 8, 2**62, 2**63 - 1, 2**63, 2**64 - 1]),
)
@settings(deadline=None)
def test_huge_size_fields_raise_params_format_error(offset: int, value: int) -> None:
    with pytest.raises(ParamsFormatError, match="at byte offset"):
        load_param_dict(patched(GOLDEN, offset, "<Q", value))


@given(st.binary(max_size=200))
@settings(max_examples=300, deadline=None)
def test_random_bytes_after_magic_only_raise_params_format_error(tail: bytes) -> None:
    load_or_format_error(GOLDEN[:8] + tail)
    load_or_format_error(GOLDEN[:T0] + tail)


# -- name order: what is identical to TVM (README "Where tvmrt differs") ----------------------
def _tvm_stable_hash(name: str) -> int:
    """TVM v0.19's ``String::StableHashBytes`` (little-endian host), written from its spec."""
    data, result, i = name.encode(), 0, 0
    while i + 8 <= len(data):
        result = (result * 1099511628211 + int.from_bytes(data[i : i + 8], "little")) % 2147483647
        i += 8
    if i < len(data):
        tail = int.from_bytes(data[i:].ljust(8, b"\0"), "little")
        result = (result * 1099511628211 + tail) % 2147483647
    return result


def test_tvm_writes_its_map_slot_order_and_tvmrt_the_dict_order(artifacts: Path) -> None:
    import tarfile

    package = artifacts / "relay016" / "tvmc-package" / "module.tar"
    with tarfile.open(package) as archive:
        member = archive.extractfile("mod.params")
        assert member is not None
        blob = member.read()
    params = load_param_dict(blob)
    names = sorted(params, key=lambda n: int(n[1:]))
    assert names == ["p0", "p1", "p2", "p3", "p4", "p5"]
    # TVM's Map of >= 4 names is a DenseMap: iteration is by slot, the slot is the
    # Fibonacci hash of StableHashBytes(name) (6 names -> 16 slots, shift 60)
    slots = {n: ((11400714819323198485 * _tvm_stable_hash(n)) % 2**64) >> 60 for n in names}
    assert len(set(slots.values())) == len(names)  # no collisions here: order is defined
    assert file_names(blob) == sorted(names, key=slots.__getitem__) == list(params)
    # tvmrt writes the dict's order: identical bytes when the dict is in TVM's order...
    assert save_param_dict(params) == blob
    # ...and the same records, in another order, from a dict in p0..p5 order
    reordered = save_param_dict({n: params[n] for n in names})
    assert reordered != blob
    assert len(reordered) == len(blob)
    assert {k: v.numpy().tobytes() for k, v in load_param_dict(reordered).items()} == {
        k: v.numpy().tobytes() for k, v in params.items()
    }
