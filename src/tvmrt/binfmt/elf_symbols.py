"""Dynamic symbols and their hash tables as ``ld.so`` reads them, checked before ``dlopen``.

Part of :mod:`.elf_load` (called from :mod:`.elf_tables`). Each symbol's name lies in
``DT_STRTAB``; a defined one's address lies in mapped memory, inside its section, in an
executable segment for code; where the file keeps its full symbol table (``.symtab``),
each exported or imported name has the same address, size and type there (a damaged
``st_value`` would send ``dlsym`` into the middle of other code). The hash tables
(``DT_GNU_HASH``, ``DT_HASH``) must have buckets (the loader divides by their count) and
find each symbol under its own name, without loops.
"""

from __future__ import annotations

from tvmrt.binfmt import elf_dynamic as dt
from tvmrt.binfmt.elf_load import PF_X, PT_TLS, LoadImage

__all__ = ["check_symbols", "check_hashes", "gnu_hash_count", "function_starts"]

_SHN_UNDEF, _SHN_LORESERVE, _SHN_ABS = 0, 0xFF00, 0xFFF1
_STT_FUNC, _STT_TLS, _STT_GNU_IFUNC = 2, 6, 10
_SHF_ALLOC = 0x2
_TYPES = {0: "notype", 1: "object", 2: "func", 3: "section", 4: "file", 5: "common", 6: "tls"}
_TYPES[10] = "ifunc"
_STO_FLAGS = {"aarch64": 0x80, "riscv": 0x80}  # st_other bits beside the visibility
_BINDS = {0: "local", 1: "global", 2: "weak", 10: "unique"}


def gnu_hash(name: bytes) -> int:
    """The DT_GNU_HASH hash of ``name`` (Bernstein's, as ``ld.so`` computes it)."""
    h = 5381
    for c in name:
        h = (h * 33 + c) & 0xFFFFFFFF
    return h


def elf_hash(name: bytes) -> int:
    """The DT_HASH hash of ``name`` (the System V ABI's)."""
    h = 0
    for c in name:
        h = (h << 4) + c
        g = h & 0xF0000000
        if g:
            h ^= g >> 24
        h &= ~g & 0xFFFFFFFF
    return h


def _gnu_layout(image: LoadImage, addr: int) -> tuple[int, int, int, int, list[int], int]:
    """(nbuckets, symoffset, bloom words, bloom shift, buckets, address of the chains)."""
    head = image.read(addr, 16, "DT_GNU_HASH", "the GNU hash table")
    nbuckets, symoffset, bloom, shift = image.words("IIII", head)[0]
    if nbuckets == 0:  # the loader takes hash % nbuckets
        raise image.bad("DT_GNU_HASH nbuckets", 0, "at least 1")
    if bloom == 0 or bloom & (bloom - 1):
        raise image.bad("DT_GNU_HASH bloom size", bloom, "a power of two")
    if shift >= 8 * image.word:
        raise image.bad("DT_GNU_HASH bloom shift", shift, f"below {8 * image.word}")
    at = addr + 16 + bloom * image.word
    raw = image.read(at, 4 * nbuckets, "DT_GNU_HASH nbuckets", f"{nbuckets} buckets")
    buckets = [b for (b,) in image.words("I", raw)]
    return nbuckets, symoffset, bloom, shift, buckets, at + 4 * nbuckets


def gnu_hash_count(image: LoadImage, addr: int) -> tuple[int, bool]:
    """The number of dynamic symbols a GNU hash table implies (the end of its last chain),
    and whether that is exact: a table that hashes nothing (every bucket 0: a library that
    defines no symbol, as TVM's export of an empty ``lib0.c``) says only "at least
    symoffset", since the undefined symbols after it are not hashed."""
    _, symoffset, _, _, buckets, chains = _gnu_layout(image, addr)
    last = max(buckets)
    if last == 0:
        return symoffset, False
    if last < symoffset:
        raise image.bad("DT_GNU_HASH bucket", last, f"0 or a symbol index >= {symoffset}")
    i = last
    while True:  # each read is checked: a chain without an end runs out of file bytes
        raw = image.read(chains + 4 * (i - symoffset), 4, "DT_GNU_HASH chain", "a hash chain")
        if image.words("I", raw)[0][0] & 1:
            return i + 1, True
        i += 1


