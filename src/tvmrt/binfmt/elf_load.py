"""What the dynamic loader trusts in an ELF library, checked before ``dlopen`` (issue 23).

``ld.so`` maps a library by its program headers and relocates it by its dynamic section
without checking either against the file: a segment past the end of the file maps pages
that raise ``SIGBUS``, a ``DT_PLTGOT`` of 0 makes it write into the read-only ELF header,
a ``DT_PLTREL`` it does not expect trips an assertion, and a read-only segment whose file
bytes were cut to zero loads and computes with zeros.
:func:`~.elf_checks.check_loadable` reads those structures from the file, as the loader
will see them, and refuses with a :class:`~tvmrt.error.ModuleLoadError` that names the
field and what was expected::

    cannot load 'deploy.so': PT_LOAD[1].p_filesz is 0x0 (p_memsz 0x33c9); expected ...

This module reads the program headers (:class:`LoadImage`) and checks the segments
(:mod:`.elf_checks` runs every check); :mod:`.elf_dynamic` checks the dynamic section,
:mod:`.elf_tables` the symbol, hash and relocation tables it points to and that the
section headers (which tvmrt itself reads, :mod:`.binary`) describe the same bytes the
loader maps.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass, replace

from tvmrt.binfmt.binary import ElfFile, ElfSymbol
from tvmrt.error import ModuleLoadError

__all__ = ["LoadImage", "Segment", "check_segments", "PF_R", "PF_W", "PF_X"]

PT_LOAD, PT_DYNAMIC, PT_INTERP, PT_NOTE, PT_PHDR, PT_TLS = 1, 2, 3, 4, 6, 7
PT_GNU_EH_FRAME, PT_GNU_STACK = 0x6474E550, 0x6474E551
PT_GNU_RELRO, PT_GNU_PROPERTY = 0x6474E552, 0x6474E553
PF_X, PF_W, PF_R = 1, 2, 4
_PT_NAMES = {
    PT_LOAD: "PT_LOAD",
    PT_DYNAMIC: "PT_DYNAMIC",
    PT_INTERP: "PT_INTERP",
    PT_NOTE: "PT_NOTE",
    PT_PHDR: "PT_PHDR",
    PT_TLS: "PT_TLS",
    PT_GNU_EH_FRAME: "PT_GNU_EH_FRAME",
    PT_GNU_STACK: "PT_GNU_STACK",
    PT_GNU_RELRO: "PT_GNU_RELRO",
    PT_GNU_PROPERTY: "PT_GNU_PROPERTY",
}
# segments whose bytes the loader (or the unwinder, via dl_iterate_phdr) reads in memory
_READ_IN_MEMORY = (PT_DYNAMIC, PT_INTERP, PT_NOTE, PT_PHDR, PT_TLS, PT_GNU_EH_FRAME)
_PAGE = 0x1000  # mmap maps whole pages: offset and address must agree modulo the page


@dataclass(frozen=True)
class Segment:
    """One program header; ``name`` is how messages call it (``PT_LOAD[1]``, ``PT_DYNAMIC``)."""

    name: str
    type: int
    flags: int
    offset: int
    vaddr: int
    filesz: int
    memsz: int
    align: int

    @property
    def end(self) -> int:
        """The first address after the segment in memory."""
        return self.vaddr + self.memsz

    def holds(self, addr: int, size: int = 0) -> bool:
        """Whether ``[addr, addr + size)`` lies in the segment's memory."""
        return self.vaddr <= addr and addr + size <= self.end

    def holds_file(self, addr: int, size: int = 0) -> bool:
        """Whether ``[addr, addr + size)`` lies in the part of the segment read from the file."""
        return self.vaddr <= addr and addr + size <= self.vaddr + self.filesz


