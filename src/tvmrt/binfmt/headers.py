"""Identify a file from its header: ELF, PE, Mach-O, archives, params, text (nothing is run).

:func:`identify` and :func:`check_host_compatible` decide, before anything is loaded,
whether a file is a library or object for this machine and OS, and say what it is when it
is not. :mod:`.binary` re-exports these and reads ELF tables; what the symbols mean for
TVM (which ABI, which slots, which blob) is :mod:`tvmrt.binfmt.abi`.
"""

from __future__ import annotations

import bz2
import lzma
import platform
import struct
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path

from tvmrt.binfmt.files import PARAMS_MAGIC
from tvmrt.error import ModuleLoadError

__all__ = [
    "BinaryInfo",
    "host_machine",
    "host_os",
    "identify",
    "identify_bytes",
    "check_host_compatible",
    "with_article",
    "HEAD_SIZE",
    "ANDROID",
]

_ELF_MAGIC = b"\x7fELF"
HEAD_SIZE = 4096  # enough for every header identify() reads

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
    if head.startswith(PARAMS_MAGIC.data):  # TVM's save_param_dict
        return BinaryInfo("tvm-params", "params blob")
    if _looks_like_text(head):
        return BinaryInfo("text")
    return BinaryInfo("unknown")


def identify(path: str | Path) -> BinaryInfo:
    """Identify the file at ``path`` from its header (nothing is loaded or executed)."""
    with open(path, "rb") as f:
        return identify_bytes(f.read(HEAD_SIZE))


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
    if not osabi and _is_android(head, order):
        osabi = ANDROID
    return BinaryInfo("elf", kind, machine, bits, endian, osabi)


ANDROID = "Android (bionic libc)"


def _is_android(head: bytes, order: str) -> bool:
    """An NDK build: the ``.note.android.ident`` note (name ``Android``, type 1) or
    bionic's dynamic linker as interpreter, both in the first page of a file the NDK
    links (the note is what Android's own tools read)."""
    if b"/system/bin/linker" in head:
        return True
    start = head.find(b"Android\x00")
    while start >= 12:
        namesz, _, kind = struct.unpack_from(order + "III", head, start - 12)
        if namesz == 8 and kind == 1:
            return True
        start = head.find(b"Android\x00", start + 1)
    return False


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
        if info.os_abi == ANDROID:
            built = f"{built}, {ANDROID}: an Android app's library, not a Linux one"
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
