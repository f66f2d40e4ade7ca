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
from tvmrt.runtime.loaders import blob, link
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
