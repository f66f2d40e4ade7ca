"""Symbol, hash and relocation tables as ``ld.so`` reads them, checked before ``dlopen``.

Part of :mod:`.elf_load`. Two kinds of check:

- bounds: every relocation patches a word of a writable ``PT_LOAD`` (or of ``PT_GNU_RELRO``)
  with a type the machine's loader knows and a symbol that exists; every dynamic symbol's
  name is in the string table and a defined one's address in mapped memory; the hash
  tables lie in mapped memory, agree with the symbol count and find every symbol;
- agreement: tvmrt reads symbols and the module blob through the section headers
  (:mod:`.binary`), the loader through the program headers and ``PT_DYNAMIC``. Where the
  file has section headers, each allocated section must be mapped from its own file bytes
  with the permissions it needs, and each dynamic tag must name its section (``DT_RELA``
  is ``.rela.dyn``...). A field damaged on one side only is then refused, instead of
  loading other bytes than the ones checked (issue 23: ``PT_LOAD[2].p_filesz = 0`` loaded
  zeros for the weights).
"""

from __future__ import annotations

from tvmrt.binfmt import elf_dynamic as dt
from tvmrt.binfmt import elf_symbols
from tvmrt.binfmt.binary import _Section
from tvmrt.binfmt.elf_load import PF_R, PF_W, PF_X, PT_GNU_RELRO, LoadImage
from tvmrt.binfmt.elf_symbols import function_starts, gnu_hash_count

__all__ = ["check_sections_mapped", "check_tables"]

_SHF_WRITE, _SHF_ALLOC, _SHF_EXECINSTR, _SHF_TLS = 0x1, 0x2, 0x4, 0x400
_SHT_NULL, _SHT_DYNAMIC, _SHT_NOBITS = 0, 6, 8
_SHN_UNDEF = 0
_STT_FUNC, _STT_GNU_IFUNC = 2, 10
# machine -> (known relocation types, GLOB_DAT, JUMP_SLOT, RELATIVE, IRELATIVE, TLSDESC)
_RELOCS: dict[str, tuple[frozenset[int], int, int, int, int, int]] = {
    "x86-64": (
        frozenset({0, 1, 2, 5, 6, 7, 8, 10, 16, 17, 18, 32, 33, 36, 37, 38}),
        6,
        7,
        8,
        37,
        36,
    ),
    "aarch64": (frozenset({0, 257, *range(1024, 1033)}), 1025, 1026, 1027, 1032, 1031),
    "arm": (frozenset({0, 2, 13, 17, 18, 19, 20, 21, 22, 23, 160}), 21, 22, 23, 160, 13),
    "x86": (frozenset({0, 1, 2, 5, 6, 7, 8, 14, 35, 36, 37, 41, 42}), 6, 7, 8, 42, 41),
}
# section name -> (address tag, size tag): the table each dynamic tag points to
_TAG_SECTIONS = {
    ".dynstr": (dt.DT_STRTAB, dt.DT_STRSZ),
    ".dynsym": (dt.DT_SYMTAB, None),
    ".hash": (dt.DT_HASH, None),
    ".gnu.hash": (dt.DT_GNU_HASH, None),
    ".rela.dyn": (dt.DT_RELA, dt.DT_RELASZ),
    ".rel.dyn": (dt.DT_REL, dt.DT_RELSZ),
    ".rela.plt": (dt.DT_JMPREL, dt.DT_PLTRELSZ),
    ".rel.plt": (dt.DT_JMPREL, dt.DT_PLTRELSZ),
    ".init_array": (dt.DT_INIT_ARRAY, dt.DT_INIT_ARRAYSZ),
    ".fini_array": (dt.DT_FINI_ARRAY, dt.DT_FINI_ARRAYSZ),
    ".gnu.version": (dt.DT_VERSYM, None),
    ".gnu.version_r": (dt.DT_VERNEED, None),
    ".gnu.version_d": (dt.DT_VERDEF, None),
    ".got.plt": (dt.DT_PLTGOT, None),
    ".relr.dyn": (dt.DT_RELR, dt.DT_RELRSZ),
}


