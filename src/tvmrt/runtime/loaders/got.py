"""Redirecting a tvm-ffi library's imports to tvmrt: planning and patching GOT entries.

A tvm-ffi kernel library imports ``TVMFFIErrorSetRaisedFromCStrParts`` and the
``TVMBackend*`` services by name. tvmrt loads each library as a private instance and, before
any of its code runs, writes the addresses of its own implementations into the library's
GOT entries for those imports. Imports the dynamic loader must bind at load time cannot be
redirected so, and are refused (:func:`plan_patches`).
"""

from __future__ import annotations

import ctypes
import os

from tvmrt.binfmt.abi import TvmSymbols
from tvmrt.binfmt.binary import ElfFile, ElfSymbol
from tvmrt.error import ModuleLoadError
from tvmrt.runtime import kernel_services

__all__ = ["plan_patches", "apply_patches"]


def plan_patches(
    elf: ElfFile, symbols: TvmSymbols, addresses: dict[str, int], shown: str
) -> list[tuple[int, str]]:
    """``(GOT offset, name)`` for every import tvmrt supplies; refuse what cannot be patched."""
    needed = [name for name in symbols.undefined if name in addresses]
    if not needed:
        return []
    relocs = [r for r in elf.relocations() if r.symbol in needed]
    patches = [(r.offset, r.symbol) for r in relocs if r.kind in ("jump_slot", "glob_dat")]
    eager = {r.symbol for r in relocs if r.kind == "glob_dat"}
    if elf.binds_now() or os.environ.get("LD_BIND_NOW"):
        eager.update(needed)
    process = ctypes.CDLL(None)
    blocked = []
    for name in sorted(eager):
        try:
            process[name]
        except AttributeError:
            blocked.append(name)
    if blocked:
        raise ModuleLoadError(
            f"cannot load {shown!r}: it imports {', '.join(blocked)}, which tvmrt supplies by "
            "patching the library's lazy bindings before its first call, but the dynamic "
            "loader must bind them at load time (LD_BIND_NOW is set, the library was linked "
            "with -z now, or it takes their address); unset LD_BIND_NOW or rebuild it"
        )
    unpatched = sorted(set(needed) - {name for _, name in patches})
    if unpatched:
        raise ModuleLoadError(
            f"cannot load {shown!r}: tvmrt cannot redirect its imports {', '.join(unpatched)} "
            f"(no relocation it knows on {elf.info.machine})"
        )
    return patches


def apply_patches(
    lib: ctypes.CDLL,
    elf: ElfFile,
    dynsym: list[ElfSymbol],
    patches: list[tuple[int, str]],
    shown: str,
) -> None:
    """Point each planned GOT entry at tvmrt's implementation (through RELRO if needed)."""
    if not patches:
        return
    base = _load_base(lib, dynsym, shown)
    addresses = kernel_services.ffi_symbol_addresses()
    relro = elf.relro_ranges()
    mprotect = ctypes.CDLL(None, use_errno=True).mprotect
    mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    mprotect.restype = ctypes.c_int
    page = os.sysconf("SC_PAGE_SIZE")
    for offset, name in patches:
        where = base + offset
        # RELRO pages (full RELRO, -z now) are read-only once the loader is done
        protected = any(start <= offset < end for start, end in relro)
        if protected and mprotect(where & ~(page - 1), page, 3) != 0:  # PROT_READ | PROT_WRITE
            raise ModuleLoadError(
                f"cannot load {shown!r}: cannot make the GOT entry of {name} writable: "
                f"{os.strerror(ctypes.get_errno())}"
            )
        ctypes.c_void_p.from_address(where).value = addresses[name]
        if protected:
            mprotect(where & ~(page - 1), page, 1)  # PROT_READ


def _load_base(lib: ctypes.CDLL, dynsym: list[ElfSymbol], shown: str) -> int:
    """The library's load address: where its defined symbols are, less their link-time values.

    Every symbol must agree: otherwise ``lib`` is not the file that was checked.
    """
    bases = set()
    for symbol in dynsym:
        if symbol.defined and symbol.value and symbol.bind != "local" and symbol.type != "tls":
            try:
                address = ctypes.cast(lib[symbol.name], ctypes.c_void_p).value
            except AttributeError:
                continue
            if address:
                bases.add(address - symbol.value)
    if len(bases) != 1:
        raise ModuleLoadError(
            f"cannot load {shown!r}: the loaded library does not match the file's symbols"
        )
    return bases.pop()
