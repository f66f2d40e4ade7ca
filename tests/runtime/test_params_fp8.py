"""float8 params in each TVM era's dtype codes (issue 22, item 15).

TVM <= 0.20 saves float8 with its own codes (``include/tvm/runtime/data_type.h``: v0.19's
``kE4M3Float = 6``, ``kE5M2Float = 7``; v0.20 renames them ``kFloat8_e4m3fn``/
``kFloat8_e5m2`` and adds ``kFloat4_e2m1fn = 8``). TVM >= 0.21 saves DLPack 1.x codes
(6 bool, 10 float8_e4m3fn, 12 float8_e5m2). The legacy blob is built here byte by byte from
the format; the tvm-ffi one is written by TVM itself (``apache-tvm``, test extra) in a
subprocess. Values are checked against the float8 bit patterns (OCP FP8: e4m3fn has bias 7
and no infinities, e5m2 bias 15).
"""

from __future__ import annotations

import importlib.util
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tvmrt.error import ArgumentTypeError, ParamsFormatError
from tvmrt.runtime import load_param_dict, save_param_dict
from tvmrt.runtime.ndarray import NDArray

LIST_MAGIC = 0xF7E58D4F05049CB7
TENSOR_MAGIC = 0xDD5E40F096B4A13F

# bit patterns and the values they encode
E4M3 = bytes([0x38, 0x40, 0xC4, 0x7E, 0x01])  # 1, 2, -3, 448 (the largest), 2**-9
E4M3_VALUES = [1.0, 2.0, -3.0, 448.0, 2.0**-9]
E5M2 = bytes([0x3C, 0x40, 0xC2, 0x7B, 0x01])  # 1, 2, -3, 57344 (the largest), 2**-16
E5M2_VALUES = [1.0, 2.0, -3.0, 57344.0, 2.0**-16]


def blob(*tensors: tuple[str, int, bytes]) -> bytes:
    """A params blob of 1-D 8-bit tensors ``(name, type code, data)``."""
    out = struct.pack("<QQQ", LIST_MAGIC, 0, len(tensors))
    for name, _, _ in tensors:
        out += struct.pack("<Q", len(name)) + name.encode()
    out += struct.pack("<Q", len(tensors))
    for _, code, data in tensors:
        out += struct.pack("<QQiiiBBH", TENSOR_MAGIC, 0, 1, 0, 1, code, 8, 1)
        out += struct.pack("<qq", len(data), len(data)) + data
    return out


def as_float(arr: NDArray) -> list[float]:
    pytest.importorskip("ml_dtypes")  # numpy's view of float8 (the 'dtypes' extra)
    return [float(v) for v in arr.numpy().astype("float32")]


V019 = blob(("a", 6, E4M3), ("b", 7, E5M2))


def test_a_tvm_v019_blob_loads_its_float8_values() -> None:
    params = load_param_dict(V019)
    assert (str(params["a"].dtype), str(params["b"].dtype)) == ("e4m3_float8", "e5m2_float8")
    assert as_float(params["a"]) == E4M3_VALUES
    assert as_float(params["b"]) == E5M2_VALUES
    assert params["a"].numpy().view("uint8").tobytes() == E4M3


def test_saving_float8_writes_tvm_v019s_codes() -> None:
    params = load_param_dict(V019)
    assert bytes(save_param_dict(params)) == V019


def test_the_v019_e4m3_code_is_bool_only_in_the_ffi_table() -> None:
    """Code 6 is bool for TVM >= 0.21: read so only when asked for that table."""
    flags = load_param_dict(blob(("f", 6, bytes([1, 0, 1]))), dtype_codes="ffi")["f"]
    assert str(flags.dtype) == "bool"
    assert flags.numpy().tolist() == [True, False, True]
    with pytest.raises(ParamsFormatError, match=r"code 7 is float8_e3m4 in TVM >= 0.21"):
        load_param_dict(V019, dtype_codes="ffi")


@pytest.mark.parametrize(
    ("codes", "code", "message"),
    [
        ("legacy", 8, r"code 8 is float4_e2m1fn \(TVM 0.20\) in TVM <= 0.20's table"),
        ("legacy", 10, r"code 10 is no 8-bit type in TVM <= 0.20's table"),
        ("legacy", 200, r"code 200 is no 8-bit type in TVM <= 0.20's table"),
        ("ffi", 8, r"code 8 is float8_e4m3 in TVM >= 0.21 \(DLPack 1.x\)'s table"),
        ("ffi", 13, r"code 13 is float8_e5m2fnuz in TVM >= 0.21"),
        ("ffi", 99, r"code 99 is no 8-bit type in TVM >= 0.21"),
    ],
)
def test_a_code_without_a_type_is_refused_by_number(codes: str, code: int, message: str) -> None:
    with pytest.raises(ParamsFormatError, match=message):
        load_param_dict(blob(("t", code, b"\x00")), dtype_codes=codes)  # type: ignore[arg-type]


def test_an_unknown_table_is_refused() -> None:
    with pytest.raises(ArgumentTypeError, match=r"dtype_codes is 'v0.21', expected one of"):
        load_param_dict(V019, dtype_codes="v0.21")  # type: ignore[arg-type]


_TVM_WRITES = """
import sys, numpy as np, ml_dtypes, tvm
a = np.frombuffer(bytes.fromhex(sys.argv[1]), dtype=ml_dtypes.float8_e4m3fn)
b = np.frombuffer(bytes.fromhex(sys.argv[2]), dtype=ml_dtypes.float8_e5m2)
c = np.array([True, False, True])
arrays = {"a": tvm.runtime.tensor(a), "b": tvm.runtime.tensor(b), "c": tvm.runtime.tensor(c)}
sys.stdout.write(bytes(tvm.runtime.save_param_dict(arrays)).hex())
"""


@pytest.fixture(scope="module")
def tvm_ffi_blob(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    if importlib.util.find_spec("tvm") is None or importlib.util.find_spec("ml_dtypes") is None:
        pytest.skip("apache-tvm and ml_dtypes are not installed (pip install -e '.[test]')")
    cwd: Path = tmp_path_factory.mktemp("tvm-ffi-params")  # no tvmrt checkout on sys.path
    proc = subprocess.run(
        [sys.executable, "-c", _TVM_WRITES, E4M3.hex(), E5M2.hex()],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return bytes.fromhex(proc.stdout)


def test_a_blob_tvm_ffi_wrote_loads_with_the_ffi_table(tvm_ffi_blob: bytes) -> None:
    params = load_param_dict(tvm_ffi_blob, dtype_codes="ffi")
    assert [str(params[k].dtype) for k in "abc"] == ["e4m3_float8", "e5m2_float8", "bool"]
    assert as_float(params["a"]) == E4M3_VALUES
    assert as_float(params["b"]) == E5M2_VALUES
    assert params["c"].numpy().tolist() == [True, False, True]
    assert bytes(save_param_dict(params, dtype_codes="ffi")) == tvm_ffi_blob


def test_a_tvm_ffi_blob_read_as_tvm_v019_refuses_its_float8_code(tvm_ffi_blob: bytes) -> None:
    with pytest.raises(ParamsFormatError, match=r"tensor 'a' .* code 10 is no 8-bit type"):
        load_param_dict(tvm_ffi_blob)


def test_later_tvms_float8_names_are_the_same_types() -> None:
    from tvmrt.runtime import DataType

    assert DataType("float8_e4m3fn") == DataType("e4m3_float8")
    assert DataType("float8_e5m2") == DataType("e5m2_float8")
