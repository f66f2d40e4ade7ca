"""Small hostile files for the resource bounds of issue 11 (shared by tests and fuzz/run.py).

Each builder returns the bytes of one file that, before the bounds, made tvmrt allocate
gigabytes, hang or recurse without limit. None needs more than a few MB to build.
"""

from __future__ import annotations

import bz2
import gzip
import io
import struct
import tarfile
import zlib

__all__ = [
    "elf_with_names",
    "elf_long_name",
    "elf_overlapping_names",
    "tar_gnu_long_name",
    "tar_pax_header",
    "tar_sparse",
    "tar_pax_sparse",
    "gzip_bomb",
    "module_blob",
    "repeated_edges",
    "chain",
    "HOSTILE",
    "TARGET_OF",
]


def elf_with_names(strtab: bytes, offsets: list[int]) -> bytes:
    """A 64-bit little-endian x86-64 relocatable ELF whose ``.symtab`` names ``offsets``.

    Sections: null, ``.symtab`` (one null symbol, then one global function symbol per
    offset), ``.strtab`` (``strtab``), ``.shstrtab``.
    """
    shstrtab = b"\x00.symtab\x00.strtab\x00.shstrtab\x00"
    symtab = bytes(24) + b"".join(
        struct.pack("<IBBHQQ", off, 0x12, 0, 1, 0, 0) for off in offsets
    )  # STB_GLOBAL | STT_FUNC, section 1
    body = 64
    layout = []
    for data in (symtab, strtab, shstrtab):
        layout.append((body, len(data)))
        body += len(data)
    shoff = (body + 7) & ~7
    header = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    header += struct.pack("<HHIQQQIHHHHHH", 1, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, 4, 3)
    sections = [bytes(64)]
    names = (1, 9, 17)  # offsets of the names in shstrtab
    types = (2, 3, 3)
    for i, ((offset, size), name, kind) in enumerate(zip(layout, names, types, strict=True)):
        link, entsize = (2, 24) if i == 0 else (0, 0)
        sections.append(
            struct.pack("<IIQQQQIIQQ", name, kind, 0, 0, offset, size, link, 1, 1, entsize)
        )
    out = header + symtab + strtab + shstrtab
    return out + bytes(shoff - len(out)) + b"".join(sections)


def elf_long_name(total: int = 1 << 20) -> bytes:
    """``total`` bytes: half one long name, half symbols that all point at it."""
    strtab = b"\x00" + b"A" * (total // 2) + b"\x00"
    count = (total - len(strtab)) // 24
    return elf_with_names(strtab, [1] * count)


def elf_overlapping_names(total: int = 1 << 20, name: int = 60_000) -> bytes:
    """Symbols at every offset of one ``name``-byte string: each a different long name."""
    strtab = b"\x00" + b"A" * name + b"\x00"
    count = min((total - len(strtab)) // 24, name)
    return elf_with_names(strtab, list(range(1, count + 1)))


def _header(info: tarfile.TarInfo) -> bytes:
    return info.tobuf(format=tarfile.GNU_FORMAT)


def tar_gnu_long_name(claimed: int = 4 << 30, compress: str = "bz2") -> bytes:
    """A GNU long-name header claiming ``claimed`` bytes of name (the data is not there)."""
    info = tarfile.TarInfo("././@LongLink")
    info.type = tarfile.GNUTYPE_LONGNAME
    info.size = claimed
    raw = _header(info) + bytes(4096)
    return bz2.compress(raw) if compress == "bz2" else raw


def tar_pax_header(claimed: int = 4 << 30) -> bytes:
    """A pax extended header claiming ``claimed`` bytes, gzip-compressed."""
    info = tarfile.TarInfo("././@PaxHeader")
    info.type = tarfile.XHDTYPE
    info.size = claimed
    return gzip.compress(_header(info) + bytes(4096))


def tar_sparse() -> bytes:
    """An old-GNU sparse member whose real size is 1 GiB, in a few KB."""
    info = tarfile.TarInfo("lib0.o")
    info.type = tarfile.GNUTYPE_SPARSE
    info.size = 0
    buf = bytearray(_header(info))
    # realsize field (offset 483, 12 octal digits) and one sparse struct at 386
    buf[483:495] = b"%011o\x00" % (1 << 30)
    buf[386:410] = b"%011o\x00%011o\x00" % ((1 << 30) - 1, 1)
    buf[148:156] = b"        "
    buf[148:156] = b"%06o\x00 " % sum(buf)
    return bytes(buf) + bytes(1024)


def tar_pax_sparse() -> bytes:
    """A pax (GNU sparse 1.0) member whose map claims 10**15 entries."""
    info = tarfile.TarInfo("lib0.o")
    info.size = 512
    info.pax_headers = {
        "GNU.sparse.major": "1",
        "GNU.sparse.minor": "0",
        "GNU.sparse.name": "lib0.o",
        "GNU.sparse.realsize": str(1 << 30),
    }
    raw = info.tobuf(format=tarfile.PAX_FORMAT) + b"1000000000000000\n".ljust(512, b"\x00")
    return raw + bytes(1024)


def gzip_bomb(member: int = 128 << 20) -> bytes:
    """A gzip'd tar holding one ``member``-byte file of zeros (about member/1000 bytes)."""
    info = tarfile.TarInfo("lib0.o")
    info.size = member
    out = io.BytesIO()
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip container
    out.write(comp.compress(_header(info)))
    chunk = bytes(1 << 20)
    for _ in range(member // len(chunk)):
        out.write(comp.compress(chunk))
    out.write(comp.compress(bytes(member % len(chunk) + 1024)))
    out.write(comp.flush())
    return out.getvalue()


def _str(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def module_blob(indptr: list[int], children: list[int], kind: str) -> bytes:
    """A ``__tvm_dev_mblob``: an import tree over ``_lib`` and ``len(indptr) - 2`` modules
    of ``kind``, each with an empty payload (the caller registers a loader for ``kind``)."""
    body = struct.pack("<Q", len(indptr))  # _import_tree + one entry per module
    body += _str("_import_tree")
    body += struct.pack("<Q", len(indptr)) + b"".join(struct.pack("<Q", v) for v in indptr)
    body += struct.pack("<Q", len(children)) + b"".join(struct.pack("<Q", v) for v in children)
    body += _str(kind) + _str("_lib") + b"".join(_str(kind) for _ in range(len(indptr) - 3))
    return struct.pack("<Q", len(body)) + body


def repeated_edges(levels: int = 40) -> tuple[list[int], list[int]]:
    """A chain of ``levels`` modules where each imports the next twice: 2**levels paths."""
    indptr = [2 * min(i, levels - 1) for i in range(levels + 1)]
    children = [c for i in range(levels - 1) for c in (i + 1, i + 1)]
    return indptr, children


def chain(levels: int) -> tuple[list[int], list[int]]:
    """A chain of ``levels`` modules, each importing the next."""
    return [min(i, levels - 1) for i in range(levels + 1)], list(range(1, levels))


HOSTILE = {
    "elf_long_name": elf_long_name,
    "elf_overlapping_names": elf_overlapping_names,
    "tar_gnu_long_name": tar_gnu_long_name,
    "tar_pax_header": tar_pax_header,
    "tar_sparse": tar_sparse,
    "tar_pax_sparse": tar_pax_sparse,
    "tar_gzip_bomb": gzip_bomb,
}
# the fuzz target (fuzz_targets.py) each file is meant for, besides inspect and load_module
TARGET_OF = {name: "elf" if name.startswith("elf") else "archive" for name in HOSTILE}
