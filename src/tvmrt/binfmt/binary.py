"""Identify binary files and read ELF symbol tables without loading or running anything.

Used before ``dlopen`` so that a file built for another machine or OS, a file that is not
a library at all, or a library that is not a TVM module fails with a clear
:class:`~tvmrt.error.ModuleLoadError` instead of an obscure loader message or a crash,
and by ``tvmrt inspect`` to describe artifacts. Every offset read from a file is checked
against the file size: a corrupt or truncated file gives an error naming what is wrong.

This module knows file formats only: header identification is :mod:`.headers` (re-exported
here), ELF tables are below; what the symbols mean for TVM (which ABI, which slots, which
blob) is :mod:`tvmrt.binfmt.abi`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from tvmrt.binfmt.files import MAX_LIBRARY_BYTES, read_regular
from tvmrt.binfmt.headers import (
    HEAD_SIZE,
    BinaryInfo,
    check_host_compatible,
    host_machine,
    host_os,
    identify,
    identify_bytes,
    with_article,
)
from tvmrt.error import ModuleLoadError

__all__ = [
    "BinaryInfo",
    "ElfFile",
    "ElfRelocation",
    "ElfSymbol",
    "host_machine",
    "host_os",
    "identify",
    "identify_bytes",
    "check_host_compatible",
    "with_article",
]


# -- ELF symbol tables ------------------------------------------------------------------

_SHT_SYMTAB = 2
_SHT_RELA = 4
_SHT_DYNAMIC = 6
_SHT_NOBITS = 8
_SHT_REL = 9
_SHT_DYNSYM = 11
_PT_GNU_RELRO = 0x6474E552
_DT_BIND_NOW = 24
_DT_FLAGS = 30
_DT_FLAGS_1 = 0x6FFFFFFB
_DF_BIND_NOW = 0x8
_DF_1_NOW = 0x1
# (e_machine name) -> {relocation type: kind} for the GOT entries a loader may patch
_RELOC_KINDS = {
    "x86-64": {6: "glob_dat", 7: "jump_slot"},
    "x86": {6: "glob_dat", 7: "jump_slot"},
    "aarch64": {1025: "glob_dat", 1026: "jump_slot"},
    "riscv": {5: "jump_slot"},
}
_SHN_UNDEF = 0
_SHN_LORESERVE = 0xFF00
_SHN_XINDEX = 0xFFFF
_STT_NAMES = {0: "notype", 1: "object", 2: "func", 3: "section", 4: "file", 5: "common", 6: "tls"}
_STT_NAMES[10] = "ifunc"
_STB_NAMES = {0: "local", 1: "global", 2: "weak", 10: "unique"}


@dataclass(frozen=True)
class ElfSymbol:
    """One entry of an ELF symbol table.

    Attributes
    ----------
    name
        The symbol name.
    type
        ``"func"``, ``"object"``, ``"notype"``, ``"tls"``, ``"ifunc"``, ...
    bind
        ``"global"``, ``"weak"``, ``"local"`` or ``"unique"``.
    section
        Index of the defining section (0 when undefined).
    value
        Address (shared library) or offset in its section (object file).
    size
        Size in bytes (0 if unknown).
    """

    name: str
    type: str
    bind: str
    section: int
    value: int
    size: int

    @property
    def defined(self) -> bool:
        """Whether this file defines the symbol (rather than importing it)."""
        return self.section != _SHN_UNDEF

    @property
    def is_function(self) -> bool:
        """Whether the symbol is code."""
        return self.type in ("func", "ifunc")


@dataclass(frozen=True)
class ElfRelocation:
    """A dynamic relocation: where the dynamic loader writes what.

    Attributes
    ----------
    offset
        Address of the patched word, relative to the library's load base.
    type
        The machine-specific relocation type.
    kind
        ``"jump_slot"`` (a PLT entry's GOT word), ``"glob_dat"`` (a GOT word) or ``"other"``.
    symbol
        Name of the symbol it refers to (``""`` if none).
    """

    offset: int
    type: int
    kind: str
    symbol: str


@dataclass(frozen=True)
class _Section:
    name: str
    type: int
    addr: int
    offset: int
    size: int
    link: int
    entsize: int
    flags: int = 0  # SHF_* (SHF_EXECINSTR = 4: code)


# A symbol or section name longer than this is taken for corruption (TVM truncates its
# kernel names to a few hundred bytes; the longest C++ names seen in system libraries are
# a few KB).
MAX_NAME_BYTES = 1 << 16


class _StringTable:
    """Names of one ELF string table, each decoded once and bounded.

    A hostile table can point thousands of symbols into one long unterminated string (or
    at every offset of it): names are looked for at most :data:`MAX_NAME_BYTES` ahead,
    each offset is decoded once, and the bytes decoded in all may not exceed a small
    multiple of the table's size, so reading the names costs memory and time linear in
    the file size.
    """

    def __init__(self, elf: ElfFile, offset: int, size: int) -> None:
        self._elf = elf
        self._offset = offset
        self._size = size
        self._names: dict[int, str] = {}
        # tail-merged tables decode some bytes more than once; a real table stays far below
        self._budget = 4 * size + MAX_NAME_BYTES

    def name(self, index: int) -> str:
        cached = self._names.get(index)
        if cached is not None:
            return cached
        if index >= self._size or self._offset + self._size > len(self._elf.data):
            raise self._elf._corrupt(f"string index {index} is outside its table")
        start = self._offset + index
        stop = min(self._offset + self._size, start + MAX_NAME_BYTES + 1)
        end = self._elf.data.find(b"\x00", start, stop)
        if end < 0:
            what = "is not terminated" if stop == self._offset + self._size else "is too long"
            raise self._elf._corrupt(
                f"string at index {index} {what} (names are at most {MAX_NAME_BYTES} bytes)"
            )
        self._budget -= end - start + 1
        if self._budget < 0:
            raise self._elf._corrupt(
                f"the names in the {self._size}-byte string table at byte offset "
                f"{self._offset} overlap far more than a linker writes them"
            )
        text = self._elf.data[start:end].decode("utf-8", errors="replace")
        self._names[index] = text
        return text


class ElfFile:
    """An ELF file's header, section table and symbol tables, parsed with bounds checks.

    Parameters
    ----------
    data
        The whole file.
    path
        Its name, for messages.

    Raises
    ------
    ModuleLoadError
        If the file is not ELF, or a header, table or string points outside the file.
    """

    def __init__(self, data: bytes, path: str) -> None:
        self.data = data
        self.path = path
        self.info = identify_bytes(data[:HEAD_SIZE])
        if self.info.format != "elf":
            raise ModuleLoadError(f"cannot read {path!r}: not an ELF file ({self.info.describe()})")
        if self.info.bits not in (32, 64) or not self.info.endian:
            raise ModuleLoadError(f"cannot read {path!r}: the ELF header is corrupt")
        self._order = "<" if self.info.endian == "little" else ">"
        self._is64 = self.info.bits == 64
        self.e_type = self._unpack("H", 16, "ELF header")[0]
        self.sections = self._read_sections()

    @classmethod
    def from_path(cls, path: str | Path) -> ElfFile:
        """Read and parse the file at ``path``."""
        data = read_regular(path, "module file", MAX_LIBRARY_BYTES, ModuleLoadError)
        return cls(data, str(path))

    def _corrupt(self, what: str) -> ModuleLoadError:
        return ModuleLoadError(
            f"cannot read {self.path!r}: the ELF file is truncated or corrupt ({what}; "
            f"the file has {len(self.data)} bytes)"
        )

    def _unpack(self, fmt: str, offset: int, what: str) -> tuple[int, ...]:
        st = struct.Struct(self._order + fmt)
        if offset < 0 or offset + st.size > len(self.data):
            raise self._corrupt(f"{what} at byte offset {offset} is past the end")
        return st.unpack_from(self.data, offset)

    def _read_sections(self) -> list[_Section]:
        if self._is64:
            shoff = self._unpack("Q", 0x28, "ELF header")[0]
            shentsize, shnum, shstrndx = self._unpack("HHH", 0x3A, "ELF header")
        else:
            shoff = self._unpack("I", 0x20, "ELF header")[0]
            shentsize, shnum, shstrndx = self._unpack("HHH", 0x2E, "ELF header")
        if shoff == 0:
            return []
        entry = "IIQQQQIIQQ" if self._is64 else "IIIIIIIIII"
        if shentsize < struct.calcsize(self._order + entry):
            raise self._corrupt(f"section header size {shentsize} is too small")
        if shnum == 0 or shstrndx == _SHN_XINDEX:  # extended numbering lives in section 0
            first = self._unpack(entry, shoff, "section header")
            shnum = shnum or first[5]  # sh_size
            shstrndx = first[6] if shstrndx == _SHN_XINDEX else shstrndx  # sh_link
        if shoff + shnum * shentsize > len(self.data):
            raise self._corrupt(f"{shnum} section headers at byte offset {shoff} run past the end")
        # (name, type, flags, addr, offset, size, link, info, addralign, entsize)
        raw = [self._unpack(entry, shoff + i * shentsize, "section header") for i in range(shnum)]
        names = raw[shstrndx] if 0 < shstrndx < shnum else None
        table = _StringTable(self, names[4], names[5]) if names else None
        sections = []
        for name_off, sh_type, flags, addr, offset, size, link, _, _, entsize in raw:
            name = table.name(name_off) if table is not None else ""
            if sh_type != _SHT_NOBITS and offset + size > len(self.data):
                raise self._corrupt(f"section {name!r} at byte offset {offset} runs past the end")
            sections.append(_Section(name, sh_type, addr, offset, size, link, entsize, flags))
        return sections

    def symbols(self, dynamic: bool = True) -> list[ElfSymbol]:
        """The dynamic symbol table (``.dynsym``), or the full one (``.symtab``) if not ``dynamic``.

        Returns an empty list when the file has no such table.
        """
        wanted = _SHT_DYNSYM if dynamic else _SHT_SYMTAB
        for section in self.sections:
            if section.type == wanted:
                return self._read_symbols(section)
        return []

    def _read_symbols(self, table: _Section) -> list[ElfSymbol]:
        entsize = 24 if self._is64 else 16
        if table.link >= len(self.sections):
            raise self._corrupt(f"symbol table links to missing section {table.link}")
        strings = _StringTable(
            self, self.sections[table.link].offset, self.sections[table.link].size
        )
        fmt = "IBBHQQ" if self._is64 else "IIIBBH"
        out = []
        for i in range(1, table.size // entsize):  # entry 0 is the null symbol
            values = self._unpack(fmt, table.offset + i * entsize, "symbol")
            if self._is64:
                name_off, info, _, shndx, value, size = values
            else:
                name_off, value, size, info, _, shndx = values
            name = strings.name(name_off)
            kind = _STT_NAMES.get(info & 0xF, f"type {info & 0xF}")
            bind = _STB_NAMES.get(info >> 4, f"bind {info >> 4}")
            out.append(ElfSymbol(name, kind, bind, shndx, value, size))
        return out

    def read_symbol(self, symbol: ElfSymbol, size: int | None = None) -> bytes:
        """The bytes of a defined data symbol, read from the file (nothing is loaded).

        Parameters
        ----------
        symbol
            A defined symbol of this file.
        size
            Bytes to read (default: the symbol's size).

        Raises
        ------
        ModuleLoadError
            If the symbol has no file bytes (undefined, absolute, ``.bss``) or they lie
            outside its section.
        """
        n = symbol.size if size is None else size
        if not symbol.defined or symbol.section >= min(len(self.sections), _SHN_LORESERVE):
            raise self._corrupt(f"symbol {symbol.name!r} has no data in the file")
        section = self.sections[symbol.section]
        if section.type == _SHT_NOBITS:
            raise self._corrupt(f"symbol {symbol.name!r} is in {section.name!r}, which has no data")
        start = symbol.value if self.e_type == 1 else symbol.value - section.addr
        if start < 0 or n < 0 or start + n > section.size:
            raise self._corrupt(
                f"symbol {symbol.name!r} ({n} bytes at {symbol.value:#x}) lies outside "
                f"section {section.name!r}"
            )
        return self.data[section.offset + start : section.offset + start + n]

    def read_sized_blob(self, symbol: ElfSymbol) -> bytes:
        """A module-blob symbol: ``u64 nbytes`` then the payload, read from the file."""
        head = self.read_symbol(symbol, 8)
        return self.read_symbol(symbol, 8 + int.from_bytes(head, "little"))

    def read_cstring(self, symbol: ElfSymbol, limit: int = 4096) -> str:
        """The NUL-terminated string a ``char[]`` symbol holds (like ``__tvm_main__``).

        Reads at most ``limit`` bytes, and never past the symbol's section when the
        symbol's size is not recorded.
        """
        n = symbol.size
        if not n and symbol.defined and symbol.section < len(self.sections):
            section = self.sections[symbol.section]
            start = symbol.value if self.e_type == 1 else symbol.value - section.addr
            n = max(0, min(limit, section.size - start))
        raw = self.read_symbol(symbol, min(n, limit))
        return raw.split(b"\x00", 1)[0].decode("utf-8", errors="replace")

    def relocations(self) -> list[ElfRelocation]:
        """The dynamic relocations (``.rela.dyn``, ``.rela.plt``, ...) against dynamic symbols."""
        kinds = _RELOC_KINDS.get(self.info.machine, {})
        out = []
        for section in self.sections:
            if section.type not in (_SHT_RELA, _SHT_REL) or section.link >= len(self.sections):
                continue
            table = self.sections[section.link]
            if table.type != _SHT_DYNSYM:
                continue
            names = [""] + [s.name for s in self._read_symbols(table)]
            rela = section.type == _SHT_RELA
            fmt = ("QQq" if rela else "QQ") if self._is64 else ("IIi" if rela else "II")
            size = struct.calcsize(self._order + fmt)
            for i in range(section.size // size):
                offset, info = self._unpack(fmt, section.offset + i * size, "relocation")[:2]
                sym, rtype = (
                    (info >> 32, info & 0xFFFFFFFF) if self._is64 else (info >> 8, info & 0xFF)
                )
                if sym >= len(names):
                    raise self._corrupt(f"relocation {i} names missing symbol {sym}")
                out.append(ElfRelocation(offset, rtype, kinds.get(rtype, "other"), names[sym]))
        return out

    def binds_now(self) -> bool:
        """Whether the library asks for immediate binding (linked with ``-z now``)."""
        for section in self.sections:
            if section.type != _SHT_DYNAMIC:
                continue
            fmt = "qQ" if self._is64 else "iI"
            size = struct.calcsize(self._order + fmt)
            for i in range(section.size // size):
                tag, value = self._unpack(fmt, section.offset + i * size, "dynamic entry")
                if tag == 0:
                    break
                if tag == _DT_BIND_NOW or (tag == _DT_FLAGS and value & _DF_BIND_NOW):
                    return True
                if tag == _DT_FLAGS_1 and value & _DF_1_NOW:
                    return True
        return False

    def relro_ranges(self) -> list[tuple[int, int]]:
        """``[start, end)`` addresses that become read-only after relocation (``PT_GNU_RELRO``)."""
        if self._is64:
            phoff = self._unpack("Q", 0x20, "ELF header")[0]
            phentsize, phnum = self._unpack("HH", 0x36, "ELF header")
            fmt, fields = "IIQQQQQQ", (3, 6)  # p_vaddr, p_memsz
        else:
            phoff = self._unpack("I", 0x1C, "ELF header")[0]
            phentsize, phnum = self._unpack("HH", 0x2A, "ELF header")
            fmt, fields = "IIIIIIII", (2, 5)
        out = []
        for i in range(phnum if phoff else 0):
            header = self._unpack(fmt, phoff + i * phentsize, "program header")
            if header[0] == _PT_GNU_RELRO:
                start = header[fields[0]]
                out.append((start, start + header[fields[1]]))
        return out
