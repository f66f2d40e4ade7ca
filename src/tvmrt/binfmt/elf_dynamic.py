"""The dynamic section of a library, checked as ``ld.so`` will use it (before ``dlopen``).

Part of :mod:`.elf_load`: the entries up to ``DT_NULL`` inside ``PT_DYNAMIC``; every
address-valued tag inside a ``PT_LOAD``'s file bytes with its size tag keeping the whole
table there; entry sizes; ``DT_PLTREL`` as the machine relocates; a ``DT_PLTGOT`` with
room for the three words the loader writes when there is a PLT; string offsets inside
``DT_STRSZ``; the symbol-version chains (``DT_VERNEED``, ``DT_VERDEF``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from tvmrt.binfmt.elf_load import PF_W, PF_X, PT_DYNAMIC, LoadImage

__all__ = ["Dynamic", "read_dynamic", "check_dynamic", "dt_name", "RELA_MACHINES"]

DT_NEEDED, DT_PLTRELSZ, DT_PLTGOT, DT_HASH, DT_STRTAB, DT_SYMTAB = 1, 2, 3, 4, 5, 6
DT_RELA, DT_RELASZ, DT_RELAENT, DT_STRSZ, DT_SYMENT, DT_INIT, DT_FINI = 7, 8, 9, 10, 11, 12, 13
DT_SONAME, DT_RPATH, DT_REL, DT_RELSZ, DT_RELENT, DT_PLTREL = 14, 15, 17, 18, 19, 20
DT_TEXTREL, DT_JMPREL, DT_INIT_ARRAY, DT_FINI_ARRAY = 22, 23, 25, 26
DT_INIT_ARRAYSZ, DT_FINI_ARRAYSZ, DT_RUNPATH, DT_FLAGS = 27, 28, 29, 30
DT_PREINIT_ARRAY, DT_PREINIT_ARRAYSZ, DT_RELRSZ, DT_RELR, DT_RELRENT = 32, 33, 35, 36, 37
DT_GNU_HASH, DT_VERSYM, DT_RELACOUNT, DT_RELCOUNT = 0x6FFFFEF5, 0x6FFFFFF0, 0x6FFFFFF9, 0x6FFFFFFA
DT_VERDEF, DT_VERDEFNUM, DT_VERNEED, DT_VERNEEDNUM = 0x6FFFFFFC, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
DT_AUXILIARY, DT_FILTER = 0x7FFFFFFD, 0x7FFFFFFF
_NAMES = {v: k for k, v in globals().items() if k.startswith("DT_") and isinstance(v, int)}
_NAMES.update({0: "DT_NULL", 16: "DT_SYMBOLIC", 21: "DT_DEBUG", 24: "DT_BIND_NOW"})
_NAMES.update({0x6FFFFFFB: "DT_FLAGS_1"})
_REPEATABLE = (DT_NEEDED, DT_AUXILIARY, DT_FILTER)
_STRING_TAGS = (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH, DT_AUXILIARY, DT_FILTER)
# (address tag, size tag, what the table is); the loader reads each in memory
_TABLES = (
    (DT_STRTAB, DT_STRSZ, "the dynamic string table"),
    (DT_SYMTAB, None, "the dynamic symbol table"),
    (DT_HASH, None, "the ELF hash table"),
    (DT_GNU_HASH, None, "the GNU hash table"),
    (DT_RELA, DT_RELASZ, "the relocations"),
    (DT_REL, DT_RELSZ, "the relocations"),
    (DT_JMPREL, DT_PLTRELSZ, "the PLT relocations"),
    (DT_RELR, DT_RELRSZ, "the packed relative relocations"),
    (DT_INIT_ARRAY, DT_INIT_ARRAYSZ, "the constructor array"),
    (DT_FINI_ARRAY, DT_FINI_ARRAYSZ, "the destructor array"),
    (DT_PREINIT_ARRAY, DT_PREINIT_ARRAYSZ, "the pre-constructor array"),
    (DT_VERSYM, None, "the symbol versions"),
    (DT_VERNEED, None, "the needed versions"),
    (DT_VERDEF, None, "the defined versions"),
)
# machine -> whether it relocates with addends (DT_RELA) rather than without (DT_REL)
RELA_MACHINES = {"x86-64": True, "aarch64": True, "riscv": True, "x86": False, "arm": False}
_CHAIN_LIMIT = 1 << 16  # version entries followed before a chain is taken for a loop


def dt_name(tag: int) -> str:
    """``DT_STRTAB`` for 5, ``tag 0x...`` for tags without a name."""
    return _NAMES.get(tag, f"dynamic tag {tag:#x}")


@dataclass
class Dynamic:
    """The entries of ``PT_DYNAMIC`` up to ``DT_NULL`` (``values``: the last of each tag)."""

    entries: list[tuple[int, int]]
    values: dict[int, int]
    strtab: bytes = b""
    max_version: int = 1  # the highest version index DT_VERNEED / DT_VERDEF define
    version_indexes: set[int] = field(default_factory=set)

    def get(self, tag: int) -> int | None:
        """The value of ``tag``, or None if the section has no such entry."""
        return self.values.get(tag)

    def string(self, offset: int) -> bytes:
        """The NUL-terminated name at ``offset`` of ``DT_STRTAB`` (checked to be there)."""
        end = self.strtab.find(b"\x00", offset)
        return self.strtab[offset:end]


def read_dynamic(image: LoadImage) -> Dynamic:
    """The dynamic entries up to ``DT_NULL``, which must lie inside ``PT_DYNAMIC``."""
    seg = next(s for s in image.segments if s.type == PT_DYNAMIC)
    fmt = struct.Struct(image.order + ("qQ" if image.is64 else "iI"))
    blob = image.data[seg.offset : seg.offset + seg.filesz]
    entries: list[tuple[int, int]] = []
    values: dict[int, int] = {}
    for tag, value in fmt.iter_unpack(blob[: len(blob) - len(blob) % fmt.size]):
        if tag == 0:
            return Dynamic(entries, values)
        if tag in values and tag not in _REPEATABLE:
            raise image.bad(dt_name(tag), "present twice", "one entry (linkers write one)")
        entries.append((tag, value))
        values[tag] = value
    raise image.bad(
        "PT_DYNAMIC.p_filesz",
        hex(seg.filesz),
        f"room for the dynamic entries up to DT_NULL ({len(entries)} entries found, none DT_NULL)",
    )


def check_dynamic(image: LoadImage, dyn: Dynamic) -> None:
    """Check the tags the loader dereferences, each naming the tag when refused."""
    for tag, what in ((DT_STRTAB, "a string table"), (DT_SYMTAB, "a symbol table")):
        if dyn.get(tag) is None:
            raise image.bad(dt_name(tag), "missing", f"the address of {what}")
    if dyn.get(DT_STRSZ) is None:
        raise image.bad("DT_STRSZ", "missing", "the size of the dynamic string table")
    if dyn.get(DT_HASH) is None and dyn.get(DT_GNU_HASH) is None:
        raise image.bad("DT_GNU_HASH", "missing", "a DT_HASH or DT_GNU_HASH symbol hash table")
    for addr_tag, size_tag, what in _TABLES:
        _check_table(image, dyn, addr_tag, size_tag, what)
    dyn.strtab = image.read(dyn.values[DT_STRTAB], dyn.values[DT_STRSZ], "DT_STRTAB", "strings")
    _check_entry_sizes(image, dyn)
    _check_code_and_got(image, dyn)
    for tag, value in dyn.entries:
        if tag in _STRING_TAGS and (value >= len(dyn.strtab) or b"\x00" not in dyn.strtab[value:]):
            raise image.bad(
                dt_name(tag), value, f"an offset of a string inside DT_STRSZ ({len(dyn.strtab)})"
            )
    _check_verneed(image, dyn)
    _check_verdef(image, dyn)


def _check_table(
    image: LoadImage, dyn: Dynamic, addr_tag: int, size_tag: int | None, what: str
) -> None:
    addr = dyn.get(addr_tag)
    if addr is None:
        return
    size = 1
    if size_tag is not None:
        got = dyn.get(size_tag)
        if got is None:
            raise image.bad(dt_name(size_tag), "missing", f"the size of {what}")
        size = got
    if image.file_offset(addr, 1) is None:
        raise image.bad(
            dt_name(addr_tag), hex(addr), f"the address of {what} in a PT_LOAD's file bytes"
        )
    if image.file_offset(addr, size) is None:
        assert size_tag is not None
        raise image.bad(
            dt_name(size_tag),
            hex(size),
            f"a size keeping {what} (at {addr:#x}) inside a PT_LOAD's file bytes",
        )


def _check_entry_sizes(image: LoadImage, dyn: Dynamic) -> None:
    rela, rel, sym = (24, 16, 24) if image.is64 else (12, 8, 16)
    wants_rela = RELA_MACHINES.get(image.machine)
    for table, ent_tag, count_tag, size_tag, want in (
        (DT_RELA, DT_RELAENT, DT_RELACOUNT, DT_RELASZ, rela),
        (DT_REL, DT_RELENT, DT_RELCOUNT, DT_RELSZ, rel),
    ):
        if dyn.get(table) is None:
            continue
        if wants_rela is not None and wants_rela != (table == DT_RELA):
            raise image.bad(
                dt_name(table),
                "present",
                f"no such table ({image.machine} relocates with "
                f"{'DT_RELA' if wants_rela else 'DT_REL'} only)",
            )
        if dyn.get(ent_tag) != want:
            raise image.bad(dt_name(ent_tag), dyn.get(ent_tag), f"{want}")
        if dyn.values[size_tag] % want:
            raise image.bad(dt_name(size_tag), dyn.values[size_tag], f"a multiple of {want}")
        count = dyn.get(count_tag)
        if count is not None and count > dyn.values[size_tag] // want:
            raise image.bad(
                dt_name(count_tag), count, f"at most the {dyn.values[size_tag] // want} relocations"
            )
    if dyn.get(DT_SYMENT) not in (None, sym):
        raise image.bad("DT_SYMENT", dyn.get(DT_SYMENT), f"{sym}")
    if dyn.get(DT_RELR) is not None and dyn.get(DT_RELRENT) != image.word:
        raise image.bad("DT_RELRENT", dyn.get(DT_RELRENT), f"{image.word}")
    if dyn.get(DT_JMPREL) is not None:
        kind = dyn.get(DT_PLTREL)
        if wants_rela is None:
            allowed = {DT_RELA: rela, DT_REL: rel}
        else:
            allowed = {DT_RELA: rela} if wants_rela else {DT_REL: rel}
        if kind not in allowed:
            names = " or ".join(f"{dt_name(k)} ({k})" for k in allowed)
            raise image.bad("DT_PLTREL", "missing" if kind is None else kind, names)
        if dyn.values[DT_PLTRELSZ] % allowed[kind]:
            raise image.bad(
                "DT_PLTRELSZ", dyn.values[DT_PLTRELSZ], f"a multiple of {allowed[kind]}"
            )
    for array, size_tag in (
        (DT_INIT_ARRAY, DT_INIT_ARRAYSZ),
        (DT_FINI_ARRAY, DT_FINI_ARRAYSZ),
        (DT_PREINIT_ARRAY, DT_PREINIT_ARRAYSZ),
    ):
        if dyn.get(array) is not None and dyn.values[size_tag] % image.word:
            raise image.bad(dt_name(size_tag), dyn.values[size_tag], f"a multiple of {image.word}")


def _check_code_and_got(image: LoadImage, dyn: Dynamic) -> None:
    for tag in (DT_INIT, DT_FINI):
        addr = dyn.get(tag)
        if addr is None:
            continue
        load = image.load_at(addr, 1)
        if load is None or not load.flags & PF_X or not load.holds_file(addr, 1):
            raise image.bad(dt_name(tag), hex(addr), "the address of code in an executable PT_LOAD")
    got = dyn.get(DT_PLTGOT)
    if got is None and dyn.get(DT_JMPREL) is not None:
        raise image.bad("DT_PLTGOT", "missing", "the PLT's GOT (the library has PLT relocations)")
    if got is not None:
        load = image.load_at(got, 3 * image.word)
        if load is None or not load.flags & PF_W or got % image.word:
            raise image.bad(
                "DT_PLTGOT",
                hex(got),
                f"the address of the PLT's GOT: {3 * image.word} aligned bytes the loader "
                "writes, inside a writable PT_LOAD",
            )


def _name_at(image: LoadImage, dyn: Dynamic, offset: int, field: str) -> None:
    if offset >= len(dyn.strtab) or b"\x00" not in dyn.strtab[offset:]:
        raise image.bad(field, offset, f"an offset of a string inside DT_STRSZ ({len(dyn.strtab)})")


def _walk_chain(
    image: LoadImage,
    dyn: Dynamic,
    tags: tuple[int, int, str],
    visit: Callable[[int, str], int],
) -> None:
    """Walk a chained version table (``tags``: address tag, count tag, its name).

    ``visit(address, field)`` checks one entry and returns its offset to the next (0 ends
    the chain); the chain's length must equal the count tag, as ``ld.so`` assumes.
    """
    addr_tag, count_tag, name = tags
    addr = dyn.get(addr_tag)
    if addr is None:
        return
    want = dyn.get(count_tag)
    count = 0
    while True:
        nxt = visit(addr, f"{name} entry {count}")
        count += 1
        if nxt == 0 or count > _CHAIN_LIMIT:
            break
        addr += nxt
    if want != count:
        raise image.bad(f"{name}NUM", want, f"{count}, the entries chained from {name}")


def _check_verneed(image: LoadImage, dyn: Dynamic) -> None:
    def visit(addr: int, field: str) -> int:
        version, cnt, file_off, aux, nxt = struct.unpack(
            image.order + "HHIII", image.read(addr, 16, field, "a needed-version entry")
        )
        if version != 1:
            raise image.bad(f"{field}.vn_version", version, "1")
        _name_at(image, dyn, file_off, f"{field}.vn_file")
        at = addr + aux
        for j in range(cnt):
            sub = f"{field} aux {j}"
            _, _, other, name, aux_next = struct.unpack(
                image.order + "IHHII", image.read(at, 16, sub, "a needed-version entry")
            )
            _name_at(image, dyn, name, f"{sub}.vna_name")
            dyn.version_indexes.add(other & 0x7FFF)
            dyn.max_version = max(dyn.max_version, other & 0x7FFF)
            if aux_next == 0 and j != cnt - 1:
                raise image.bad(f"{field}.vn_cnt", cnt, f"{j + 1}, the entries chained")
            at += aux_next
        return int(nxt)

    _walk_chain(image, dyn, (DT_VERNEED, DT_VERNEEDNUM, "DT_VERNEED"), visit)


def _check_verdef(image: LoadImage, dyn: Dynamic) -> None:
    def visit(addr: int, field: str) -> int:
        version, _, ndx, cnt, _, aux, nxt = struct.unpack(
            image.order + "HHHHIII", image.read(addr, 20, field, "a version definition")
        )
        if version != 1:
            raise image.bad(f"{field}.vd_version", version, "1")
        if cnt:
            name = struct.unpack(image.order + "I", image.read(addr + aux, 8, field, "a name")[:4])
            _name_at(image, dyn, name[0], f"{field}.vda_name")
        dyn.version_indexes.add(ndx & 0x7FFF)
        dyn.max_version = max(dyn.max_version, ndx & 0x7FFF)
        return int(nxt)

    _walk_chain(image, dyn, (DT_VERDEF, DT_VERDEFNUM, "DT_VERDEF"), visit)
