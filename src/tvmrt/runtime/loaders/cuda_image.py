"""What a CUDA module image holds, read without a driver: PTX, cubin (ELF) or fatbin.

* PTX is text: ``.version X.Y`` is the PTX ISA it needs (each CUDA release raises it; a
  driver JIT-compiles PTX up to the ISA of its own CUDA version) and ``.target sm_XY`` the
  oldest GPU it is written for.
* A cubin is an ELF file (machine ``EM_CUDA`` = 190) of machine code (SASS) for one SM:
  ``e_flags`` holds it (bits 8-15 from ELF ABI version 8, i.e. CUDA >= 12.8; bits 0-7
  before). SASS for ``sm_XY`` runs on GPUs of compute capability ``X.Z`` with ``Z >= Y``.
* A fatbin (magic ``0xBA55ED50``) holds entries of either kind, each with its SM (and, for
  PTX, its ISA version) in the entry header. TVM >= 0.9 stores its nvcc output under fmt
  ``cubin`` though it is a fatbin, so the bytes decide, not the fmt.

:func:`check_runs_on` refuses an image the GPU cannot run before the driver is asked,
naming both sides.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from tvmrt.error import ModuleLoadError

__all__ = ["CudaImage", "describe_image", "check_runs_on", "PTX_ISA_CUDA"]

_ELF = b"\x7fELF"
_FATBIN_MAGIC = 0xBA55ED50
_EM_CUDA = 190
_FATBIN_HEADER = struct.Struct("<IHHQ")
_FATBIN_ENTRY = struct.Struct("<HHIQIIII")  # kind, version, header size, payload size, ..., sm

# PTX ISA version -> the CUDA release that introduced it (NVIDIA's PTX ISA release notes)
PTX_ISA_CUDA: dict[tuple[int, int], tuple[int, int]] = {
    (3, 0): (4, 1), (3, 1): (5, 0), (3, 2): (5, 5), (4, 0): (6, 0), (4, 1): (6, 5),
    (4, 2): (7, 0), (4, 3): (7, 5), (5, 0): (8, 0), (6, 0): (9, 0), (6, 1): (9, 1),
    (6, 2): (9, 2), (6, 3): (10, 0), (6, 4): (10, 1), (6, 5): (10, 2), (7, 0): (11, 0),
    (7, 1): (11, 1), (7, 2): (11, 2), (7, 3): (11, 3), (7, 4): (11, 4), (7, 5): (11, 5),
    (7, 6): (11, 6), (7, 7): (11, 7), (7, 8): (11, 8), (8, 0): (12, 0), (8, 1): (12, 1),
    (8, 2): (12, 2), (8, 3): (12, 3), (8, 4): (12, 4), (8, 5): (12, 5), (8, 6): (12, 7),
    (8, 7): (12, 8), (8, 8): (12, 9), (9, 0): (13, 0),
}  # fmt: skip


@dataclass(frozen=True)
class CudaImage:
    """The parts of a CUDA image: PTX versions and targets, SASS targets (SM numbers)."""

    kind: str  # "ptx", "cubin" or "fatbin"
    ptx: tuple[tuple[tuple[int, int], int], ...]  # ((isa major, minor), sm) per PTX part
    sass: tuple[int, ...]  # SM numbers (75 = sm_75) of the machine code parts

    def summary(self) -> str:
        """``"PTX ISA 9.0 for sm_75; SASS sm_80"``: what inspect reports."""
        parts = [f"PTX ISA {v[0]}.{v[1]} for sm_{sm}" for v, sm in self.ptx]
        if self.sass:
            parts.append("SASS " + ", ".join(f"sm_{sm}" for sm in self.sass))
        return "; ".join(parts) or "no code"


def _ptx(text: bytes, what: str) -> CudaImage:
    body = text.split(b"\0", 1)[0].decode("utf-8", errors="replace")
    version = re.search(r"^\s*\.version\s+(\d+)\.(\d+)", body, re.M)
    target = re.search(r"^\s*\.target\s+sm_(\d+)", body, re.M)
    if version is None or target is None:
        raise ModuleLoadError(
            f"{what}: the CUDA module is neither PTX (no '.version'/'.target sm_XX' lines), "
            "a cubin (ELF) nor a fatbin"
        )
    return CudaImage("ptx", (((int(version[1]), int(version[2])), int(target[1])),), ())


def _cubin_sm(data: bytes, what: str) -> int:
    if len(data) < 64 or data[4] != 2:
        raise ModuleLoadError(f"{what}: the cubin is not a 64-bit ELF file")
    (machine,) = struct.unpack_from("<H", data, 18)
    if machine != _EM_CUDA:
        raise ModuleLoadError(
            f"{what}: the ELF file is for machine {machine}, not NVIDIA CUDA ({_EM_CUDA})"
        )
    flags: int = struct.unpack_from("<I", data, 48)[0]
    return (flags >> 8) & 0xFF if data[8] >= 8 else flags & 0xFF


def _fatbin(data: bytes, what: str) -> CudaImage:
    magic, _, header, size = _FATBIN_HEADER.unpack_from(data, 0)
    end = header + size
    if magic != _FATBIN_MAGIC or end > len(data):
        raise ModuleLoadError(f"{what}: the fatbin header claims {size} bytes past its end")
    ptx: list[tuple[tuple[int, int], int]] = []
    sass: list[int] = []
    at = header
    while at + _FATBIN_ENTRY.size <= end:
        kind, _, entry_header, payload, _, _, version, sm = _FATBIN_ENTRY.unpack_from(data, at)
        if entry_header < _FATBIN_ENTRY.size or at + entry_header + payload > end:
            raise ModuleLoadError(f"{what}: fatbin entry at byte {at} runs past the fatbin")
        if kind == 1:
            ptx.append(((version >> 16, version & 0xFFFF), sm))
        elif kind == 2:
            sass.append(sm)
        at += entry_header + payload
    if not ptx and not sass:
        raise ModuleLoadError(f"{what}: the fatbin holds neither PTX nor machine code")
    return CudaImage("fatbin", tuple(ptx), tuple(sass))


def describe_image(data: bytes, what: str) -> CudaImage:
    """Classify and read a CUDA module image; ModuleLoadError if it is none of the three."""
    if data[:4] == _ELF:
        return CudaImage("cubin", (), (_cubin_sm(data, what),))
    if len(data) >= _FATBIN_HEADER.size and struct.unpack_from("<I", data)[0] == _FATBIN_MAGIC:
        return _fatbin(data, what)
    return _ptx(data, what)


def check_runs_on(image: CudaImage, sm: int, driver_version: int, what: str) -> None:
    """Refuse ``image`` where a GPU of ``sm`` (e.g. 90) under the driver cannot run it.

    SASS runs on the same SM major with an equal or higher minor; PTX is JIT-compiled for
    any GPU at or above its target when the driver knows its ISA version.
    """
    if any(s // 10 == sm // 10 and s % 10 <= sm % 10 for s in image.sass):
        return
    driver = (driver_version // 1000, driver_version % 1000 // 10)
    usable = [(v, s) for v, s in image.ptx if s <= sm]
    for version, _ in usable:
        if PTX_ISA_CUDA.get(version, (99, 0)) <= driver:
            return
    gpu = f"sm_{sm} (compute capability {sm // 10}.{sm % 10})"
    if usable:
        version = min(v for v, _ in usable)
        need = PTX_ISA_CUDA.get(version)
        needs = f"CUDA {need[0]}.{need[1]}" if need else "a CUDA release tvmrt does not know"
        raise ModuleLoadError(
            f"{what}: its PTX is ISA version {version[0]}.{version[1]}, which needs {needs}, "
            f"newer than this NVIDIA driver's CUDA {driver[0]}.{driver[1]}: update the driver "
            "or compile the model with an older CUDA toolkit"
        )
    have = ", ".join([f"SASS sm_{s}" for s in image.sass] + [f"PTX for sm_{s}" for _, s in
                     image.ptx])  # fmt: skip
    raise ModuleLoadError(
        f"{what}: it holds code for {have} only, which does not run on this GPU, {gpu}; "
        "recompile the model for this GPU (or with PTX for a lower sm)"
    )
