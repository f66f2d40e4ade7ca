"""The ``opencl`` module kind of TVM blobs and the backend-neutral launch logic (no driver needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.fixtures import artifact_folder
from tvmrt import runtime
from tvmrt.binfmt.stream import ByteReader, ByteWriter
from tvmrt.error import KernelError, ModuleLoadError
from tvmrt.runtime.launch import FunctionInfo, LaunchConfig, read_function_table
from tvmrt.runtime.loaders.opencl import OpenCLModule, load_opencl_binary
from tvmrt.runtime.registry import get_global_func

HANDLE = runtime.DataType("handle")


def _relay016() -> Path:
    """relay016/, the project's own TVM 0.16 build (tests/fixtures/build_relay016.py)."""
    return artifact_folder("relay016")


def _opencl_module(lib: runtime.Module) -> OpenCLModule:
    found = [m for m in _walk(lib) if m.type_key == "opencl"]
    assert len(found) == 1
    assert isinstance(found[0], OpenCLModule)
    return found[0]


def _walk(mod: runtime.Module) -> list[runtime.Module]:
    out = [mod]
    for m in mod.imported_modules:
        out.extend(_walk(m))
    return out


@pytest.mark.parametrize(("case", "so"), [("opencl-factory", "deploy.so"), ("opencl-factory", "dense.so"), ("hetero-opencl-cpu", "deploy.so")])  # fmt: skip
def test_function_table_matches_the_manifest(case: str, so: str) -> None:
    manifest = json.loads((_relay016() / "manifest.json").read_text())
    entries = manifest["cases"][case]["files"][so]["dev_blob"]["entries"]
    (want,) = [e for e in entries if e["key"] == "opencl"]
    mod = _opencl_module(runtime.load_module(str(_relay016() / case / so)))
    assert mod.format == want["fmt"] == "cl"
    assert set(mod.table) == {f["key"] for f in want["fmap"]}
    for f in want["fmap"]:
        info = mod.table[f["key"]]
        assert info.name == f["key"]  # TVM writes the name empty; the key names the kernel
        assert [[t.type_code, t.bits, t.lanes] for t in info.arg_types] == f["arg_types"]
        assert list(info.launch_param_tags) == f["launch_param_tags"]
        assert mod.implements_function(f["key"])
    kernels = "kernels.cl" if so == "deploy.so" else "dense_kernels.cl"
    assert mod.get_source("cl") == (_relay016() / case / kernels).read_text()


def test_repeated_tags_last_value_wins() -> None:
    tags = ("blockIdx.z", "blockIdx.y", "blockIdx.x") + (
        "threadIdx.z",
        "threadIdx.y",
        "threadIdx.x",
    ) * 3
    cfg = LaunchConfig.from_info(FunctionInfo("k", (HANDLE,), tags), "k")
    assert cfg.work_dim == 3
    assert cfg.num_launch_args == 12
    work = cfg.extract((2, 3, 4, 9, 9, 9, 9, 9, 9, 1, 5, 6))
    assert work.grid == (4, 3, 2)
    assert work.block == (6, 5, 1)
    assert work.global_size == (24, 15, 2)
    assert work.local_size == (6, 5, 1)


def test_dynamic_shared_memory_and_zero_extents() -> None:
    info = FunctionInfo("k", (HANDLE,), ("blockIdx.x", "threadIdx.x", "tir.use_dyn_shared_memory"))
    cfg = LaunchConfig.from_info(info, "k")
    work = cfg.extract((0, 64, 4096))
    assert (work.grid, work.block, work.dyn_shared_memory, work.work_dim) == (
        (1, 1, 1),
        (64, 1, 1),
        4096,
        1,
    )
    bad = FunctionInfo("k", (), ("tir.use_dyn_shared_memory", "blockIdx.x"))
    with pytest.raises(ModuleLoadError, match="must be the last tag"):
        LaunchConfig.from_info(bad, "k")


def _blob(
    fmt: str, kernels: dict[str, tuple[list[tuple[int, int, int]], list[str]]], data: bytes
) -> bytes:
    w = ByteWriter()
    w.string(fmt)
    w.u64(len(kernels))
    for name, (types, tags) in kernels.items():
        w.string(name)
        w.string("")
        w.u64(len(types))
        for code, bits, lanes in types:
            w.u8(code)
            w.u8(bits)
            w.u16(lanes)
        w.strings(tags)
    w.string(data)
    return bytes(w.buffer)


def test_loader_is_the_registered_module_kind() -> None:
    loader = get_global_func("runtime.module.loadbinary_opencl")
    blob = _blob(
        "cl",
        {"k": ([(3, 64, 1), (0, 32, 1)], ["blockIdx.x", "threadIdx.x"])},
        b"__kernel void k() {}",
    )
    mod = loader(ByteReader(blob, "blob", ModuleLoadError))
    assert isinstance(mod, OpenCLModule)
    assert mod.type_key == "opencl"
    assert mod.table["k"].handle_args == (True, False)
    with pytest.raises(KernelError, match="takes 2 arguments and 2 launch parameters, got 3"):
        mod["k"](1, 2, 3)


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (_blob("cl", {"k": ([], ["warpIdx.x"])}, b""), "launch param tag 'warpIdx.x'"),
        (_blob("cl", {"k": ([(3, 64, 1)], [])}, b"")[:-3], "truncated|claims"),
        (_blob("cl", {}, b"\xff\xfe source"), "not text"),
        (_blob("", {}, b""), "format '' is not one tvmrt loads"),
        (_blob("spirv", {}, b""), "format 'spirv' is not one"),
        (b"\x02\x00\x00\x00\x00\x00\x00\x00cl" + b"\xff" * 8, "number of kernels"),
    ],
)
def test_hostile_opencl_payloads(blob: bytes, message: str) -> None:
    with pytest.raises(ModuleLoadError, match=message):
        load_opencl_binary(ByteReader(blob, "opencl module", ModuleLoadError))


def test_function_table_reader_round_trip() -> None:
    blob = _blob("cl", {"a": ([(2, 32, 1)], ["blockIdx.x"]), "b": ([], [])}, b"")
    reader = ByteReader(blob, "t", ModuleLoadError)
    assert reader.string() == "cl"
    table = read_function_table(reader)
    assert table["a"].arg_types == (runtime.DataType("float32"),)
    assert table["b"].launch_param_tags == ()


def test_reading_an_older_kernel_table_leaves_no_garbage_cycle() -> None:
    # the table is tried in TVM >= 0.21's layout first; the failed try's exception was kept
    # with its traceback, a cycle through the frame that held it, which kept the callers'
    # frames (and the files they had open) alive until a collection
    import gc

    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        runtime.load_module(str(_relay016() / "opencl-factory" / "dense.so"))
        gc.collect()
        left = [o for o in gc.garbage if isinstance(o, ModuleLoadError)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert left == []
