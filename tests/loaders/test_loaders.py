"""Module loaders: ``.so``/``.tar``/``.o`` loading and refusals, the module blob.

Tier: cpu. Uses the real artifacts (``artifacts`` fixture) and tiny libraries built with
the system C compiler (skipped without one).
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import json
import struct
import subprocess
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tvmrt.runtime as rt
from tvmrt.binfmt import binary
from tvmrt.binfmt.stream import ByteReader, ByteWriter
from tvmrt.error import ModuleLoadError, TVMError
from tvmrt.runtime import kernel_callbacks, kernel_services
from tvmrt.runtime.loaders import LegacyPackedFunc, LibraryModule, blob, link
from tvmrt.runtime.module import PyModule
from tvmrt.runtime.registry import register_func, remove_global_func

SLOTS_C = r"""
__attribute__((weak)) void (*__TVMAPISetLastError)(const char*) = 0;
__attribute__((weak)) void* (*__TVMBackendAllocWorkspace)(int, int, unsigned long, int, int) = 0;
int fused_add(void* a, int* c, int n, void* r, int* rc, void* res) { return 0; }
"""
PLAIN_C = "int plain_function(int x) { return x + 1; }\nint plain_data = 3;\n"
FFI_C = "int __tvm_ffi_add(void* s, void* a, int n, void* r) { return 0; }\n"
MISSING_C = r"""
__attribute__((weak)) void (*__TVMAPISetLastError)(const char*) = 0;
extern int TVMArrayAlloc(void);
int fused_alloc(void* a, int* c, int n, void* r, int* rc, void* res) { return TVMArrayAlloc(); }
"""


def build_shared(source: str, directory: Path, name: str) -> Path:
    """Compile ``source`` into ``directory/name.so`` (skips the test without a compiler)."""
    cc = link.find_compiler()
    if cc is None:
        pytest.skip("no C compiler to build test libraries")
    src = directory / f"{name}.c"
    out = directory / f"{name}.so"
    src.write_text(source)
    subprocess.run([*cc, "-shared", "-fPIC", "-o", str(out), str(src)], check=True)
    return out


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TVMRT_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "tvmrt-cache"))


def _graph_funcs(graph_path: Path) -> set[str]:
    graph = json.loads(graph_path.read_text())
    return {
        n["attrs"]["func_name"]
        for n in graph["nodes"]
        if n["op"] == "tvm_op" and n["attrs"]["func_name"] != "__nop"
    }


# -- .so loading --------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["mobilenet_v1", "mobilenet_v2"])
def test_load_legacy_so(artifacts, model):
    folder = artifacts / model
    module = rt.load_module(folder / "deploy_lib.so")
    assert isinstance(module, LibraryModule)
    assert (module.type_key, module.format) == ("library", "so")
    assert module.imported_modules == []
    for name in _graph_funcs(folder / "deploy_graph.json"):
        func = module[name]
        assert isinstance(func, LegacyPackedFunc)
        assert func.name == name
    assert module.get_function(next(iter(_graph_funcs(folder / "deploy_graph.json"))))


def test_tvm_main_is_read_as_a_string(artifacts):
    module = rt.load_module(artifacts / "mobilenet_v1" / "deploy_lib.so")
    assert module.entry_name_in_library == "fused_nn_pad_layout_transform"
    assert module.entry_func.name == "fused_nn_pad_layout_transform"
    assert module.implements_function("__tvm_main__")


def test_only_exported_kernels_are_functions(artifacts):
    module = rt.load_module(artifacts / "mobilenet_v1" / "deploy_lib.so")
    for name in ("memcpy", "expf", "_init", "__TVMAPISetLastError", "no_such_kernel"):
        assert not module.implements_function(name)
    with pytest.raises(AttributeError, match=r"^Module has no function 'memcpy'$"):
        module["memcpy"]


def test_present_slots_are_filled(artifacts):
    module = rt.load_module(artifacts / "mobilenet_v1" / "deploy_lib.so")
    assert isinstance(module, LibraryModule)
    addresses = kernel_services.slot_addresses()
    present = {"TVMAPISetLastError", "TVMBackendAllocWorkspace", "TVMBackendFreeWorkspace"}
    present.add("TVMBackendParallelLaunch")
    for name in present:
        assert ctypes.c_void_p.in_dll(module._lib, "__" + name).value == addresses[name]


def test_module_context_token_is_set(tmp_path):
    source = SLOTS_C + "void* __tvm_module_ctx = 0;\n"
    module = rt.load_module(build_shared(source, tmp_path, "ctx"))
    assert isinstance(module, LibraryModule)
    token = ctypes.c_void_p.in_dll(module._lib, "__tvm_module_ctx").value
    assert token
    assert kernel_callbacks._modules[token] is module


def test_subset_of_slots_is_fine(tmp_path):
    module = rt.load_module(build_shared(SLOTS_C, tmp_path, "slots"))
    assert module["fused_add"]() is None
    assert not module.implements_function("__tvm_main__")


# -- refusals before anything runs -----------------------------------------------------------


@pytest.mark.parametrize(
    ("relpath", "message"),
    [
        (
            "aarch64/deploy_lib.so",
            r"^cannot load '.*deploy_lib.so': built for aarch64 \(ARM 64-bit\), "
            r"this machine is x86-64$",
        ),
        (
            "wrn-arm32/wrn_8s_g0-rasp.tar",
            r"^cannot load '.*wrn_8s_g0-rasp.tar': built for arm \(ARM 32-bit\), "
            r"this machine is x86-64$",
        ),
        (
            "windows-dll/deploy.dll",
            r"^cannot load '.*deploy.dll': it is a Windows DLL \(x86-64\), this machine runs "
            r"Linux; export the model for Linux$",
        ),
        (
            "face-macos/deploy_lib.so",
            r"^cannot load '.*deploy_lib.so': it is a macOS Mach-O library \(x86-64\), this "
            r"machine runs Linux; export the model for Linux$",
        ),
    ],
    ids=["aarch64", "arm32-tar", "windows-dll", "macos"],
)
def test_foreign_artifacts_are_refused(artifacts, relpath, message):
    if binary.host_machine() != "x86-64" or binary.host_os() != "linux":
        pytest.skip("messages are written for an x86-64 Linux host")
    with pytest.raises(ModuleLoadError, match=message):
        rt.load_module(artifacts / relpath)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", r"not a shared library \(it is an empty file\)"),
        (b"hello, this is text\n" * 20, r"not a shared library \(it is a text file\)"),
        (bytes(range(256)) * 4, r"not a shared library \(it is a file of unrecognised binary"),
        (b"PK\x03\x04" + b"\x00" * 100, r"not a shared library \(it is a zip archive\)"),
    ],
    ids=["empty", "text", "garbage", "zip"],
)
def test_non_libraries_are_refused(tmp_path, content, message):
    path = tmp_path / "model.so"
    path.write_bytes(content)
    with pytest.raises(ModuleLoadError, match=message):
        rt.load_module(path)


@pytest.mark.parametrize("size", [16, 64, 1000, 100_000])
def test_truncated_elf_is_refused(artifacts, tmp_path, size):
    data = (artifacts / "mobilenet_v1" / "deploy_lib.so").read_bytes()[:size]
    path = tmp_path / "truncated.so"
    path.write_bytes(data)
    with pytest.raises(ModuleLoadError, match=r"truncated or corrupt|no dynamic symbol"):
        rt.load_module(path)


def test_corrupt_section_table_is_refused(artifacts, tmp_path):
    data = bytearray((artifacts / "mobilenet_v1" / "deploy_lib.so").read_bytes())
    struct.pack_into("<Q", data, 0x28, len(data) - 10)  # e_shoff near the end
    path = tmp_path / "corrupt.so"
    path.write_bytes(bytes(data))
    with pytest.raises(ModuleLoadError, match=r"truncated or corrupt \(\d+ section headers"):
        rt.load_module(path)


def test_plain_shared_library_is_not_a_tvm_module(tmp_path):
    with pytest.raises(ModuleLoadError, match=r"the shared library is not a TVM module"):
        rt.load_module(build_shared(PLAIN_C, tmp_path, "plain"))


def test_tvm_ffi_library_goes_to_the_ffi_loader(tmp_path):
    module = rt.load_module(build_shared(FFI_C, tmp_path, "ffi"))
    assert type(module).__name__ == "FFILibraryModule"
    assert module.function_names == ["add"]
    assert module["add"]() is None


def test_unresolvable_imports_are_refused(tmp_path):
    with pytest.raises(ModuleLoadError, match=r"needs symbols .*provide\): TVMArrayAlloc$"):
        rt.load_module(build_shared(MISSING_C, tmp_path, "missing"))


# -- .tar and .o -------------------------------------------------------------------------


def test_iris_tar_links_and_parses_its_blob(artifacts):
    root = rt.load_module(artifacts / "iris-factory" / "deploy_lib.tar")
    assert root.type_key == "GraphExecutorFactory"
    (lib,) = root.imported_modules
    assert isinstance(lib, LibraryModule)
    assert lib.implements_function("tvmgen_default_fused_nn_softmax")
    assert lib.imported_modules == []


def test_tar_link_is_cached(artifacts):
    path = artifacts / "iris-factory" / "deploy_lib.tar"
    rt.load_module(path)
    cached = list((link.cache_dir() / "linked").glob("*.so"))
    assert cached
    stamps = {p: p.stat().st_mtime_ns for p in cached}
    rt.load_module(path)
    assert {p: p.stat().st_mtime_ns for p in cached} == stamps


def test_missing_compiler_is_reported(artifacts, tmp_path, monkeypatch):
    """A $CC that names nothing is named (it was reported as "no C compiler found")."""
    monkeypatch.setenv("TVMRT_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("CC", "/nonexistent/cc -O2")
    with pytest.raises(ModuleLoadError, match=r"\$CC names '/nonexistent/cc', which is not an"):
        rt.load_module(artifacts / "iris-factory" / "deploy_lib.tar")
    monkeypatch.delenv("CC")
    monkeypatch.setenv("PATH", str(tmp_path))  # no cc, gcc or clang there
    with pytest.raises(ModuleLoadError, match=r"no C compiler was found; install gcc"):
        rt.load_module(artifacts / "iris-factory" / "deploy_lib.tar")


def _tar(path: Path, members: list[tarfile.TarInfo], payloads: list[bytes | None]) -> Path:
    with tarfile.open(path, "w") as archive:
        for info, data in zip(members, payloads, strict=True):
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _member(name: str, data: bytes = b"", kind: bytes = tarfile.REGTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    info.type = kind
    if kind == tarfile.SYMTYPE:
        info.linkname = "/etc/passwd"
    return info


@pytest.mark.parametrize(
    ("name", "kind", "data", "message"),
    [
        ("../evil.o", tarfile.REGTYPE, b"x", r"member '../evil.o' has an unsafe path"),
        ("/abs.o", tarfile.REGTYPE, b"x", r"member '/abs.o' has an unsafe path"),
        ("link.o", tarfile.SYMTYPE, b"", r"member 'link.o' is a link or special file"),
        # C source is compiled now (tvmrt's headers); this one defines no TVM function
        ("lib0.c", tarfile.REGTYPE, b"int x;\n", r"model.tar': the shared library is not a TVM"),
        ("notes.txt", tarfile.REGTYPE, b"hello\n", r"'notes.txt' is not an object file"),
    ],
    ids=["dotdot", "absolute", "symlink", "c-source", "text"],
)
def test_unsafe_or_unusable_tar_members(tmp_path, name, kind, data, message):
    path = _tar(tmp_path / "model.tar", [_member(name, data, kind)], [data])
    with pytest.raises(ModuleLoadError, match=message):
        rt.load_module(path)


def test_empty_tar_is_refused(tmp_path):
    path = _tar(tmp_path / "empty.tar", [], [])
    with pytest.raises(ModuleLoadError, match=r"the archive holds no object files"):
        rt.load_module(path)


def test_object_file_loads(tmp_path):
    cc = link.find_compiler()
    if cc is None:
        pytest.skip("no C compiler")
    src = tmp_path / "k.c"
    src.write_text(SLOTS_C)
    subprocess.run([*cc, "-c", "-fPIC", "-o", str(tmp_path / "k.o"), str(src)], check=True)
    module = rt.load_module(tmp_path / "k.o")
    assert module["fused_add"]() is None


def test_arm_object_file_is_refused(artifacts, tmp_path):
    if binary.host_machine() != "x86-64":
        pytest.skip("message is written for an x86-64 host")
    with tarfile.open(artifacts / "wrn-arm32" / "wrn_8s_g0-rasp.tar") as archive:
        stream = archive.extractfile("lib.o")
        assert stream is not None
        (tmp_path / "lib.o").write_bytes(stream.read())
    with pytest.raises(ModuleLoadError, match=r"built for arm \(ARM 32-bit\), this machine is"):
        rt.load_module(tmp_path / "lib.o")


def _iris_blob(artifacts: Path) -> bytes:
    with tarfile.open(artifacts / "iris-factory" / "deploy_lib.tar") as archive:
        stream = archive.extractfile("devc.o")
        assert stream is not None
        elf = binary.ElfFile(stream.read(), "devc.o")
    (symbol,) = [s for s in elf.symbols(dynamic=False) if s.name == "__tvm_dev_mblob"]
    return elf.read_symbol(symbol)


def test_blob_read_from_object_without_loading(artifacts):
    data = _iris_blob(artifacts)
    (nbytes,) = struct.unpack_from("<Q", data)
    assert nbytes + 8 <= len(data)
    parsed = blob.parse_module_blob(data, "iris blob")
    assert [m.type_key if m else "_lib" for m in parsed.modules] == ["GraphExecutorFactory", "_lib"]
    assert (parsed.row_ptr, parsed.children) == ([0, 1, 1], [1])


# -- blob parsing ----------------------------------------------------------------------------


def _write_blob(entries: list[tuple[str, bytes]]) -> bytes:
    payload = ByteWriter()
    payload.u64(len(entries))
    for key, data in entries:
        payload.string(key)
        payload.raw(data)
    out = ByteWriter()
    out.u64(len(payload.buffer))
    out.raw(payload.buffer)
    return bytes(out.buffer)


def _tree(row_ptr: list[int], children: list[int]) -> bytes:
    w = ByteWriter()
    for vec in (row_ptr, children):
        w.u64(len(vec))
        for v in vec:
            w.u64(v)
    return bytes(w.buffer)


@pytest.fixture
def test_kind():
    """A blob kind ``tvmrt_test`` whose payload is one string (the module's type key)."""

    def load(reader: ByteReader) -> PyModule:
        return PyModule(type_key=reader.string("test payload"))

    register_func("runtime.module.loadbinary_tvmrt_test", load, override=True)
    yield "tvmrt_test"
    remove_global_func("runtime.module.loadbinary_tvmrt_test")


def _payload(text: str) -> bytes:
    w = ByteWriter()
    w.string(text)
    return bytes(w.buffer)


def test_blob_with_import_tree(test_kind):
    data = _write_blob(
        [(test_kind, _payload("A")), ("_lib", b""), ("_import_tree", _tree([0, 1, 1], [1]))]
    )
    lib = PyModule(type_key="library")
    root = blob.assemble_modules(blob.parse_module_blob(data, "blob"), lib)
    assert root.type_key == "A"
    assert root.imported_modules == [lib]


def test_old_flat_blob_makes_the_library_root(test_kind):
    data = _write_blob([(test_kind, _payload("A")), (test_kind, _payload("B"))])
    lib = PyModule(type_key="library")
    root = blob.assemble_modules(blob.parse_module_blob(data, "blob"), lib)
    assert root is lib
    assert [m.type_key for m in root.imported_modules] == ["A", "B"]


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("vulkan", r"imports a 'vulkan' module \(Vulkan GPU kernels\); tvmrt has no Vulkan"),
        ("metal", r"imports a 'metal' module \(Metal GPU kernels\); tvmrt has no Metal backend"),
        ("const_loader", r"'const_loader' module \(constants for external codegen"),
        ("metadata", r"'metadata' module \(constants for external codegen"),
        ("relax.VMExecutable", r"Relax virtual machine program"),
        ("mystery", r"kind 'mystery' that tvmrt has no loader for \(no global function "),
    ],
)
def test_blob_kinds_without_loader(kind, message):
    data = _write_blob([(kind, b"\x00" * 16), ("_lib", b"")])
    with pytest.raises(ModuleLoadError, match=message):
        blob.parse_module_blob(data, "blob")


