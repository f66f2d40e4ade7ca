"""Identify binary files and read ELF symbol tables without loading or running anything.

Used before ``dlopen`` so that a file built for another machine or OS, a file that is not
a library at all, or a library that is not a TVM module fails with a clear
:class:`~tvmrt.error.ModuleLoadError` instead of an obscure loader message or a crash,
and by ``tvmrt inspect`` to describe artifacts. Every offset read from a file is checked
against the file size: a corrupt or truncated file gives an error naming what is wrong.
"""

from __future__ import annotations

import bz2
import lzma
import platform
import struct
import sys
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tvmrt.error import ModuleLoadError

__all__ = [
    "BinaryInfo",
    "ElfFile",
    "ElfRelocation",
    "ElfSymbol",
    "TvmSymbols",
    "host_machine",
    "host_os",
    "identify",
    "identify_bytes",
    "check_host_compatible",
    "with_article",
    "scan_tvm_symbols",
]

_ELF_MAGIC = b"\x7fELF"
_PARAMS_MAGIC = struct.pack("<Q", 0xF7E58D4F05049CB7)  # TVM's save_param_dict
_HEAD_SIZE = 4096  # enough for every header identify() reads

# e_machine -> (short name, qualifier shown in messages)
_ELF_MACHINES: dict[int, tuple[str, str]] = {
    2: ("sparc", "SPARC"),
    3: ("x86", "32-bit"),
    4: ("m68k", "Motorola 68000"),
    8: ("mips", "MIPS"),
    20: ("ppc", "PowerPC 32-bit"),
    21: ("ppc64", "PowerPC 64-bit"),
    22: ("s390", "IBM Z"),
    40: ("arm", "ARM 32-bit"),
    43: ("sparcv9", "SPARC 64-bit"),
    62: ("x86-64", ""),
    164: ("hexagon", "Qualcomm Hexagon DSP"),
    183: ("aarch64", "ARM 64-bit"),
    243: ("riscv", "RISC-V"),
    258: ("loongarch", "LoongArch"),
}
_ELF_TYPES = {1: "object file", 2: "executable", 3: "shared library", 4: "core dump"}
_ELF_OSABI = {0: "", 3: "Linux", 6: "Solaris", 9: "FreeBSD", 12: "OpenBSD", 2: "NetBSD"}
_PE_MACHINES = {0x14C: "x86", 0x8664: "x86-64", 0x1C0: "arm", 0x1C4: "arm", 0xAA64: "aarch64"}
_MACHO_CPUS = {
    7: "x86",
    0x01000007: "x86-64",
    12: "arm",
    0x0100000C: "aarch64",
    18: "ppc",
    0x01000012: "ppc64",
}
_MACHO_TYPES = {1: "object file", 2: "executable", 6: "shared library", 8: "bundle"}
_QUALIFIERS = {short: qual for short, qual in _ELF_MACHINES.values()}


def _machine_text(machine: str) -> str:
    """``"aarch64 (ARM 64-bit)"``: the short name with its qualifier, for messages."""
    qualifier = _QUALIFIERS.get(machine, "")
    return f"{machine} ({qualifier})" if qualifier else machine


def host_machine() -> str:
    """This machine's architecture in the names :func:`identify` uses (``"x86-64"``, ...)."""
    name = platform.machine().lower()
    aliases = {
        "x86_64": "x86-64",
        "amd64": "x86-64",
        "aarch64": "aarch64",
        "arm64": "aarch64",
        "i386": "x86",
        "i686": "x86",
        "ppc64le": "ppc64",
        "s390x": "s390",
        "riscv64": "riscv",
        "loongarch64": "loongarch",
    }
    if name in aliases:
        return aliases[name]
    return "arm" if name.startswith("arm") else name


def host_os() -> str:
    """``"linux"``, ``"macos"``, ``"windows"`` or ``sys.platform``."""
    if sys.platform.startswith("linux"):
        return "linux"
    if sys.platform == "darwin":
        return "macos"
    if sys.platform in ("win32", "cygwin"):
        return "windows"
    return sys.platform


