"""Module blobs made to hang, loop or mislead the C runtime's loader (blob.c, module.c,
cuda_module.c, opencl_module.c): a library named twice, an import graph whose paths
multiply, CUDA images that are not what they claim, OpenCL programs in no format tvmrt
loads or whose source is not text, and kernel tables that are cut short or oversized. Each blob is
written here and linked into a shared library as its ``__tvm_dev_mblob``;
tests/native/c/load_lookup.c loads it and looks a missing name up through the imports, plain
and under ASan + UBSan, and the Python runtime loads the same file: both must refuse it with
the same words."""

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


def _cuda(fmt: str, image: bytes, table: bytes = struct.pack("<Q", 0)) -> bytes:
    return _str("cuda") + _str(fmt) + table + struct.pack("<Q", len(image)) + image


def _kernel(args: int, tags: list[str]) -> bytes:
    """A kernel table of one kernel 'k' (TVM <= 0.20's layout): float32 handles, tags."""
    types = struct.pack("<Q", args) + b"\x03\x40\x01\x00" * args  # handle, 64 bits
    return struct.pack("<Q", 1) + _str("k") + _str("k") + types + _u64s_str(tags)


def _u64s_str(items: list[str]) -> bytes:
    return struct.pack("<Q", len(items)) + b"".join(_str(t) for t in items)


def _elf(bits: int, machine: int) -> bytes:
    head = bytearray(64)
    head[:5] = b"\x7fELF" + bytes([bits])
    struct.pack_into("<H", head, 18, machine)
    return bytes(head)


_FATBIN = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQIIII")

# (id, blob entry, what both runtimes answer after "<the blob>: CUDA module (<fmt>): ")
_IMAGES = [
    ("not-ptx", _cuda("ptx", b"hello, no PTX here\n"),
     "the CUDA module is neither PTX (no '.version'/'.target sm_XX' lines), a cubin (ELF) nor "
     "a fatbin"),
    ("elf32", _cuda("cubin", _elf(1, 190)), "the cubin is not a 64-bit ELF file"),
    ("elf-x86", _cuda("cubin", _elf(2, 62)), "the ELF file is for machine 62, not NVIDIA CUDA (190)"),
    ("fatbin-size", _cuda("fatbin", _FATBIN.pack(0xBA55ED50, 1, 16, 1000) + bytes(16)),
     "the fatbin header claims 1000 bytes past its end"),
    ("fatbin-entry", _cuda("fatbin", _FATBIN.pack(0xBA55ED50, 1, 16, 32) + _ENTRY.pack(2, 0, 64, 1000, 0, 0, 0, 80)),
     "fatbin entry at byte 16 runs past the fatbin"),
    ("fatbin-empty", _cuda("fatbin", _FATBIN.pack(0xBA55ED50, 1, 16, 0)),
     "the fatbin holds neither PTX nor machine code"),
]  # fmt: skip

_PTX = b".version 7.0\n.target sm_50\n"
# (id, blob entry, C's line after "error: ", what Python's message holds)
_TABLES = [
    ("cut-short", _str("cuda") + _str("ptx") + struct.pack("<Q", 1) + _str("k") + _str("k"),
     "ModuleLoadError: module blob: CUDA module (ptx): kernel table: number of kernels is 1,",
     "CUDA module (ptx): kernel table: "),
    ("2000-args", _cuda("ptx", _PTX, _kernel(2000, [])),
     "ModuleLoadError: kernel 'k' has 2000 arguments (at most 1024)",
     "kernel 'k' has 2000 arguments (at most 1024)"),
    ("17-tags", _cuda("ptx", _PTX, _kernel(1, ["blockIdx.x"] * 17)),
     "ModuleLoadError: kernel 'k' has more than 16 launch param tags that take a value",
     "kernel 'k' has more than 16 launch param tags that take a value"),
]  # fmt: skip


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


def _refused(
    native: NativeBuild, compile_c: Compile, entry: bytes, tmp_path: Path
) -> tuple[str, str]:
    lib = _library(_blob([_str("_lib"), entry], None), tmp_path / "cuda.so")
    c_side, _ = _lookup(native, compile_c, lib)
    with pytest.raises(ModuleLoadError) as caught:
        runtime.load_module(str(lib))
    return c_side, str(caught.value)


@pytest.mark.parametrize(("entry", "words"), [c[1:] for c in _IMAGES], ids=[c[0] for c in _IMAGES])
def test_a_cuda_image_is_checked_before_a_driver_sees_it(
    native: NativeBuild, compile_c: Compile, tmp_path: Path, entry: bytes, words: str
) -> None:
    # cuModuleLoadData takes no length: the C runtime handed these to the driver
    c_side, python = _refused(native, compile_c, entry, tmp_path)
    fmt = "ptx" if b"ptx" in entry[:32] else "cubin" if b"cubin" in entry[:32] else "fatbin"
    assert c_side == f"error: ModuleLoadError: module blob: CUDA module ({fmt}): {words}"
    assert python.endswith(f": CUDA module ({fmt}): {words}")


@pytest.mark.parametrize(
    ("entry", "c_words", "python_words"), [c[1:] for c in _TABLES], ids=[c[0] for c in _TABLES]
)
def test_a_kernel_table_is_refused_as_the_modules(
    native: NativeBuild,
    compile_c: Compile,
    tmp_path: Path,
    entry: bytes,
    c_words: str,
    python_words: str,
) -> None:
    c_side, python = _refused(native, compile_c, entry, tmp_path)
    assert c_side.startswith(f"error: {c_words}"), c_side
    assert python_words in python


# (id, blob entry, C's line after "error: ModuleLoadError: ", what Python's message holds: Python
# reads an opencl module with the C loader, runtime/loaders/opencl.py)
_OPENCL = [
    ("spirv", _str("opencl") + _str("spirv") + struct.pack("<Q", 0) + _str("x"),
     "module blob: OpenCL module format 'spirv' is not one tvmrt loads: expected 'cl' (OpenCL "
     "C source) or a device binary (aocx, awsxclbin, xclbin)",
     "OpenCL module format 'spirv' is not one tvmrt loads: expected 'cl' (OpenCL C source) or "
     "a device binary (aocx, awsxclbin, xclbin)"),
    ("source-not-text", _str("opencl") + _str("cl") + struct.pack("<Q", 0) + struct.pack("<Q", 2) + b"a\xe9",
     "OpenCL module: format 'cl' but the source is not text: byte 1 is not UTF-8",
     "OpenCL module: format 'cl' but the source is not text: byte 1 is not UTF-8"),
    ("2000-args", _str("opencl") + _str("cl") + _kernel(2000, []) + _str("__kernel void k() {}"),
     "kernel 'k' has 2000 arguments (at most 1024)",
     "kernel 'k' has 2000 arguments (at most 1024)"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("entry", "c_words", "python_words"), [c[1:] for c in _OPENCL], ids=[c[0] for c in _OPENCL]
)
def test_an_opencl_module_is_refused_from_c_and_from_python(
    native: NativeBuild,
    compile_c: Compile,
    tmp_path: Path,
    entry: bytes,
    c_words: str,
    python_words: str,
) -> None:
    # refused when the blob is read, before any OpenCL driver is loaded
    c_side, python = _refused(native, compile_c, entry, tmp_path)
    assert c_side == f"error: ModuleLoadError: {c_words}"
    assert python_words in python
