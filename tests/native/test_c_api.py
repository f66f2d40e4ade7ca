"""The C API beyond a plain run (tests/native/c/api.c): C functions in the global registry,
the executor's queries, share_params and zero copy, plain and under ASan + UBSan. The two
outputs it writes (an executor running on another one's shared params, and a zero-copy
run into a zeroed user array) must equal TVM's golden output bit for bit."""

from __future__ import annotations

import tarfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from tests.native.conftest import NativeBuild


def test_c_api(
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    artifacts: Path,
    tmp_path: Path,
) -> None:
    relay = artifacts / "relay016"
    golden = np.load(relay / "systemlib-so" / "golden.npz")
    with tarfile.open(relay / "tvmc-package" / "module.tar") as tar:  # same model and params
        tar.extract("mod.params", tmp_path, filter="data")
    golden["data"].tofile(tmp_path / "in.bin")
    exe = compile_c(native, "api", False)
    lib = relay / "systemlib-so" / "deploy.so"
    proc = native.run(exe, lib, tmp_path / "mod.params", tmp_path / "in.bin", tmp_path / "out_")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "ok"
    for name in ("shared", "zerocopy"):
        got = np.fromfile(tmp_path / f"out_{name}.bin", dtype=np.float32)
        np.testing.assert_array_equal(got.reshape(1, 10), golden["output_0"], err_msg=name)