_HOST_BITS = struct.calcsize("P") * 8


@dataclass(frozen=True)
class BinaryInfo:
    """What a file is, read from its header.

    Attributes
    ----------
    format
        ``"elf"``, ``"pe"``, ``"macho"``, ``"macho-fat"``, ``"ar"``, ``"tar"`` (possibly
        compressed), ``"zip"``, ``"tvm-params"``, ``"gzip"``, ``"bzip2"``, ``"xz"``,
        ``"text"``, ``"empty"`` or ``"unknown"``.
    kind
        ``"shared library"``, ``"object file"``, ``"executable"``, ``"archive"``, ...
    machine
        Architecture (``"x86-64"``, ``"aarch64"``, ``"arm"``, ...; ``""`` if unknown).
    bits
        32 or 64 (0 if unknown).
    endian
        ``"little"``, ``"big"`` or ``""``.
    os_abi
        The ELF OS/ABI (``""`` for System V), or the platform of a PE/Mach-O file.
    """

    format: str
    kind: str = ""
    machine: str = ""
    bits: int = 0
    endian: str = ""
    os_abi: str = ""

    def describe(self) -> str:
        """A short phrase for messages and ``tvmrt inspect``."""
        arch = _machine_text(self.machine) if self.machine else "unknown architecture"
        if self.format == "elf":
            osabi = f", {self.os_abi}" if self.os_abi else ""
            return f"ELF {self.bits}-bit {self.kind} for {arch}{osabi}"
        if self.format == "pe":
            return f"Windows {self.kind} (PE) for {arch}"
        if self.format in ("macho", "macho-fat"):
            return f"macOS Mach-O {self.kind} for {arch}"
        if self.format == "tar":
            return f"tar archive ({self.kind})" if self.kind != "archive" else "tar archive"
        names = {
            "ar": "static library (ar archive)",
            "zip": "zip archive",
            "gzip": "gzip-compressed file",
            "bzip2": "bzip2-compressed file",
            "xz": "xz-compressed file",
            "tvm-params": "TVM params blob",
            "text": "text file",
            "empty": "empty file",
        }
        return names.get(self.format, "file of unrecognised binary data")


def identify_bytes(head: bytes) -> BinaryInfo:
    """Identify a file from its first bytes (4 KiB is enough)."""
    if not head:
        return BinaryInfo("empty")
    if head.startswith(_ELF_MAGIC):
        return _identify_elf(head)
    if head.startswith(b"MZ"):
        return _identify_pe(head)
    if head[:4] in (
        b"\xfe\xed\xfa\xce",
        b"\xfe\xed\xfa\xcf",
        b"\xce\xfa\xed\xfe",
        b"\xcf\xfa\xed\xfe",
    ):
        return _identify_macho(head)
    if head[:4] == b"\xca\xfe\xba\xbe" and len(head) >= 8:
        count = struct.unpack_from(">I", head, 4)[0]
        if 0 < count < 30:  # a Java class file has its version (>= 45) here
            return _identify_fat(head, count)
    if head.startswith(b"!<arch>\n"):
        return BinaryInfo("ar", "archive")
    if len(head) >= 263 and head[257:262] == b"ustar":
        return BinaryInfo("tar", "archive")
    compression = _compression(head)
    if compression:
        inner = _decompress_prefix(head, compression)
        if len(inner) >= 263 and inner[257:262] == b"ustar":
            return BinaryInfo("tar", f"{compression}-compressed")
        return BinaryInfo(compression, "compressed data")
    if head.startswith(b"PK\x03\x04"):
        return BinaryInfo("zip", "archive")
    if head.startswith(_PARAMS_MAGIC):
        return BinaryInfo("tvm-params", "params blob")
    if _looks_like_text(head):
        return BinaryInfo("text")
    return BinaryInfo("unknown")


def identify(path: str | Path) -> BinaryInfo:
    """Identify the file at ``path`` from its header (nothing is loaded or executed)."""
    with open(path, "rb") as f:
        return identify_bytes(f.read(_HEAD_SIZE))