class LoadImage:
    """A library as the dynamic loader will map it: segments, and reads by address.

    Parameters
    ----------
    elf
        The parsed file (section headers and symbols, :class:`~.binary.ElfFile`).

    Raises
    ------
    ModuleLoadError
        If the program header table is malformed.
    """

    def __init__(self, elf: ElfFile) -> None:
        self.elf = elf
        self.data = elf.data
        self.is64 = elf.info.bits == 64
        self.order = "<" if elf.info.endian == "little" else ">"
        self.word = 8 if self.is64 else 4
        self.machine = elf.info.machine
        if self.is64:
            self.phoff = elf._unpack("Q", 0x20, "ELF header")[0]
            phentsize, self.phnum = elf._unpack("HH", 0x36, "ELF header")
        else:
            self.phoff = elf._unpack("I", 0x1C, "ELF header")[0]
            phentsize, self.phnum = elf._unpack("HH", 0x2A, "ELF header")
        self.phentsize = 56 if self.is64 else 32
        if phentsize != self.phentsize:
            raise self.bad("e_phentsize", phentsize, f"{self.phentsize}")
        if not 0 < self.phnum < 0xFFFF:
            raise self.bad("e_phnum", self.phnum, "1 to 65534 program headers")
        if self.phoff + self.phnum * self.phentsize > len(self.data):
            raise self.bad(
                "e_phoff", hex(self.phoff), f"{self.phnum} program headers inside the file"
            )
        self.segments = self._read_segments()
        self.loads = [s for s in self.segments if s.type == PT_LOAD]

    def bad(self, field: str, value: object, expected: str) -> ModuleLoadError:
        """The error for ``field`` holding ``value`` where ``expected`` was."""
        return ModuleLoadError(
            f"cannot load {self.elf.path!r}: {field} is {value}; expected {expected} "
            "(checked before dlopen: the dynamic loader trusts this field)"
        )

    def _read_segments(self) -> list[Segment]:
        fmt = self.order + ("IIQQQQQQ" if self.is64 else "IIIIIIII")
        counts: dict[int, int] = {}
        raw = []
        for i in range(self.phnum):
            values = struct.unpack_from(fmt, self.data, self.phoff + i * self.phentsize)
            if self.is64:
                ptype, flags, offset, vaddr, _, filesz, memsz, align = values
            else:
                ptype, offset, vaddr, _, filesz, memsz, flags, align = values
            counts[ptype] = counts.get(ptype, 0) + 1
            raw.append((ptype, flags, offset, vaddr, filesz, memsz, align))
        seen: dict[int, int] = {}
        out = []
        for i, (ptype, flags, offset, vaddr, filesz, memsz, align) in enumerate(raw):
            k = seen.get(ptype, 0)
            seen[ptype] = k + 1
            base = _PT_NAMES.get(ptype)
            if base is None:
                name = f"program header {i}"
            elif ptype in (PT_LOAD, PT_NOTE) or counts[ptype] > 1:
                name = f"{base}[{k}]"
            else:
                name = base
            out.append(Segment(name, ptype, flags, offset, vaddr, filesz, memsz, align))
        return out

    @functools.cached_property
    def symtab(self) -> list[ElfSymbol]:
        """The full symbol table (``.symtab``; empty when stripped), read once."""
        return self.elf.symbols(dynamic=False)

    def load_at(self, addr: int, size: int = 0) -> Segment | None:
        """The ``PT_LOAD`` whose memory holds ``[addr, addr + size)``."""
        for seg in self.loads:
            if seg.holds(addr, size):
                return seg
        return None

    def file_offset(self, addr: int, size: int) -> int | None:
        """Where in the file the loader maps ``[addr, addr + size)`` from (None: not file bytes)."""
        for seg in self.loads:
            if seg.holds_file(addr, size):
                return seg.offset + (addr - seg.vaddr)
        return None

    def read(self, addr: int, size: int, field: str, what: str) -> bytes:
        """``size`` bytes at ``addr`` as mapped from the file, or an error naming ``field``."""
        at = self.file_offset(addr, size) if addr >= 0 and size >= 0 else None
        if at is None:
            raise self.bad(field, hex(addr), f"the address of {what} in a PT_LOAD's file bytes")
        return self.data[at : at + size]

    def words(self, fmt: str, blob: bytes) -> list[tuple[int, ...]]:
        """``blob`` unpacked as consecutive ``fmt`` records."""
        st = struct.Struct(self.order + fmt)
        return list(st.iter_unpack(blob[: len(blob) - len(blob) % st.size]))