def check_sections_mapped(image: LoadImage) -> None:
    """Each allocated section lies in one ``PT_LOAD``, mapped from its own file bytes."""
    for sec in image.elf.sections:
        if not sec.flags & _SHF_ALLOC or sec.size == 0 or sec.type == _SHT_NULL:
            continue
        nobits = sec.type == _SHT_NOBITS
        if nobits and sec.flags & _SHF_TLS:
            continue  # .tbss takes no address space of its own
        what = f"section {sec.name!r} ({sec.addr:#x}, {sec.size:#x} bytes)"
        load = image.load_at(sec.addr, sec.size)
        if load is None:
            for other in image.loads:  # which PT_LOAD holds its file bytes, at what address?
                if not nobits and other.offset <= sec.offset < other.offset + other.filesz:
                    at = other.vaddr + (sec.offset - other.offset)
                    field = "p_vaddr" if at != sec.addr else "p_memsz"
                    raise image.bad(
                        f"{other.name}.{field}",
                        hex(getattr(other, field[2:])),
                        f"a segment mapping {what} at its address",
                    )
            near = image.load_at(sec.addr)
            if near is not None:
                raise image.bad(f"{near.name}.p_memsz", hex(near.memsz), f"room for {what}")
            raise image.bad(f"{what}'s address", hex(sec.addr), "an address inside a PT_LOAD")
        if not nobits:
            at = load.offset + (sec.addr - load.vaddr)
            if at != sec.offset:
                raise image.bad(
                    f"{load.name}.p_offset",
                    hex(load.offset),
                    f"{sec.offset - (sec.addr - load.vaddr):#x}, so that {what} is mapped from "
                    f"its file bytes at {sec.offset:#x}",
                )
            if not load.holds_file(sec.addr, sec.size):
                raise image.bad(
                    f"{load.name}.p_filesz",
                    hex(load.filesz),
                    f"at least {sec.addr + sec.size - load.vaddr:#x} to map {what} from the file",
                )
        need = (PF_X if sec.flags & _SHF_EXECINSTR else PF_R) | (
            PF_W if sec.flags & _SHF_WRITE else 0
        )
        if load.flags & need != need:
            raise image.bad(
                f"{load.name}.p_flags", hex(load.flags), f"the permissions {what} needs"
            )


def check_tables(image: LoadImage, dyn: dt.Dynamic) -> None:
    """Symbols, hash tables, symbol versions, relocations and constructor arrays."""
    _check_tags_name_sections(image, dyn)
    nsyms = _count_symbols(image, dyn)
    symbols = _read_symbols(image, dyn, nsyms)
    elf_symbols.check_symbols(image, dyn, symbols)
    elf_symbols.check_hashes(image, dyn, symbols)
    versym = dyn.get(dt.DT_VERSYM)
    if versym is not None:
        raw = image.read(versym, 2 * nsyms, "DT_VERSYM", f"{nsyms} symbol versions")
        for i, (index,) in enumerate(image.words("H", raw)):
            if (index & 0x7FFF) > 1 and (index & 0x7FFF) not in dyn.version_indexes:
                raise image.bad(
                    f"symbol version {i}",
                    index & 0x7FFF,
                    "0, 1 or an index DT_VERNEED/DT_VERDEF define",
                )
    patched = _check_relocations(image, dyn, symbols)
    _check_constructors(image, dyn, patched, symbols)


def _check_tags_name_sections(image: LoadImage, dyn: dt.Dynamic) -> None:
    for sec in image.elf.sections:
        tags = _TAG_SECTIONS.get(sec.name)
        if tags is None or sec.size == 0 or not sec.flags & _SHF_ALLOC:
            continue
        addr_tag, size_tag = tags
        addr = dyn.get(addr_tag)
        if addr != sec.addr:
            shown = "missing" if addr is None else hex(addr)
            raise image.bad(
                dt.dt_name(addr_tag), shown, f"{sec.addr:#x}, the address of {sec.name}"
            )
        size = dyn.get(size_tag) if size_tag is not None else None
        sizes = {sec.size}
        if addr_tag == dt.DT_RELA or addr_tag == dt.DT_REL:  # some linkers count the PLT's too
            sizes.add(sec.size + (dyn.get(dt.DT_PLTRELSZ) or 0))
        if size_tag is not None and size not in sizes:
            raise image.bad(dt.dt_name(size_tag), size, f"{sec.size:#x}, the size of {sec.name}")
    for sec in image.elf.sections:
        if sec.name == ".dynamic" and sec.flags & _SHF_ALLOC:
            seg = next(s for s in image.segments if s.name == "PT_DYNAMIC")
            if seg.vaddr != sec.addr:
                raise image.bad("PT_DYNAMIC.p_vaddr", hex(seg.vaddr), f"{sec.addr:#x} (.dynamic)")


