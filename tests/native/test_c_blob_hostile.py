"""Module blobs made to hang or loop the C runtime's loader (blob.c, module.c): a library
named twice, an import graph whose paths multiply. Each blob is written here and linked
into a shared library as its ``__tvm_dev_mblob``; tests/native/c/load_lookup.c loads it
and looks a missing name up through the imports, plain and under ASan + UBSan."""

from __future__ import annotations

import struct
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.native.conftest import NativeBuild

from tvmrt import runtime
from tvmrt.error import ModuleLoadError

Compile = Callable[..., Path]


def _str(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def _u64s(values: list[int]) -> bytes:
    return struct.pack("<Q", len(values)) + struct.pack(f"<{len(values)}Q", *values)


# a CUDA module with no kernels: the cheapest entry the C loader takes (nothing reaches a
# driver until a kernel is looked up)
_CUDA = _str("cuda") + _str("ptx") + struct.pack("<Q", 0) + _str(".version 7.0\n.target sm_50\n")


def _blob(entries: list[bytes], tree: tuple[list[int], list[int]] | None) -> bytes:
    body = struct.pack("<Q", len(entries) + (tree is not None)) + b"".join(entries)
    if tree is not None:
        body += _str("_import_tree") + _u64s(tree[0]) + _u64s(tree[1])
    return struct.pack("<Q", len(body)) + body


def _library(blob: bytes, out: Path) -> Path:
    src = out.with_suffix(".c")
    values = ",".join(str(b) for b in blob)
    src.write_text(f"const unsigned char __tvm_dev_mblob[{len(blob)}] = {{{values}}};\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(out), str(src)], check=True)
    return out


def _lookup(native: NativeBuild, compile_c: Compile, lib: Path) -> tuple[str, float]:
    start = time.monotonic()
    try:
        proc = native.run(
            compile_c(native, "load_lookup"), "lookup", lib, "no_such_function", timeout=20
        )
    except subprocess.TimeoutExpired:
        return "timed out after 20 s", time.monotonic() - start
    assert proc.stderr == "", proc.stderr
    return proc.stdout.strip(), time.monotonic() - start


def test_a_library_named_twice_is_refused(
    native: NativeBuild, compile_c: Compile, tmp_path: Path
) -> None:
    # _lib, A, B, _lib with 0 -> 1 -> 2 -> 3: the library would import itself through A and
    # B, a cycle that is never freed and that lookups go round
    entries = [_str("_lib"), _CUDA, _CUDA, _str("_lib")]
    lib = _library(_blob(entries, ([0, 1, 2, 3, 3], [1, 2, 3])), tmp_path / "twice.so")
    out, _ = _lookup(native, compile_c, lib)
    assert out == "error: ModuleLoadError: module blob: the blob holds more than one '_lib' entry"
    with pytest.raises(ModuleLoadError, match="more than one '_lib' entry"):
        runtime.load_module(str(lib))


def test_a_lookup_visits_each_import_once(
    native: NativeBuild, compile_c: Compile, tmp_path: Path
) -> None:
    # module i imports i + 1 and i + 2: 2^n paths through n modules, each module once
    n = 60
    children = [c for i in range(n) for c in (i + 1, i + 2) if c < n]
    row, k = [0], 0
    for i in range(n):
        k += sum(1 for c in (i + 1, i + 2) if c < n)
        row.append(k)
    entries = [_str("_lib")] + [_CUDA] * (n - 1)
    lib = _library(_blob(entries, (row, children)), tmp_path / "paths.so")
    out, took = _lookup(native, compile_c, lib)
    assert out == "missing"
    assert took < 10, f"the lookup took {took:.1f} s"


def test_an_import_cycle_through_the_c_api_is_refused(
    native: NativeBuild, compile_c: Compile, tmp_path: Path
) -> None:
    # A -> B -> C, then C -> A: TVM refuses any cycle (ModuleNode::Import walks the imports);
    # the C runtime refused only A -> B -> A
    libs = [_library(_blob([_CUDA], None), tmp_path / f"{name}.so") for name in "abc"]
    proc = native.run(compile_c(native, "load_lookup"), "cycle", *libs)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == (
        "error: InvalidArgumentError: Cyclic dependency detected during import"
    )
