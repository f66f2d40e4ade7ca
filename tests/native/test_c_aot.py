"""Relay AOT builds in the C runtime (tests/native/c/run_aot.c), plain and under ASan + UBSan:
TVM 0.16's AOT export runs through TVM's AOT executor face (`lib["default"](dev)` and the
global `tvm.aot_executor.create`) bitwise equal to TVM's golden output, with the Python
runtime's answers and errors; AOT metadata spoiled field by field in a library this test
builds (tests/native/c/aot_toy.c) is refused with a clear error, never a crash."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from tests.native.conftest import C_DIR, INCLUDE, NativeBuild

from tvmrt import runtime


def _python_error(module: runtime.Module, name: str, *args: object) -> str:
    with pytest.raises(Exception) as info:  # noqa: PT011 - any tvmrt error, compared below
        module[name](*args)
    return f"{type(info.value).__name__}: {info.value}"


@pytest.mark.parametrize("mode", ["factory", "global"])
def test_aot_build_runs_bitwise_with_the_python_runtimes_answers(
    native: NativeBuild,
    compile_c: Callable[..., Path],
    artifacts: Path,
    tmp_path: Path,
    mode: str,
) -> None:
    case = artifacts / "relay016" / "aot-so"
    with np.load(case / "golden.npz") as npz:
        golden = {name: npz[name] for name in npz.files}
    golden["data"].astype(np.float32).tofile(tmp_path / "in.bin")
    proc = native.run(
        compile_c(native, "run_aot"), mode, case / "deploy.so", tmp_path / "in.bin", tmp_path / "o"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "o0.bin").read_bytes() == golden["output_0"].astype("<f4").tobytes()
    got = dict(line.split(": ", 1) for line in proc.stdout.splitlines())
    module = runtime.load_module(str(case / "deploy.so"))["default"](runtime.cpu())
    assert got["num_inputs"] == str(module["get_num_inputs"]())
    assert got["num_outputs"] == str(module["get_num_outputs"]()) == "1"
    assert got["input_name_0"] == module["get_input_name"](0) == "data"
    assert got["input_index"] == "0"
    assert got["input_index_unknown"] == _python_error(module, "get_input_index", "nope")
    assert got["output_out_of_range"] == _python_error(module, "get_output", 7)
    assert got["zero_copy"] == _python_error(module, "set_input_zero_copy", 7)


def _toy(tmp_path: Path, define: str = "") -> Path:
    out = tmp_path / f"libaot{define}.so"
    flags = [f"-DMETA_{define}"] if define else []
    cmd = ["cc", "-shared", "-fPIC", "-O2", f"-I{INCLUDE}", *flags, str(C_DIR / "aot_toy.c")]
    proc = subprocess.run([*cmd, "-o", str(out)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return out


def test_a_library_of_this_tests_runs(
    native: NativeBuild, compile_c: Callable[..., Path], tmp_path: Path
) -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3) / 4
    x.tofile(tmp_path / "in.bin")
    exe = compile_c(native, "run_aot")
    proc = native.run(exe, "global", _toy(tmp_path), tmp_path / "in.bin", tmp_path / "o")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "input_name_0: x" in proc.stdout
    np.testing.assert_array_equal(np.fromfile(tmp_path / "o0.bin", np.float32), x.ravel() + 1)


SPOILED = {
    "VERSION": "AOT metadata version 2 is not supported (tvmrt reads version 1, TVM 0.10 to 0.20)",
    "POOLS": "built with unified static memory planning (workspace pools)",
    "COUNT": "AOT metadata: -1 inputs is out of range (0 to 65536)",
    "MANY": "AOT metadata: 1099511627776 outputs is out of range (0 to 65536)",
    "NULL_LIST": "AOT metadata: 1 outputs is out of range",
    "RANK": "AOT metadata: input 0 has rank 40 (expected 0 to 32)",
    "DIM": "AOT metadata: output 0 has a negative dimension -3 (axis 1)",
    "DTYPE": "AOT metadata: input 0 has dtype (code 2, bits 32, lanes 0)",
    "HUGE": "AOT metadata: input 0 needs 2^48 bytes or more",
    "NAME": "AOT metadata: the name of input 0 is longer than 4095 bytes",
    "NULL": "AOT metadata: get_c_metadata returned NULL",
}


@pytest.mark.parametrize("case", sorted(SPOILED))
def test_spoiled_metadata_is_refused_clearly(
    native: NativeBuild, compile_c: Callable[..., Path], tmp_path: Path, case: str
) -> None:
    proc = native.run(compile_c(native, "run_aot"), "create", _toy(tmp_path, case))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("ModuleLoadError: "), proc.stdout
    assert SPOILED[case] in proc.stdout
