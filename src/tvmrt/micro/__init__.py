"""tvmrt on microcontrollers: MLF AOT packages built into firmware and run on a board.

:func:`build_firmware` compiles a package with tvmrt's micro runtime (C, no heap: TVM's CRT
functions at TVM's header paths, ``tvm/runtime/crt/*.h``) for a :data:`BOARDS` entry;
:func:`run_firmware` runs it on the board QEMU emulates and returns the outputs, the
instructions it took and the stack it used; :class:`Footprint` splits flash and RAM by part.
"""

from __future__ import annotations

from tvmrt.micro.boards import BOARDS, Board, board
from tvmrt.micro.emulator import MicroRun, run_firmware
from tvmrt.micro.firmware import (
    Firmware,
    build_firmware,
    include_dirs,
    port_files,
    runtime_sources,
)
from tvmrt.micro.footprint import Footprint

__all__ = [
    "BOARDS",
    "Board",
    "Firmware",
    "Footprint",
    "MicroRun",
    "board",
    "build_firmware",
    "include_dirs",
    "port_files",
    "run_firmware",
    "runtime_sources",
]
