"""Application threads share libtvmrt_runtime (tests/native/c/threads.c): executors made
from one factory on several threads run concurrently with bit-identical outputs equal to the
golden, while another thread's errors stay in its own TVMGetLastError. Plain and under
ASan + UBSan. TVMRT_NATIVE_THREAD_RUNS sets the runs per thread (default 20)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
from tests.native.conftest import NativeBuild

RUNS = os.environ.get("TVMRT_NATIVE_THREAD_RUNS", "20")


def test_executors_on_several_threads(
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    artifacts: Path,
    tmp_path: Path,
) -> None:
    src = artifacts / "relay016" / "systemlib-so"
    golden = np.load(src / "golden.npz")
    golden["data"].tofile(tmp_path / "in.bin")
    exe = compile_c(native, "threads", False)
    proc = native.run(exe, src / "deploy.so", tmp_path / "in.bin", tmp_path / "out.bin", "4", RUNS)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "ok"
    got = np.fromfile(tmp_path / "out.bin", dtype=np.float32).reshape(golden["output_0"].shape)
    np.testing.assert_array_equal(got, golden["output_0"])
