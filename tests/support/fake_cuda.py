"""The recording stand-in for libcuda (``fake_libcuda.c``), built once per test session."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import pytest

SOURCE = Path(__file__).with_name("fake_libcuda.c")


def build(out_dir: Path) -> Path:
    """Compile the stand-in into ``out_dir``; skip the test where there is no C compiler."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler to build the libcuda stand-in")
    lib = out_dir / "libfakecuda.so"
    cmd = [cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-O1",
           "-o", str(lib), str(SOURCE), "-lpthread"]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True)
    return lib


class FakeLog:
    """The stand-in's call log and configuration, through its own exported functions."""

    def __init__(self, path: Path) -> None:
        self.lib = ctypes.CDLL(str(path))  # the same handle the backend loaded
        self.lib.fake_log.restype = ctypes.c_char_p
        self.lib.fake_config.argtypes = [ctypes.c_int] * 4

    def lines(self) -> list[str]:
        raw = self.lib.fake_log() or b""
        return raw.decode().splitlines()

    def reset(self) -> None:
        self.lib.fake_reset()

    def config(self, count: int = 1, sm: int = 75, driver: int = 13000) -> None:
        self.lib.fake_config(count, sm // 10, sm % 10, driver)

    def exact(self, on: bool = True) -> None:
        """Log launches exactly: each parameter's bytes in hex, the stream's address."""
        self.lib.fake_exact(int(on))

    def live_allocations(self) -> int:
        return int(self.lib.fake_live_allocations())