def _compression(head: bytes) -> str:
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith(b"BZh"):
        return "bzip2"
    if head.startswith(b"\xfd7zXZ\x00"):
        return "xz"
    return ""


def _decompress_prefix(head: bytes, compression: str) -> bytes:
    """The first 512 decompressed bytes (bounded: a hostile stream cannot inflate further)."""
    try:
        if compression == "gzip":
            return zlib.decompressobj(wbits=31).decompress(head, 512)
        if compression == "bzip2":
            return bz2.BZ2Decompressor().decompress(head, 512)
        return lzma.LZMADecompressor().decompress(head, 512)
    except (zlib.error, OSError, EOFError, lzma.LZMAError, ValueError):
        return b""


def _looks_like_text(head: bytes) -> bool:
    if b"\x00" in head:
        return False
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:  # a multi-byte character cut at the end is fine
        if exc.start < len(head) - 4:
            return False
        text = head[: exc.start].decode("utf-8")
    printable = sum(ch.isprintable() or ch in "\t\r\n\f" for ch in text)
    return printable >= 0.95 * max(len(text), 1)


def _identify_elf(head: bytes) -> BinaryInfo:
    if len(head) < 20:
        return BinaryInfo("elf", "truncated file")
    bits = {1: 32, 2: 64}.get(head[4], 0)
    endian = {1: "little", 2: "big"}.get(head[5], "")
    osabi = _ELF_OSABI.get(head[7], f"OS/ABI {head[7]}")
    order = "<" if endian == "little" else ">"
    e_type, e_machine = struct.unpack_from(order + "HH", head, 16)
    machine = _ELF_MACHINES.get(e_machine, (f"machine {e_machine}", ""))[0]
    kind = _ELF_TYPES.get(e_type, f"type {e_type}")
    return BinaryInfo("elf", kind, machine, bits, endian, osabi)


def _identify_pe(head: bytes) -> BinaryInfo:
    if len(head) < 0x40:
        return BinaryInfo("unknown")
    offset = struct.unpack_from("<I", head, 0x3C)[0]
    if offset + 24 > len(head) or head[offset : offset + 4] != b"PE\x00\x00":
        return BinaryInfo("pe", "executable (DOS)", os_abi="Windows")
    machine_code, _, _, _, _, _, characteristics = struct.unpack_from("<HHIIIHH", head, offset + 4)
    machine = _PE_MACHINES.get(machine_code, f"machine {machine_code:#x}")
    kind = "DLL" if characteristics & 0x2000 else "executable"
    bits = 64 if machine in ("x86-64", "aarch64") else 32
    return BinaryInfo("pe", kind, machine, bits, "little", "Windows")


def _identify_macho(head: bytes) -> BinaryInfo:
    order = ">" if head[0] == 0xFE else "<"
    bits = 64 if head[:4] in (b"\xfe\xed\xfa\xcf", b"\xcf\xfa\xed\xfe") else 32
    if len(head) < 16:
        return BinaryInfo("macho", "truncated file", bits=bits, os_abi="macOS")
    cpu, _, filetype = struct.unpack_from(order + "iiI", head, 4)
    machine = _MACHO_CPUS.get(cpu, f"cpu {cpu:#x}")
    kind = _MACHO_TYPES.get(filetype, f"file type {filetype}")
    endian = "big" if order == ">" else "little"
    return BinaryInfo("macho", kind, machine, bits, endian, "macOS")


def _identify_fat(head: bytes, count: int) -> BinaryInfo:
    machines = []
    for i in range(count):
        if 8 + 20 * (i + 1) > len(head):
            break
        cpu = struct.unpack_from(">i", head, 8 + 20 * i)[0]
        machines.append(_MACHO_CPUS.get(cpu, f"cpu {cpu:#x}"))
    return BinaryInfo("macho-fat", "universal binary", "+".join(machines), 0, "", "macOS")