def check_hashes(image: LoadImage, dyn: dt.Dynamic, symbols: list[tuple[int, ...]]) -> None:
    """Each hash table finds every symbol it lists under the symbol's own name."""
    names = [dyn.string(s[0]) for s in symbols]
    addr = dyn.get(dt.DT_GNU_HASH)
    if addr is not None:
        nbuckets, symoffset, _, _, buckets, chains = _gnu_layout(image, addr)
        if symoffset > len(symbols):
            raise image.bad("DT_GNU_HASH symoffset", symoffset, f"at most {len(symbols)}")
        if not any(buckets):  # hashes nothing: every symbol it would list must be undefined
            for i in range(symoffset, len(symbols)):
                if symbols[i][3] != 0:  # st_shndx: defined, yet no lookup would find it
                    raise image.bad(
                        f"dynamic symbol {i} ({names[i]!r}).st_shndx",
                        symbols[i][3],
                        "0 (undefined): DT_GNU_HASH hashes no symbol",
                    )
            count = 0
        else:
            count = len(symbols) - symoffset
        raw = image.read(chains, 4 * count, "DT_GNU_HASH chain", "the hash chains")
        chain = [c for (c,) in image.words("I", raw)]
        first: dict[int, int] = {}
        previous = -1
        for k in range(count):
            i = symoffset + k
            h = gnu_hash(names[i])
            b = h % nbuckets
            ends = k + 1 == count or gnu_hash(names[i + 1]) % nbuckets != b
            if (chain[k] | 1) != (h | 1) or bool(chain[k] & 1) != ends or b < previous:
                raise image.bad(
                    f"DT_GNU_HASH chain entry of dynamic symbol {i}",
                    hex(chain[k]),
                    f"the hash of its name {names[i]!r} ({h:#x}), in bucket order",
                )
            if symbols[i][1] >> 4 not in (1, 2, 10):  # lookups find global names only
                raise image.bad(
                    f"dynamic symbol {i} ({names[i]!r}).st_info",
                    hex(symbols[i][1]),
                    "a global or weak binding (DT_GNU_HASH lists it for lookups)",
                )
            first.setdefault(b, i)
            previous = b
        for b, start in enumerate(buckets):
            if start != first.get(b, 0):
                raise image.bad(f"DT_GNU_HASH bucket {b}", start, f"{first.get(b, 0)}")
    addr = dyn.get(dt.DT_HASH)
    if addr is not None:
        _check_sysv_hash(image, addr, names)


def _check_sysv_hash(image: LoadImage, addr: int, names: list[bytes]) -> None:
    nbucket, nchain = image.words("II", image.read(addr, 8, "DT_HASH", "the hash table"))[0]
    if nbucket == 0:
        raise image.bad("DT_HASH nbucket", 0, "at least 1")
    raw = image.read(addr + 8, 4 * (nbucket + nchain), "DT_HASH", "the hash table")
    words = [w for (w,) in image.words("I", raw)]
    buckets, chain = words[:nbucket], words[nbucket:]
    seen = [False] * nchain
    for b, i in enumerate(buckets):
        while i:
            if i >= nchain or seen[i] or elf_hash(names[i]) % nbucket != b:
                raise image.bad(
                    f"DT_HASH chain in bucket {b}", i, "symbols of this bucket, each once"
                )
            seen[i] = True
            i = chain[i]


