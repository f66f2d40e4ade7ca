"""Running firmware on an emulated board: QEMU's system emulator with semihosting.

The firmware (:mod:`.firmware`) reads ``tvmrt-inputs.bin`` and writes
``tvmrt-outputs.bin`` in the folder QEMU runs in, prints its figures on the semihosting
console (``tvmrt-micro: NAME=VALUE``) and exits through semihosting with its status. QEMU
runs with ``-icount shift=0``: the virtual clock advances one nanosecond per instruction,
so the processor-clock ticks SysTick counted give the instructions executed
(``ticks * 1e9 / cpu_hz``, to within one tick's worth), the same on every host.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tvmrt.error import TVMError, UsageError
from tvmrt.micro.firmware import Firmware
from tvmrt.runtime.dtype import DataType

__all__ = ["MicroRun", "find_qemu", "run_firmware"]

DEFAULT_TIMEOUT_S = 300.0


@dataclass
class MicroRun:
    """What one emulated inference gave."""

    outputs: list[np.ndarray]
    ticks: int
    stack_used: int
    instructions: int
    console: str


def find_qemu(command: str) -> str:
    """QEMU's system emulator for the board.

    Raises
    ------
    UsageError
        If it is not installed (the message names Debian's package).
    """
    found = shutil.which(command)
    if found is None:
        raise UsageError(
            f"{command} was not found; install QEMU's Arm system emulator (Debian: apt-get "
            "install qemu-system-arm)"
        )
    return found


def run_firmware(
    firmware: Firmware, inputs: list[np.ndarray], timeout: float | None = None
) -> MicroRun:
    """Run one inference of ``firmware`` on its emulated board.

    ``inputs`` are the package's inputs in order, of its dtypes and sizes.

    Raises
    ------
    UsageError
        If an input's size or dtype is not the package's.
    TVMError
        If the firmware faults, the model returns an error, or the run takes longer than
        ``timeout`` seconds (``$TVMRT_MICRO_TIMEOUT``, default 300).
    """
    package, board = firmware.package, firmware.board
    if timeout is None:
        timeout = float(os.environ.get("TVMRT_MICRO_TIMEOUT", DEFAULT_TIMEOUT_S))
    qemu = find_qemu(board.qemu)
    blob = bytearray()
    for tensor, value in zip(package.inputs, inputs, strict=True):
        want = DataType(tensor.dtype).numpy_dtype
        if value.dtype != want or value.nbytes != tensor.size:
            raise UsageError(
                f"input {tensor.name!r}: expected {tensor.dtype} of {tensor.size} bytes "
                f"(shape {list(tensor.shape)}), got {value.dtype} of shape {list(value.shape)}"
            )
        blob += np.ascontiguousarray(value).tobytes()
    with tempfile.TemporaryDirectory(prefix="tvmrt-micro-run-") as work:
        Path(work, "tvmrt-inputs.bin").write_bytes(bytes(blob))
        command = [
            qemu,
            "-M",
            board.name,
            "-nographic",
            "-monitor",
            "none",
            "-serial",
            "none",
            "-semihosting-config",
            "enable=on,target=native",
            "-icount",
            "shift=0",
            "-kernel",
            str(firmware.elf),
        ]
        try:
            done = subprocess.run(
                command, cwd=work, capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired as exc:
            raise TVMError(
                f"{package.shown!r} on {board.name}: no answer within {timeout:g} s "
                "(set TVMRT_MICRO_TIMEOUT for a slower model)"
            ) from exc
        console = done.stdout + done.stderr
        figures = _figures(console)
        if done.returncode != 0:
            why = {
                1: f"the model's entry returned {_signed(figures.get('rc', 0))}",
                2: "the harness could not read its inputs or write its outputs",
                3: "the processor faulted",
                4: "the model called TVMPlatformAbort",
            }.get(done.returncode, f"QEMU exited with {done.returncode}")
            tail = console.strip()[-1500:]
            raise TVMError(f"{package.shown!r} on {board.name}: {why}\n{tail}")
        data = Path(work, "tvmrt-outputs.bin").read_bytes()
    outputs, at = [], 0
    for tensor in package.outputs:
        chunk = data[at : at + tensor.size]
        at += tensor.size
        if len(chunk) != tensor.size:
            raise TVMError(f"{package.shown!r} on {board.name}: output {tensor.name!r} is short")
        outputs.append(
            np.frombuffer(chunk, DataType(tensor.dtype).numpy_dtype).reshape(tensor.shape).copy()
        )
    ticks = (figures.get("ticks_hi", 0) << 32) | figures.get("ticks_lo", 0)
    return MicroRun(
        outputs,
        ticks,
        figures.get("stack_used", 0),
        ticks * 1_000_000_000 // board.cpu_hz,
        console,
    )


def _signed(value: int) -> int:
    return value - (1 << 32) if value >= 1 << 31 else value


def _figures(console: str) -> dict[str, int]:
    out = {}
    for line in console.splitlines():
        if line.startswith("tvmrt-micro: ") and "=" in line:
            name, _, value = line[len("tvmrt-micro: ") :].partition("=")
            if value.strip().isdigit():
                out[name.strip()] = int(value)
    return out