def check_host_compatible(info: BinaryInfo, path: str, expected_kind: str) -> None:
    """Raise :class:`ModuleLoadError` unless ``info`` is an ELF ``expected_kind`` for this machine.

    Parameters
    ----------
    info
        What :func:`identify` found.
    path
        The file, for the message.
    expected_kind
        ``"shared library"`` or ``"object file"``.
    """
    where = f"cannot load {path!r}"
    system = host_os()
    here = _machine_text(host_machine())
    if info.format == "pe":
        raise ModuleLoadError(
            f"{where}: it is a Windows {info.kind} ({_machine_text(info.machine)}), "
            f"this machine runs {_os_name(system)}; export the model for {_os_name(system)}"
        )
    if info.format in ("macho", "macho-fat") and system != "macos":
        raise ModuleLoadError(
            f"{where}: it is a macOS Mach-O library ({info.machine}), "
            f"this machine runs {_os_name(system)}; export the model for {_os_name(system)}"
        )
    if info.format != "elf":
        if info.format in ("macho", "macho-fat"):
            return  # native on macOS: checked by the system loader
        raise ModuleLoadError(
            f"{where}: not a {expected_kind} (it is {with_article(info.describe())})"
        )
    if info.kind == "truncated file" or not info.bits or not info.endian:
        raise ModuleLoadError(f"{where}: the ELF file is truncated or corrupt (bad ELF header)")
    if system == "macos":
        raise ModuleLoadError(f"{where}: it is an ELF (Linux) {info.kind}, this machine runs macOS")
    foreign = (
        info.machine != host_machine() or info.bits != _HOST_BITS or info.endian != sys.byteorder
    )
    if foreign:
        built = _machine_text(info.machine)
        if info.machine == host_machine() and info.bits != _HOST_BITS:
            built = f"{built}, {info.bits}-bit"
        if info.endian and info.endian != sys.byteorder:
            built = f"{built}, {info.endian}-endian"
        raise ModuleLoadError(f"{where}: built for {built}, this machine is {here}")
    if info.os_abi not in ("", "Linux") and system == "linux":
        raise ModuleLoadError(f"{where}: built for {info.os_abi}, this machine runs Linux")
    if info.kind != expected_kind:
        raise ModuleLoadError(
            f"{where}: it is an ELF {info.kind}, expected {with_article(expected_kind)}"
        )


def with_article(phrase: str) -> str:
    """``phrase`` with its indefinite article (``"an empty file"``)."""
    return f"{'an' if phrase[:1].lower() in 'aeiou' else 'a'} {phrase}"


def _os_name(system: str) -> str:
    return {"linux": "Linux", "macos": "macOS", "windows": "Windows"}.get(system, system)


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
        self.info = identify_bytes(data[:_HEAD_SIZE])
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
        return cls(Path(path).read_bytes(), str(path))

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
        for name_off, sh_type, _, addr, offset, size, link, _, _, entsize in raw:
            name = table.name(name_off) if table is not None else ""
            if sh_type != _SHT_NOBITS and offset + size > len(self.data):
                raise self._corrupt(f"section {name!r} at byte offset {offset} runs past the end")
            sections.append(_Section(name, sh_type, addr, offset, size, link, entsize))
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


# -- what kind of TVM module a library is ------------------------------------------------