def check_segments(image: LoadImage) -> None:
    """Check the program headers: segments inside the file, ordered, aligned, mapping what
    ``ld.so`` reads (the ELF header, the program headers, the dynamic section).
    """
    size = len(image.data)
    limit = 1 << (64 if image.is64 else 32)
    for seg in image.segments:
        if seg.type not in _PT_NAMES or seg.type == PT_GNU_STACK:
            continue
        if seg.filesz and seg.offset + seg.filesz > size:
            field = "p_offset" if seg.offset >= size or seg.filesz <= size else "p_filesz"
            raise image.bad(
                f"{seg.name}.{field}",
                hex(getattr(seg, field[2:])),
                f"the segment's file bytes (offset {seg.offset:#x}, {seg.filesz:#x} bytes) "
                f"inside the file ({size} bytes)",
            )
        if seg.filesz > seg.memsz:
            raise image.bad(
                f"{seg.name}.p_filesz", f"{seg.filesz:#x} (p_memsz {seg.memsz:#x})", "<= p_memsz"
            )
        if seg.align > 1 and seg.align & (seg.align - 1):
            raise image.bad(f"{seg.name}.p_align", hex(seg.align), "0, 1 or a power of two")
        if seg.vaddr + seg.memsz > limit:
            raise image.bad(
                f"{seg.name}.p_vaddr", hex(seg.vaddr), f"the segment to end below {limit:#x}"
            )
    if not image.loads:
        raise image.bad("PT_LOAD", "missing", "at least one loadable segment")
    for seg in image.loads:
        _check_load(image, seg)
    for before, after in zip(image.loads, image.loads[1:], strict=False):
        if after.vaddr < before.end:
            raise image.bad(
                f"{after.name}.p_vaddr",
                hex(after.vaddr),
                f"at least {before.end:#x}, the end of {before.name} (PT_LOAD segments are "
                "sorted by address and do not overlap)",
            )
    first, last = image.loads[0], image.loads[-1]
    room = sum(s.memsz for s in image.loads) + len(image.loads) * (
        max(s.align for s in image.loads) + 0x10000
    )
    if last.end - first.vaddr > room:
        raise image.bad(
            f"{last.name}.p_vaddr",
            hex(last.vaddr),
            f"the segments to span at most {room:#x} bytes (their sizes and alignment), "
            f"not {last.end - first.vaddr:#x}",
        )
    headers = image.phoff + image.phnum * image.phentsize
    if first.offset != 0 or first.filesz < headers:
        field = "p_offset" if first.offset != 0 else "p_filesz"
        raise image.bad(
            f"{first.name}.{field}",
            hex(getattr(first, field[2:])),
            f"the first PT_LOAD to map the ELF header and program headers (file bytes 0 to "
            f"{headers:#x}), as linkers write it",
        )
    dynamics = [s for s in image.segments if s.type == PT_DYNAMIC]
    if len(dynamics) != 1:
        raise image.bad("PT_DYNAMIC", f"present {len(dynamics)} times", "exactly one")
    for seg in image.segments:
        if seg.type == PT_PHDR and (seg.offset != image.phoff or seg.filesz < headers - seg.offset):
            raise image.bad(f"{seg.name}.p_offset", hex(seg.offset), f"e_phoff ({image.phoff:#x})")
        if seg.type == PT_TLS and seg.filesz:  # its .tbss takes no room in a PT_LOAD
            check_mapped(image, replace(seg, memsz=seg.filesz))
        elif seg.type in _READ_IN_MEMORY and seg.type != PT_TLS and seg.memsz:
            check_mapped(image, seg)
        elif seg.type in (PT_GNU_RELRO, PT_GNU_PROPERTY) and seg.memsz:
            check_mapped(image, seg, writable=seg.type == PT_GNU_RELRO)
        if seg.type == PT_INTERP and (seg.filesz == 0 or image.data[seg.offset + seg.filesz - 1]):
            raise image.bad(f"{seg.name}.p_filesz", hex(seg.filesz), "a NUL-terminated path")
        if seg.type == PT_TLS and seg.align & (seg.align - 1):
            raise image.bad(f"{seg.name}.p_align", hex(seg.align), "a power of two")