def check_symbols(image: LoadImage, dyn: dt.Dynamic, symbols: list[tuple[int, ...]]) -> None:
    """Names in the string table, addresses in mapped memory and agreeing with ``.symtab``."""
    sections = image.elf.sections
    tls = next((s for s in image.segments if s.type == PT_TLS), None)
    for i, (name_off, info, other, shndx, value, size) in enumerate(symbols):
        field = f"dynamic symbol {i}"
        if i == 0:
            continue
        if name_off >= len(dyn.strtab) or b"\x00" not in dyn.strtab[name_off:]:
            raise image.bad(
                f"{field}.st_name", name_off, f"an offset inside DT_STRSZ ({len(dyn.strtab)})"
            )
        if info & 0xF != 3 and info >> 4 != 0:  # a name the loader looks up or exports
            if not dyn.string(name_off):
                raise image.bad(f"{field}.st_name", name_off, "the offset of a non-empty name")
            vis, extra = other & 3, other & ~3 & ~_STO_FLAGS.get(image.machine, 0)
            if vis not in (0, 3) or extra:  # hidden and internal names are never dynamic
                raise image.bad(f"{field}.st_other", hex(other), "default or protected visibility")
        elif shndx == _SHN_UNDEF:
            raise image.bad(f"{field}.st_info", hex(info), "a global or weak import")
        if shndx in (_SHN_UNDEF, _SHN_ABS):
            continue
        field = f"dynamic symbol {i} ({dyn.string(name_off).decode(errors='replace')!r})"
        if shndx >= _SHN_LORESERVE or (sections and shndx >= len(sections)):
            raise image.bad(f"{field}.st_shndx", hex(shndx), "the index of one of its sections")
        if info & 0xF == _STT_TLS:
            if tls is None or value + size > tls.memsz:
                raise image.bad(f"{field}.st_value", hex(value), "an offset inside PT_TLS")
            continue
        if image.machine == "arm" and info & 0xF == _STT_FUNC:
            value &= ~1  # bit 0 of an ARM function's address marks Thumb code (ARM ELF ABI)
        load = image.load_at(value, size) or image.load_at(value - 1, 1)
        if load is None or (info & 0xF in (_STT_FUNC, _STT_GNU_IFUNC) and not load.flags & PF_X):
            code = " executable" if info & 0xF in (_STT_FUNC, _STT_GNU_IFUNC) else ""
            raise image.bad(f"{field}.st_value", hex(value), f"an address in a{code} PT_LOAD")
        if sections and info & 0xF != 0:  # untyped: linker markers (_end, __bss_start)
            sec = sections[shndx]
            if (
                not sec.flags & _SHF_ALLOC
                or not sec.addr <= value <= value + size <= sec.addr + sec.size
            ):
                raise image.bad(
                    f"{field}.st_value", hex(value), f"an address inside its section {sec.name!r}"
                )
    _check_against_symtab(image, dyn, symbols)


def _check_against_symtab(
    image: LoadImage, dyn: dt.Dynamic, symbols: list[tuple[int, ...]]
) -> None:
    full: dict[str, list[tuple[str, bool, int, int, str]]] = {}
    for s in image.symtab:
        if s.bind in ("global", "weak", "unique"):
            key = s.name.split("@", 1)[0]
            full.setdefault(key, []).append((s.type, s.defined, s.value, s.size, s.bind))
    if not full:
        return  # stripped: nothing to compare with
    for i, (name_off, info, _, shndx, value, size) in enumerate(symbols):
        if i == 0 or info & 0xF == 3:  # the null symbol, section symbols
            continue
        name = dyn.string(name_off).decode(errors="replace")
        field = f"dynamic symbol {i} ({name!r})"
        entries = full.get(name)
        if entries is None and (shndx == _SHN_UNDEF or info >> 4 == 0):
            continue  # an import .symtab may leave out; a local name
        if entries is None:
            raise image.bad(f"{field}.st_name", name_off, "the offset of a name .symtab also has")
        kind = _TYPES.get(info & 0xF, f"type {info & 0xF}")
        bind = _BINDS.get(info >> 4, f"bind {info >> 4}")
        defined = shndx != _SHN_UNDEF
        if not any(e[0] == kind and e[4] == bind for e in entries):
            raise image.bad(
                f"{field}.st_info", hex(info), f"{entries[0][4]} {entries[0][0]} as in .symtab"
            )
        if not any(e[1] == defined for e in entries):
            raise image.bad(
                f"{field}.st_shndx", hex(shndx), "as defined or undefined as in .symtab"
            )
        if defined and not any(e[1] and e[2] == value for e in entries):
            raise image.bad(f"{field}.st_value", hex(value), f"{entries[0][2]:#x} as in .symtab")
        if defined and not any(e[1] and e[3] == size for e in entries):
            raise image.bad(f"{field}.st_size", size, f"{entries[0][3]} as in .symtab")


def function_starts(image: LoadImage, symbols: list[tuple[int, ...]]) -> set[int] | None:
    """Addresses where functions start (symbols, ``.init``/``.fini``); None if stripped."""
    full = [s.value for s in image.symtab if s.is_function and s.defined]
    if not full:
        return None
    starts = set(full)
    starts.update(s[4] for s in symbols if s[1] & 0xF in (_STT_FUNC, _STT_GNU_IFUNC) and s[3])
    starts.update(s.addr for s in image.elf.sections if s.name in (".init", ".fini"))
    return starts