LEGACY_SLOTS = (
    "__TVMFuncCall",
    "__TVMAPISetLastError",
    "__TVMBackendGetFuncFromEnv",
    "__TVMBackendAllocWorkspace",
    "__TVMBackendFreeWorkspace",
    "__TVMBackendParallelLaunch",
    "__TVMBackendParallelBarrier",
)
_LEGACY_MARKERS = {"__tvm_main__", "__tvm_module_ctx", "__tvm_dev_mblob", *LEGACY_SLOTS}
_LEGACY_UNDEFINED = {
    "TVMAPISetLastError",
    "TVMBackendAllocWorkspace",
    "TVMBackendFreeWorkspace",
    "TVMBackendGetFuncFromEnv",
    "TVMFuncCall",
    "TVMBackendParallelLaunch",
    "TVMBackendParallelBarrier",
}
_FFI021_MARKERS = {"__tvm_ffi_library_ctx", "__tvm_ffi_library_bin"}
_FFI_MARKERS = {"__tvm_ffi__library_ctx", "__tvm_ffi__library_bin", "__tvm_ffi_main"}
FFI_PREFIX = "__tvm_ffi_"
# TVMFFIErrorSetRaisedFromCStrParts is called directly since TVM 0.24 (prefixed names)
_FFI_DIRECT_IMPORTS = {"TVMFFIErrorSetRaisedFromCStrParts"}
_KERNEL_PREFIXES = ("tvmgen_", "fused_", "fuse_")
_NOT_PACKED = {"_init", "_fini"}


@dataclass(frozen=True)
class TvmSymbols:
    """What a library's dynamic symbols say about it as a TVM module.

    Attributes
    ----------
    abi
        ``"legacy"`` (TVM <= 0.20 packed functions), ``"tvm-ffi-0.21"`` (tvm-ffi calling
        convention, functions under their plain names), ``"tvm-ffi"`` (>= 0.22,
        ``__tvm_ffi_<name>``) or ``"none"`` (not a TVM module).
    functions
        Names of the exported functions that can be packed functions.
    slots
        The context slots the library defines: data symbols named ``__TVM...``
        (``__TVMBackendAllocWorkspace``, ``__TVMFFIErrorSetRaisedFromCStr``, ...).
    undefined
        Names the library imports (functions and data it expects someone to provide).
    has_entry
        Whether ``__tvm_main__`` (legacy) or ``__tvm_ffi_main`` is defined.
    blob_symbol
        ``"__tvm_dev_mblob"`` or the tvm-ffi equivalent if present, else ``""``.
    """

    abi: str
    functions: tuple[str, ...]
    slots: tuple[str, ...]
    undefined: tuple[str, ...]
    has_entry: bool
    blob_symbol: str


def scan_tvm_symbols(symbols: Iterable[ElfSymbol]) -> TvmSymbols:
    """Classify a library by its dynamic symbols (see :class:`TvmSymbols`)."""
    symbols = list(symbols)
    defined = {s.name for s in symbols if s.defined and s.bind != "local"}
    undefined = tuple(sorted({s.name for s in symbols if not s.defined and s.name}))
    functions = tuple(
        sorted(
            s.name
            for s in symbols
            if s.defined
            and s.is_function
            and s.bind != "local"
            and s.name not in _NOT_PACKED
            and (not s.name.startswith("__") or s.name.startswith("__tvm"))
        )
    )
    ffi_functions = any(n.startswith(FFI_PREFIX) for n in functions)
    slots = tuple(
        sorted(
            s.name
            for s in symbols
            if s.defined and s.name.startswith("__TVM") and not s.is_function and s.bind != "local"
        )
    )
    ffi_021 = any(n.startswith("__TVMFFI") for n in slots) or any(
        n.startswith("TVMFFI") for n in undefined
    )
    if defined & _FFI_MARKERS or ffi_functions or _FFI_DIRECT_IMPORTS.intersection(undefined):
        abi = "tvm-ffi"
    elif defined & _FFI021_MARKERS or ffi_021:
        abi = "tvm-ffi-0.21"
    elif (
        defined & _LEGACY_MARKERS
        or _LEGACY_UNDEFINED.intersection(undefined)
        or any(n.startswith(_KERNEL_PREFIXES) for n in functions)
    ):
        abi = "legacy"
    else:
        abi = "none"
    blob = next(
        (
            n
            for n in ("__tvm_dev_mblob", "__tvm_ffi__library_bin", "__tvm_ffi_library_bin")
            if n in defined
        ),
        "",
    )
    return TvmSymbols(
        abi=abi,
        functions=functions,
        slots=slots,
        undefined=undefined,
        has_entry="__tvm_main__" in defined or "__tvm_ffi_main" in defined,
        blob_symbol=blob,
    )
