"""Issue 11's hostile inputs for the binary-format toolkit: ELF string tables and tar
headers built to make a reader allocate gigabytes.

Each file is built here (fuzz/hostile.py); each test checks the clear error and that the
Python memory peak stays small (tracemalloc counts every bytes/str the parsers make).
"""

from __future__ import annotations

import re
import sys
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from support.paths import REPO

sys.path.insert(0, str(REPO / "fuzz"))

import hostile
import tvmrt.runtime as rt
from tvmrt.binfmt import archive, binary
from tvmrt.error import ModuleLoadError

MB = 1 << 20


def _peak(fn: Callable[[], Any]) -> tuple[Any, int]:
    """``(result or raised exception, peak traced bytes)`` of ``fn()``."""
    tracemalloc.start()
    try:
        try:
            result: Any = fn()
        except Exception as exc:  # returned for the caller to check
            result = exc
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# -- item 10: ELF string tables -----------------------------------------------------------


def test_symbols_sharing_one_long_name_are_refused_without_copying_it():
    data = hostile.elf_long_name(1 * MB)  # ~20k symbols at one 512 KB name: ~10 GB before
    assert len(data) <= 1 * MB + 4096
    result, peak = _peak(lambda: binary.ElfFile(data, "long.o").symbols(dynamic=False))
    assert isinstance(result, ModuleLoadError)
    assert "string at index 1 is too long (names are at most 65536 bytes)" in str(result)
    assert peak < 8 * MB


def test_symbols_at_every_offset_of_one_name_are_bounded():
    data = hostile.elf_overlapping_names(1 * MB, name=60_000)  # before: 60k names ~ 1.8 GB
    result, peak = _peak(lambda: binary.ElfFile(data, "overlap.o").symbols(dynamic=False))
    assert isinstance(result, ModuleLoadError)
    assert "overlap far more than a linker writes them" in str(result)
    assert peak < 8 * MB


def test_a_shared_name_is_decoded_once():
    strtab = b"\x00" + b"k" * 50_000 + b"\x00"
    data = hostile.elf_with_names(strtab, [1] * 5_000)  # 5k symbols x 50 KB = 250 MB before
    symbols, peak = _peak(lambda: binary.ElfFile(data, "shared.o").symbols(dynamic=False))
    assert len(symbols) == 5_000
    assert {s.name for s in symbols} == {"k" * 50_000}
    assert all(s.name is symbols[0].name for s in symbols)
    assert peak < 4 * MB


# -- item 11: tar headers and members ------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            hostile.tar_gnu_long_name,
            r"GNU long-name header '\./\./@LongLink' at byte 0 is 4294967296 bytes "
            r"\(a path is at most 4096\)",
        ),
        (
            lambda: hostile.tar_gnu_long_name(compress="none"),
            r"GNU long-name header .* is 4294967296 bytes",
        ),
        (hostile.tar_pax_header, r"pax header .* is 4294967296 bytes \(tvmrt reads at most"),
        (hostile.tar_sparse, r"member 'lib0.o' is a sparse file \(TVM writes none\)"),
        (hostile.tar_pax_sparse, r"member 'lib0.o' is a sparse file \(TVM writes none\)"),
    ],
    ids=["bzip2-long-name", "plain-long-name", "pax", "gnu-sparse", "pax-sparse"],
)
def test_extended_tar_headers_are_bounded_before_they_are_read(tmp_path, build, message):
    path = tmp_path / "model.tar"
    path.write_bytes(build())
    assert path.stat().st_size < 16 * 1024
    result, peak = _peak(lambda: archive.read_members(str(path)))
    assert isinstance(result, ModuleLoadError), result
    assert result.args[0].startswith(f"cannot load {str(path)!r}: ")
    assert re.search(message, str(result)), str(result)
    assert peak < 4 * MB
    with pytest.raises(ModuleLoadError, match=message):  # the loader says the same
        rt.load_module(path)


def test_gzip_bomb_member_is_refused_by_the_expansion_bound(tmp_path):
    path = tmp_path / "bomb.tar.gz"
    path.write_bytes(hostile.gzip_bomb(128 * MB))  # ~130 KB of gzip
    result, peak = _peak(lambda: archive.read_members(str(path)))
    assert isinstance(result, ModuleLoadError), result
    assert "when decompressed (gzip" in str(result)
    assert "tvmrt accepts 16 times the compressed size plus 64 MiB" in str(result)
    assert peak < 4 * MB  # refused from the member's header, before its data is read


@pytest.mark.parametrize("compress", ["bz2", "lzma", "none"])
def test_real_archive_reads_the_same_in_every_compression(artifacts, tmp_path, compress):
    import bz2
    import gzip
    import lzma

    real = artifacts / "iris-factory" / "deploy_lib.tar"  # TVM wrote it gzip-compressed
    plain = gzip.decompress(real.read_bytes())
    path = tmp_path / "deploy_lib.tar"
    path.write_bytes({"bz2": bz2.compress, "lzma": lzma.compress}.get(compress, bytes)(plain))
    assert archive.read_members(str(path)) == archive.read_members(str(real))
