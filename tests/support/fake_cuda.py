"""The recording stand-in for libcuda (``fake_libcuda.c``), built once per test session."""

from __future__ import annotations

import ctypes
import importlib
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def stand_in_backend(
    lib: Path, monkeypatch: pytest.MonkeyPatch, count: int = 1, sm: int = 75
) -> Iterator[FakeLog]:
    """The Python runtime's CUDA backend on the stand-in ``lib`` (``count`` GPUs of ``sm``),
    in this process; afterwards the shipped backend is the one found again."""
    from tvmrt.runtime.backends import _cuda_driver
    from tvmrt.runtime.backends.cuda import CUDADeviceAPI, backend

    device_table = importlib.import_module("tvmrt.runtime.device")
    cuda = 2  # kDLCUDA
    log = FakeLog(lib)
    log.config(count=count, sm=sm)
    monkeypatch.setenv(_cuda_driver.LIBRARY_ENV, str(lib))
    monkeypatch.setattr(_cuda_driver, "_driver", [])
    api = backend()
    assert isinstance(api, CUDADeviceAPI)
    device_table.register_device_api(cuda, api, override=True)
    try:
        yield log
    finally:
        log.config()
        device_table.unregister_device_api(cuda)
        device_table._lazy[cuda] = "tvmrt.runtime.backends.cuda:backend"
