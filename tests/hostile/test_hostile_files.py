"""Issue 11's hostile inputs: small files that made tvmrt allocate gigabytes, hang or recurse.

Each file is built here (fuzz/hostile.py); each test checks the clear error and that the
Python memory peak stays small (tracemalloc counts every bytes/str the parsers make).
"""

from __future__ import annotations

import hashlib
import re
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from support.paths import REPO

sys.path.insert(0, str(REPO / "fuzz"))

import hostile
import tvmrt.runtime as rt
from tvmrt.error import ModuleLoadError
from tvmrt.runtime import Module
from tvmrt.runtime.loaders import binary, blob, link
from tvmrt.runtime.registry import register_func

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
    result, peak = _peak(lambda: link.read_members(str(path)))
    assert isinstance(result, ModuleLoadError), result
    assert result.args[0].startswith(f"cannot load {str(path)!r}: ")
    assert re.search(message, str(result)), str(result)
    assert peak < 4 * MB
    with pytest.raises(ModuleLoadError, match=message):  # the loader says the same
        rt.load_module(path)


def test_gzip_bomb_member_is_refused_by_the_expansion_bound(tmp_path):
    path = tmp_path / "bomb.tar.gz"
    path.write_bytes(hostile.gzip_bomb(128 * MB))  # ~130 KB of gzip
    result, peak = _peak(lambda: link.read_members(str(path)))
    assert isinstance(result, ModuleLoadError), result
    assert "when decompressed (gzip" in str(result)
    assert "tvmrt accepts 16 times the compressed size plus 64 MiB" in str(result)
    assert peak < 4 * MB  # refused from the member's header, before its data is read


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("tar_gnu_long_name", "GNU long-name header"),
        ("tar_pax_header", "pax header"),
        ("tar_sparse", "sparse file"),
        ("tar_pax_sparse", "sparse file"),
        ("tar_gzip_bomb", "when decompressed (gzip"),
        ("elf_long_name", "is too long"),
        ("elf_overlapping_names", "overlap far more"),
    ],
)
def test_inspect_reports_each_hostile_file_within_bounds(tmp_path, name, message):
    from tvmrt.artifact import find_artifact, inspect_artifact

    path = tmp_path / ("model.tar" if name.startswith("tar") else "model.o")
    path.write_bytes(hostile.HOSTILE[name]())
    report, peak = _peak(lambda: inspect_artifact(find_artifact(path)).to_dict())
    assert isinstance(report, dict), report
    assert report["runnable"] is False
    assert any(message in problem for problem in report["problems"]), report["problems"]
    assert peak < 8 * MB


@pytest.mark.parametrize("compress", ["bz2", "lzma", "none"])
def test_real_archive_reads_the_same_in_every_compression(artifacts, tmp_path, compress):
    import bz2
    import gzip
    import lzma

    real = artifacts / "iris-factory" / "deploy_lib.tar"  # TVM wrote it gzip-compressed
    plain = gzip.decompress(real.read_bytes())
    path = tmp_path / "deploy_lib.tar"
    path.write_bytes({"bz2": bz2.compress, "lzma": lzma.compress}.get(compress, bytes)(plain))
    assert link.read_members(str(path)) == link.read_members(str(real))


# -- item 14: import trees ----------------------------------------------------------------

_KIND = "hostile_test_module"


@pytest.fixture
def empty_module_kind():
    register_func(f"runtime.module.loadbinary_{_KIND}", lambda reader: Module(), override=True)
    return _KIND


def test_repeated_import_edges_keep_lookup_linear(empty_module_kind):
    indptr, children = hostile.repeated_edges(40)  # 2**40 paths through the imports
    data = hostile.module_blob(indptr, children, empty_module_kind)
    assert len(data) < 10_000
    parsed = blob.parse_module_blob(data, "blob")
    root = blob.assemble_modules(parsed, Module())
    start = time.perf_counter()
    assert root.implements_function("no_such_kernel", query_imports=True) is False
    assert time.perf_counter() - start < 1.0


def test_long_import_chain_has_no_recursion_limit(empty_module_kind):
    indptr, children = hostile.chain(blob.MAX_IMPORT_DEPTH)  # deeper than Python recursion
    parsed = blob.parse_module_blob(hostile.module_blob(indptr, children, empty_module_kind), "b")
    lib = Module()
    root = blob.assemble_modules(parsed, lib)
    assert root is not lib
    assert root.implements_function("no_such_kernel", query_imports=True) is False


def test_absurdly_deep_import_chain_is_a_clear_error(empty_module_kind):
    indptr, children = hostile.chain(3000)
    data = hostile.module_blob(indptr, children, empty_module_kind)
    with pytest.raises(ModuleLoadError, match=r"nested more than 1024 modules deep"):
        blob.parse_module_blob(data, "__tvm_dev_mblob of 'deep.so'")


def test_lookup_order_is_unchanged_depth_first():
    a, b, c, d = (rt.Module() for _ in range(4))
    found = []
    for m, tag in ((a, "a"), (b, "b"), (c, "c"), (d, "d")):
        m._get_function = lambda name, tag=tag: (found.append(tag), None)[1]  # type: ignore[method-assign]
    a.import_module(b)
    a.import_module(c)
    b.import_module(d)
    c.import_module(d)
    assert a.find_function("f", True) is None
    assert found == ["a", "b", "d", "c"]  # depth first, in import order, d once


# -- item 19: the link cache --------------------------------------------------------------


def _cached(directory: Path) -> list[Path]:
    return sorted((directory / "linked").glob("*.so"))


def test_truncated_cache_entry_is_detected_and_relinked(artifacts, tmp_path, monkeypatch):
    if link.find_compiler() is None:
        pytest.skip("no C compiler to link the .tar")
    monkeypatch.setenv("TVMRT_CACHE_DIR", str(tmp_path / "cache"))
    path = artifacts / "iris-factory" / "deploy_lib.tar"
    rt.load_module(path)
    (entry,) = _cached(tmp_path / "cache")
    good = entry.read_bytes()
    entry.write_bytes(good[: len(good) // 3])  # a crash or a full disk
    root = rt.load_module(path)
    assert root.type_key == "GraphExecutorFactory"
    (relinked,) = _cached(tmp_path / "cache")
    assert relinked.read_bytes() == good


def test_error_from_a_cached_library_names_the_cache_file(artifacts, tmp_path, monkeypatch):
    if link.find_compiler() is None:
        pytest.skip("no C compiler to link the .tar")
    monkeypatch.setenv("TVMRT_CACHE_DIR", str(tmp_path / "cache"))
    path = artifacts / "iris-factory" / "deploy_lib.tar"
    rt.load_module(path)
    (entry,) = _cached(tmp_path / "cache")
    # a consistent entry (its name matches its bytes) that is not a usable library
    junk = b"\x7fELF" + bytes(60)
    entry.unlink()
    key = entry.name.split(".")[0]
    bad = entry.with_name(f"{key}.{hashlib.sha256(junk).hexdigest()[:32]}.so")
    bad.write_bytes(junk)
    with pytest.raises(ModuleLoadError, match=re.escape(f"cached as {str(bad)!r}")):
        rt.load_module(path)
