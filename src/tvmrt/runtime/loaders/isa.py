"""The instruction sets a library's code uses, against what this CPU has.

A kernel library built for a newer CPU than the host (``-mcpu=skylake-avx512`` run on a
machine without AVX-512) is killed by SIGILL at its first vector instruction, taking the
process with it. :func:`check_cpu` reads the code before the library is loaded and refuses
it, naming the missing features.

On x86-64 the executable sections are swept by the instruction-length decoder of
``src/tvmrt/_native/isa.c``: EVEX-encoded instructions need ``avx512f``, VEX-encoded ones
``avx`` (AVX2 and FMA are VEX too; they are not told apart, so a VEX library on an AVX
host without AVX2 is not refused here). The decoder counts an EVEX prefix only where an
instruction starts, so bytes 0x62 inside other instructions (immediates, displacements)
are not taken for one; on this project's reference libraries its counts equal objdump's
(bench/README.md, "contrib"). Other machines (aarch64, ...) are not scanned: their
libraries load as before. The host's features are ``/proc/cpuinfo``'s flags (Linux); where
that file is missing the check is skipped.
"""

from __future__ import annotations

import ctypes
import functools
import re
from dataclasses import dataclass
from pathlib import Path

from tvmrt.binfmt.binary import ElfFile
from tvmrt.binfmt.headers import host_machine
from tvmrt.runtime import kernel_services

__all__ = ["CodeFeatures", "code_features", "host_features", "missing_features", "mcpu_hint"]

_SHF_EXECINSTR = 0x4
_MCPU = re.compile(rb"-mcpu=([A-Za-z0-9_.+-]{1,64})")


@dataclass(frozen=True)
class CodeFeatures:
    """What the x86-64 code of a library uses.

    Attributes
    ----------
    features
        CPU flags (``/proc/cpuinfo`` names) the code needs: ``"avx512f"``, ``"avx"``.
    evex, vex
        How many EVEX- / VEX-encoded instructions it holds.
    first_evex
        ``"section+0xoffset"`` of the first EVEX instruction, or ``""``.
    undecodable
        Bytes the decoder stepped over without knowing them (0 for compiler output).
    """

    features: tuple[str, ...] = ()
    evex: int = 0
    vex: int = 0
    first_evex: str = ""
    undecodable: int = 0


def _scan(code: bytes) -> list[int]:
    lib = kernel_services.native_library()
    scan = lib.tvmrt_x86_64_scan
    scan.restype = ctypes.c_int
    scan.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int64), ctypes.c_int]
    counts = (ctypes.c_int64 * 5)()
    scan(code, len(code), counts, 5)
    return list(counts)


def code_features(elf: ElfFile) -> CodeFeatures:
    """Sweep the executable sections of an x86-64 ELF file (anything else: nothing found)."""
    if elf.info.machine != "x86-64":
        return CodeFeatures()
    evex = vex = unknown = 0
    first = ""
    for section in elf.sections:
        if not section.flags & _SHF_EXECINSTR or section.type == 8 or section.size == 0:
            continue
        counts = _scan(elf.data[section.offset : section.offset + section.size])
        if counts[2] and not first:
            first = f"{section.name}+{counts[4]:#x}"
        vex, evex, unknown = vex + counts[1], evex + counts[2], unknown + counts[3]
    features = tuple(name for name, n in (("avx512f", evex), ("avx", vex)) if n)
    return CodeFeatures(features, evex, vex, first, unknown)


@functools.cache
def host_features() -> frozenset[str] | None:
    """This CPU's feature flags (``/proc/cpuinfo``), or ``None`` where they are unknown."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return None


def missing_features(found: CodeFeatures) -> list[str]:
    """The features ``found`` needs that this CPU lacks (empty when unknown or not x86-64)."""
    host = host_features()
    if host is None or host_machine() != "x86-64":
        return []
    return [name for name in found.features if name not in host]


def mcpu_hint(data: bytes) -> str | None:
    """The ``-mcpu=`` a build recorded in the file (a target string), if any."""
    match = _MCPU.search(data)
    return match.group(1).decode("ascii") if match else None