@pytest.mark.parametrize(
    ("tree", "message"),
    [
        (([0, 1], [1]), r"row_ptr has 2 entries for 2 modules"),
        (([0, 1, 1], [5]), r"child index 5 is out of range"),
        (([0, 1, 2], [1, 0]), r"imports itself through a cycle"),
        (([1, 1, 1], []), r"row_ptr must run from 0 to 0"),
        (([0], []), r"row_ptr has 1 entries for 2 modules"),
    ],
    ids=["short", "range", "cycle", "start", "one"],
)
def test_bad_import_tree(test_kind, tree, message):
    data = _write_blob([(test_kind, _payload("A")), ("_lib", b""), ("_import_tree", _tree(*tree))])
    with pytest.raises(ModuleLoadError, match=message):
        blob.parse_module_blob(data, "blob")


def test_blob_trailing_bytes_and_double_lib(test_kind):
    data = _write_blob([("_lib", b"\x00\x01")])
    with pytest.raises(ModuleLoadError, match=r"2 bytes are left over"):
        blob.parse_module_blob(data, "blob")
    data = _write_blob([("_lib", b""), ("_lib", b"")])
    with pytest.raises(ModuleLoadError, match=r"more than one '_lib' entry"):
        blob.parse_module_blob(data, "blob")