def _check_load(image: LoadImage, seg: Segment) -> None:
    if seg.memsz == 0:
        raise image.bad(f"{seg.name}.p_memsz", "0", "a non-empty segment")
    if seg.align == 0 or (seg.offset - seg.vaddr) % max(seg.align, 1):
        raise image.bad(
            f"{seg.name}.p_offset",
            f"{seg.offset:#x} (p_vaddr {seg.vaddr:#x}, p_align {seg.align:#x})",
            "p_offset % p_align == p_vaddr % p_align with a power-of-two p_align",
        )
    if (seg.offset - seg.vaddr) % _PAGE:
        raise image.bad(
            f"{seg.name}.p_vaddr",
            hex(seg.vaddr),
            f"an address equal to p_offset ({seg.offset:#x}) modulo the page size {_PAGE:#x}",
        )
    if seg.filesz < seg.memsz and not seg.flags & PF_W:
        raise image.bad(
            f"{seg.name}.p_filesz",
            f"{seg.filesz:#x} (p_memsz {seg.memsz:#x})",
            f"{seg.memsz:#x}: only a writable segment ends in zero-filled bytes (.bss)",
        )


def check_mapped(image: LoadImage, seg: Segment, writable: bool = False) -> Segment:
    """Check a segment the loader reads in memory lies in a ``PT_LOAD``, mapped from its bytes.

    ``writable``: the ``PT_LOAD`` must be writable (``PT_GNU_RELRO`` is made read-only).
    """
    load = image.load_at(seg.vaddr, seg.memsz)
    if seg.filesz and (load is None or load.offset + (seg.vaddr - load.vaddr) != seg.offset):
        # where do the segment's file bytes land, if some PT_LOAD maps them?
        for other in image.loads:
            if (
                other.offset <= seg.offset
                and seg.offset + seg.filesz <= other.offset + other.filesz
            ):
                at = other.vaddr + (seg.offset - other.offset)
                raise image.bad(
                    f"{seg.name}.p_vaddr",
                    hex(seg.vaddr),
                    f"{at:#x}, where {other.name} maps its file offset {seg.offset:#x}",
                )
        if load is not None:
            at = load.offset + (seg.vaddr - load.vaddr)
            raise image.bad(
                f"{seg.name}.p_offset",
                hex(seg.offset),
                f"{at:#x}, the file offset {load.name} maps to p_vaddr {seg.vaddr:#x}",
            )
    if load is None:
        field = "p_memsz" if image.load_at(seg.vaddr) is not None else "p_vaddr"
        raise image.bad(
            f"{seg.name}.{field}",
            hex(getattr(seg, field[2:])),
            f"the segment ({seg.vaddr:#x}, {seg.memsz:#x} bytes) inside one PT_LOAD's memory",
        )
    if seg.filesz and not load.holds_file(seg.vaddr, seg.filesz):
        raise image.bad(
            f"{seg.name}.p_filesz",
            hex(seg.filesz),
            f"the segment inside the file bytes {load.name} maps",
        )
    if writable and not load.flags & PF_W:
        raise image.bad(f"{seg.name}.p_vaddr", hex(seg.vaddr), "an address in a writable PT_LOAD")
    return load