def _count_symbols(image: LoadImage, dyn: dt.Dynamic) -> int:
    """The number of dynamic symbols, as the hash tables say (the loader has no other count)."""
    counts: list[tuple[str, int]] = []
    at_least: tuple[str, int] | None = None  # a GNU hash table that hashes nothing
    if dyn.get(dt.DT_HASH) is not None:
        _, nchain = image.words(
            "II", image.read(dyn.values[dt.DT_HASH], 8, "DT_HASH", "a hash table")
        )[0]
        counts.append(("DT_HASH nchain", nchain))
    if dyn.get(dt.DT_GNU_HASH) is not None:
        implied, exact = gnu_hash_count(image, dyn.values[dt.DT_GNU_HASH])
        if exact:
            counts.append(("DT_GNU_HASH chains", implied))
        else:
            at_least = ("DT_GNU_HASH symoffset", implied)
    for sec in image.elf.sections:
        if sec.name == ".dynsym" and sec.flags & _SHF_ALLOC:
            counts.append((".dynsym", sec.size // (24 if image.is64 else 16)))
    if not counts:  # nothing says more than the empty GNU hash table: the symbols before it
        assert at_least is not None
        return at_least[1]
    name, count = counts[0]
    for other, n in counts[1:]:
        if n != count:
            raise image.bad(f"the symbol count of {name}", count, f"{n}, as {other} says")
    if at_least is not None and count < at_least[1]:
        raise image.bad(at_least[0], at_least[1], f"at most {count}, as {name} says")
    return count


def _read_symbols(image: LoadImage, dyn: dt.Dynamic, nsyms: int) -> list[tuple[int, ...]]:
    """(st_name, st_info, st_other, st_shndx, st_value, st_size) of each dynamic symbol."""
    size = 24 if image.is64 else 16
    blob = image.read(dyn.values[dt.DT_SYMTAB], nsyms * size, "DT_SYMTAB", f"{nsyms} symbols")
    if image.is64:
        return image.words("IBBHQQ", blob)
    return [(n, i, o, s, v, z) for n, v, z, i, o, s in image.words("IIIBBH", blob)]


def _tables(image: LoadImage, dyn: dt.Dynamic) -> list[tuple[str, int, int, bool]]:
    out = []
    for addr_tag, size_tag, rela in (
        (dt.DT_RELA, dt.DT_RELASZ, True),
        (dt.DT_REL, dt.DT_RELSZ, False),
    ):
        if dyn.get(addr_tag) is not None:
            out.append((dt.dt_name(addr_tag), dyn.values[addr_tag], dyn.values[size_tag], rela))
    if dyn.get(dt.DT_JMPREL) is not None:
        rela = dyn.get(dt.DT_PLTREL) == dt.DT_RELA
        out.append(("DT_JMPREL", dyn.values[dt.DT_JMPREL], dyn.values[dt.DT_PLTRELSZ], rela))
    return out


def _check_relocations(
    image: LoadImage, dyn: dt.Dynamic, symbols: list[tuple[int, ...]]
) -> dict[int, tuple[int, int, int]]:
    """Check each relocation; return {patched address: (type, symbol, value or addend)}."""
    known = _RELOCS.get(image.machine)
    textrel = dyn.get(dt.DT_TEXTREL) is not None or (dyn.get(dt.DT_FLAGS) or 0) & 0x4
    relro = [s for s in image.segments if s.type == PT_GNU_RELRO]
    lo, hi = image.loads[0].vaddr, image.loads[-1].end
    patched: dict[int, tuple[int, int, int]] = {}
    for table, addr, size, rela in _tables(image, dyn):
        fmt = ("QQq" if rela else "QQ") if image.is64 else ("IIi" if rela else "II")
        relative_first = dyn.get(dt.DT_RELACOUNT if rela else dt.DT_RELCOUNT) or 0
        entries = image.words(fmt, image.read(addr, size, table, "relocations"))
        for i, entry in enumerate(entries):
            offset, info = entry[0], entry[1]
            sym, rtype = (info >> 32, info & 0xFFFFFFFF) if image.is64 else (info >> 8, info & 0xFF)
            name = f"{table} relocation {i}"
            load = image.load_at(offset, image.word)
            writable = load is not None and (
                load.flags & PF_W or textrel or any(r.holds(offset, image.word) for r in relro)
            )
            if not writable:
                raise image.bad(f"{name}.r_offset", hex(offset), "an address in a writable PT_LOAD")
            section = _section_at(image, offset)
            if section is not None and (
                section.type == _SHT_DYNAMIC or (not section.flags & _SHF_WRITE and not textrel)
            ):
                raise image.bad(
                    f"{name}.r_offset", hex(offset), f"an address outside {section.name}"
                )
            got = dyn.get(dt.DT_PLTGOT)
            if got is not None and got <= offset < got + 3 * image.word:  # the loader's own
                raise image.bad(f"{name}.r_offset", hex(offset), "a word outside GOT[0..2]")
            if offset in patched:
                raise image.bad(
                    f"{name}.r_offset", hex(offset), "a word no other relocation patches"
                )
            if sym >= len(symbols):
                raise image.bad(
                    f"{name} symbol", sym, f"an index below {len(symbols)} (dynamic symbols)"
                )
            if known is None:
                patched[offset] = (rtype, sym, 0)
                continue
            types, glob_dat, jump_slot, relative, irelative, tlsdesc = known
            if rtype not in types or rtype == 0:  # NONE: a slot left unpatched
                raise image.bad(
                    f"{name} type", rtype, f"a relocation type the {image.machine} loader applies"
                )
            if i < relative_first and table != "DT_JMPREL" and rtype != relative:
                raise image.bad(
                    f"{name} type",
                    rtype,
                    f"{relative} (RELATIVE: DT_RELACOUNT/DT_RELCOUNT counts it)",
                )
            if table == "DT_JMPREL" and rtype not in (jump_slot, irelative, tlsdesc, 0):
                raise image.bad(f"{name} type", rtype, f"a PLT relocation ({jump_slot}: JUMP_SLOT)")
            plt = rtype == jump_slot and _has_section(image, ".got.plt")  # GLOB_DAT: data too
            if plt and section and section.name != ".got.plt":
                raise image.bad(f"{name}.r_offset", hex(offset), "an address in .got.plt")
            if rtype in (glob_dat, jump_slot):  # a GOT word: aligned, a symbol, no addend
                if offset % image.word:
                    raise image.bad(f"{name}.r_offset", hex(offset), f"a multiple of {image.word}")
                if sym == 0:
                    raise image.bad(f"{name} symbol", 0, "the symbol whose address it stores")
                if rela and entry[2]:
                    raise image.bad(f"{name}.r_addend", entry[2], "0 (linkers write 0)")
            stored = entry[2] if rela else _word_at(image, offset)
            if rtype in (relative, irelative) and not lo <= stored <= hi:
                raise image.bad(
                    f"{name}.r_addend" if rela else f"the word {name} relocates",
                    hex(stored),
                    f"an address inside the library ({lo:#x} to {hi:#x})",
                )
            if rtype == jump_slot:
                _check_lazy_slot(image, offset, name)
            patched[offset] = (rtype, sym, stored)
    if dyn.get(dt.DT_RELR) is not None and known is not None:
        _check_relr(image, dyn, patched, known[3], (lo, hi))
    return patched


def _check_relr(
    image: LoadImage,
    dyn: dt.Dynamic,
    patched: dict[int, tuple[int, int, int]],
    relative: int,
    bounds: tuple[int, int],
) -> None:
    """Packed relative relocations: an address, then bitmaps of the words after it."""
    raw = image.read(dyn.values[dt.DT_RELR], dyn.values[dt.DT_RELRSZ], "DT_RELR", "relocations")
    bits = 8 * image.word - 1
    where = 0
    for i, (entry,) in enumerate(image.words("Q" if image.is64 else "I", raw)):
        if entry & 1 == 0:
            targets = [entry]
            where = entry + image.word
        else:
            targets = [where + k * image.word for k in range(bits) if entry >> (k + 1) & 1]
            where += bits * image.word
        for addr in targets:
            load = image.load_at(addr, image.word)
            if load is None or not load.flags & PF_W or addr in patched:
                raise image.bad(f"DT_RELR entry {i}", hex(entry), "words of a writable PT_LOAD")
            stored = _word_at(image, addr)
            if not bounds[0] <= stored <= bounds[1]:
                raise image.bad(
                    f"the word DT_RELR entry {i} relocates",
                    hex(stored),
                    "an address inside the library",
                )
            patched[addr] = (relative, 0, stored)


def _section_at(image: LoadImage, addr: int) -> _Section | None:
    for sec in image.elf.sections:
        tbss = sec.type == _SHT_NOBITS and sec.flags & _SHF_TLS  # overlaps what follows
        if sec.flags & _SHF_ALLOC and not tbss and sec.addr <= addr < sec.addr + sec.size:
            return sec
    return None


def _has_section(image: LoadImage, name: str) -> bool:
    return any(sec.name == name and sec.size for sec in image.elf.sections)


def _word_at(image: LoadImage, addr: int) -> int:
    at = image.file_offset(addr, image.word)
    if at is None:
        return 0  # .bss: zero
    return int.from_bytes(
        image.data[at : at + image.word], "little" if image.order == "<" else "big"
    )


def _check_lazy_slot(image: LoadImage, offset: int, name: str) -> None:
    """A lazily bound PLT slot holds, until the first call, an address in the PLT (code)."""
    target = _word_at(image, offset)
    load = image.load_at(target, 1)
    if load is None or not load.flags & PF_X:
        raise image.bad(
            f"the GOT word {name} patches", hex(target), "an address in the PLT (executable)"
        )


def _check_constructors(
    image: LoadImage,
    dyn: dt.Dynamic,
    patched: dict[int, tuple[int, int, int]],
    symbols: list[tuple[int, ...]],
) -> None:
    """Every constructor/destructor array word is relocated to code the library has."""
    known = _RELOCS.get(image.machine)
    if known is None:
        return
    relative = known[3]
    starts = function_starts(image, symbols)
    for tag in (dt.DT_INIT, dt.DT_FINI):
        addr = dyn.get(tag)
        if addr is not None and starts is not None and addr not in starts:
            raise image.bad(dt.dt_name(tag), hex(addr), "the address where a function starts")
    for array, size_tag in (
        (dt.DT_INIT_ARRAY, dt.DT_INIT_ARRAYSZ),
        (dt.DT_FINI_ARRAY, dt.DT_FINI_ARRAYSZ),
        (dt.DT_PREINIT_ARRAY, dt.DT_PREINIT_ARRAYSZ),
    ):
        start = dyn.get(array)
        if start is None:
            continue
        for k in range(dyn.values[size_tag] // image.word):
            addr = start + k * image.word
            name = f"{dt.dt_name(array)}[{k}]"
            rel = patched.get(addr)
            if rel is None:  # the loader would call the unrelocated word as an address
                raise image.bad(name, "not relocated", "a pointer the loader relocates")
            rtype, sym, value = rel
            if rtype == relative:
                load = image.load_at(value, 1)
                if load is None or not load.flags & PF_X or (starts and value not in starts):
                    raise image.bad(
                        f"the relocation of {name}",
                        hex(value),
                        "the address where a function starts",
                    )
            elif (
                sym
                and symbols[sym][3] not in (_SHN_UNDEF,)
                and symbols[sym][1] & 0xF
                not in (
                    _STT_FUNC,
                    _STT_GNU_IFUNC,
                )
            ):
                raise image.bad(name, f"symbol {sym}", "a function symbol")