def test_blob_truncated_length():
    with pytest.raises(ModuleLoadError, match=r"^blob: module blob claims 100 bytes"):
        blob.parse_module_blob(struct.pack("<Q", 100) + b"\x00" * 8, "blob")


def test_loader_exception_becomes_module_load_error():
    def broken(reader: ByteReader) -> PyModule:
        raise KeyError("oops")

    register_func("runtime.module.loadbinary_tvmrt_broken", broken, override=True)
    try:
        with pytest.raises(ModuleLoadError, match=r"module 0 \('tvmrt_broken'\) .* is corrupt"):
            blob.parse_module_blob(_write_blob([("tvmrt_broken", b"")]), "blob")
    finally:
        remove_global_func("runtime.module.loadbinary_tvmrt_broken")


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_fuzz_real_blob_raises_only_tvmrt_errors(artifacts, data):
    original = _iris_blob(artifacts)
    mutated = bytearray(original)
    for _ in range(data.draw(st.integers(1, 4), label="flips")):
        where = data.draw(st.integers(0, len(mutated) - 1), label="offset")
        mutated[where] = data.draw(st.integers(0, 255), label="byte")
    cut = data.draw(st.integers(0, len(mutated)), label="truncate at")
    if data.draw(st.booleans(), label="truncate"):
        mutated = mutated[:cut]
    with contextlib.suppress(TVMError):
        blob.parse_module_blob(bytes(mutated), "blob")


def test_tvm_main_without_symbol_size(tmp_path):
    # an assembler-defined __tvm_main__ has no recorded size: read up to the NUL
    source = SLOTS_C + (
        '__asm__(".globl __tvm_main__\\n.section .rodata\\n__tvm_main__: .asciz \\"fused_add\\"\\n'
        '.text\\n");\n'
    )
    path = build_shared(source, tmp_path, "nosize")
    elf = binary.ElfFile.from_path(path)
    (main,) = [s for s in elf.symbols() if s.name == "__tvm_main__"]
    assert main.size == 0
    module = rt.load_module(path)
    assert module.entry_func.name == "fused_add"
