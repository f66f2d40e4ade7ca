"""The boards ``tvmrt micro`` builds firmware for: Arm Cortex-M machines QEMU emulates.

One :class:`Board` per machine: the CPU and its compiler flags (float ABI included), the
memory the firmware is linked into (code and constants in ``flash``, data, workspace and
stack in ``ram``), the processor clock SysTick counts, and the ELF attributes an object-code
(``llvm``) package's objects must carry to link. A new board is one table line.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvmrt.error import UsageError

__all__ = ["BOARDS", "Board", "board"]


@dataclass(frozen=True)
class Board:
    """A QEMU machine and how to build for it."""

    name: str  # QEMU's -M
    cpu: str
    summary: str
    cflags: tuple[str, ...]
    flash: tuple[int, int]  # origin, bytes
    ram: tuple[int, int]
    cpu_hz: int  # SysTick's processor clock in QEMU
    hard_float: bool
    qemu: str = "qemu-system-arm"

    @property
    def float_note(self) -> str:
        """How float arithmetic runs: on an FPU, or in software."""
        if self.hard_float:
            return "single-precision FPU (hard-float ABI)"
        return "no FPU: float models run on soft-float (libgcc's routines)"


_M = "-mthumb"
BOARDS: dict[str, Board] = {
    b.name: b
    for b in (
        Board(
            "mps2-an385",
            "cortex-m3",
            "Arm MPS2 AN385, Cortex-M3 (Armv7-M), no FPU",
            (_M, "-mcpu=cortex-m3", "-mfloat-abi=soft"),
            (0x00000000, 4 << 20),
            (0x20000000, 4 << 20),
            25_000_000,
            False,
        ),
        Board(
            "mps2-an386",
            "cortex-m4",
            "Arm MPS2 AN386, Cortex-M4F (Armv7E-M, DSP, single-precision FPU)",
            (_M, "-mcpu=cortex-m4", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"),
            (0x00000000, 4 << 20),
            (0x20000000, 4 << 20),
            25_000_000,
            True,
        ),
        Board(
            "mps2-an505",
            "cortex-m33",
            "Arm MPS2 AN505, Cortex-M33 (Armv8-M Mainline, secure state, FPU)",
            (_M, "-mcpu=cortex-m33", "-mfpu=fpv5-sp-d16", "-mfloat-abi=hard"),
            (0x10000000, 4 << 20),
            (0x38000000, 2 << 20),
            20_000_000,
            True,
        ),
        Board(
            "mps3-an547",
            "cortex-m55",
            "Arm MPS3 AN547, Cortex-M55 (Armv8.1-M, Helium, FPU), code in its 512 KiB ITCM",
            (_M, "-mcpu=cortex-m55", "-mfloat-abi=hard"),
            (0x00000000, 512 << 10),
            (0x20000000, 512 << 10),
            32_000_000,
            True,
        ),
    )
}


def board(name: str) -> Board:
    """The board called ``name``.

    Raises
    ------
    UsageError
        If no board has that name (the message lists them).
    """
    found = BOARDS.get(name)
    if found is None:
        raise UsageError(f"unknown board {name!r}; tvmrt builds for {', '.join(BOARDS)}")
    return found
