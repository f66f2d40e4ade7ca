"""The CUDA fixtures, made on first use: ``scripts/make_cuda_fixtures.py`` into
``build/cuda-fixtures`` (what ``make gpu-check-pack`` packs).

TVM 0.27 (the compile extra) and ``nvcc`` make the tvm-ffi era fixtures; the TVM 0.19 peer
(:mod:`support.peers`) lowers the Relay-era one's host code. Every test that needs them
asks here, so which test runs first does not matter; a file lock keeps one builder at a
time across pytest workers and runs. A test skips, naming what is missing, only when
nvcc or TVM 0.27 is absent.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.paths import REPO
from support.peers import tvm019_python

CUDA_FIXTURES = REPO / "build" / "cuda-fixtures"
# the script's last outputs: with all present every fixture was made (an older script's
# folder, from before the MobileNet-class or the Relay VM fixture, is made again)
_MADE = ("relay019_golden.npz", "relay019_vm.ro", "mobilenet_golden.npz")


def _complete() -> bool:
    return all((CUDA_FIXTURES / name).is_file() for name in _MADE)


def cuda_fixtures() -> Path:
    """``build/cuda-fixtures``, made first if it is not complete."""
    if _complete():
        return CUDA_FIXTURES
    if shutil.which("nvcc") is None:
        pytest.skip("making the CUDA fixtures needs nvcc (nvidia-cuda-nvcc)")
    if importlib.util.find_spec("tvm") is None:
        pytest.skip("making the CUDA fixtures needs TVM 0.27 (the compile extra)")
    peers = tvm019_python().parents[2]  # the TVM 0.19 peer the Relay-era fixture needs
    CUDA_FIXTURES.parent.mkdir(parents=True, exist_ok=True)
    with open(CUDA_FIXTURES.parent / ".cuda-fixtures.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _complete():
            env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "TVMRT_PEERS_DIR": str(peers)}
            script = REPO / "scripts" / "make_cuda_fixtures.py"
            run = subprocess.run(
                [sys.executable, str(script), str(CUDA_FIXTURES)],
                capture_output=True,
                text=True,
                env=env,
            )
            if run.returncode != 0 or not _complete():
                raise RuntimeError(
                    f"making the CUDA fixtures failed:\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}"
                )
    return CUDA_FIXTURES
