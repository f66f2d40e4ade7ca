"""The CUDA backend and module against a recording stand-in for libcuda (no GPU needed).

The stand-in (tests/support/fake_libcuda.c) checks what the real driver checks for
marshalling (a current context on the calling thread, copies inside allocations, PTX
NUL-terminated, the parameter sizes of the kernel's PTX ``.entry``) and logs each call:
these tests prove the calls tvmrt makes, never what a kernel computes.
"""

from __future__ import annotations

import importlib
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from support.fake_cuda import FakeLog, build, stand_in_backend
from tvmrt import runtime
from tvmrt.binfmt.stream import ByteReader, ByteWriter
from tvmrt.error import ArrayError, DeviceUnavailableError, KernelError, ModuleLoadError
from tvmrt.runtime.backends import _cuda_driver
from tvmrt.runtime.backends.cuda import CUDADeviceAPI, backend
from tvmrt.runtime.device_api import find_storage, get_device_api
from tvmrt.runtime.launch import FunctionInfo, install_device_workspace
from tvmrt.runtime.loaders.blob import parse_module_blob
from tvmrt.runtime.loaders.cuda import CUDAModule, kernel_timer, load_cuda_binary
from tvmrt.runtime.loaders.opencl import set_device

device_table = importlib.import_module("tvmrt.runtime.device")
CUDA = int(runtime.DLDeviceType.kDLCUDA)
PTX = """//
.version 8.0
.target sm_75
.address_size 64

.visible .entry add_one_kernel(
\t.param .u64 add_one_kernel_param_0,
\t.param .u64 add_one_kernel_param_1,
\t.param .u32 add_one_kernel_param_2
)
{
\tret;
}

.visible .entry scale_kernel(
\t.param .u64 scale_kernel_param_0,
\t.param .f32 scale_kernel_param_1,
\t.param .u64 scale_kernel_param_2
)
{
\tret;
}
"""
T = runtime.DataType
ADD_ONE = FunctionInfo(
    "add_one_kernel", (T("handle"), T("handle"), T("int32")), ("blockIdx.x", "threadIdx.x")
)
SCALE = FunctionInfo(
    "scale_kernel",
    (T("handle"), T("float32"), T("int64")),
    ("blockIdx.y", "blockIdx.x", "threadIdx.x", "tir.use_dyn_shared_memory"),
)


@pytest.fixture(scope="module")
def fake_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("fakecuda"))


@pytest.fixture
def fake(fake_lib: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLog]:
    with stand_in_backend(fake_lib, monkeypatch) as log:
        log.reset()
        try:
            yield log
        finally:
            set_device(CUDA, 0)


def _module(*infos: FunctionInfo, data: str = PTX) -> CUDAModule:
    return CUDAModule("ptx", data.encode(), {i.name: i for i in infos}, "test module")


def test_attributes_follow_the_driver(fake: FakeLog) -> None:
    dev = runtime.cuda(0)
    assert dev.exist
    assert not runtime.cuda(1).exist
    assert dev.compute_version == "7.5"
    assert dev.device_name == "Fake GPU sm_75"
    assert (dev.warp_size, dev.max_threads_per_block, dev.multi_processor_count) == (32, 1024, 80)
    assert dev.max_thread_dimensions == [1024, 1024, 64]
    with pytest.raises(DeviceUnavailableError, match=r"cuda\(1\) does not exist.*reports 1 GPU"):
        runtime.empty((2,), "float32", runtime.cuda(1))


def test_copies_round_trip_and_wait_only_for_host_memory(fake: FakeLog) -> None:
    x = np.arange(24, dtype="float32").reshape(4, 6)
    a = runtime.array(x, runtime.cuda())
    b = runtime.empty((4, 6), "float32", runtime.cuda())
    fake.reset()
    a.copyto(b)
    assert fake.lines() == ["cuMemcpyDtoDAsync 96 stream=0"]  # queued, not waited for
    np.testing.assert_array_equal(b.numpy(), x)
    assert fake.lines()[1:] == ["cuMemcpyDtoHAsync 96 stream=0", "cuStreamSynchronize 0"]
    api = device_table.get_device_api(runtime.cuda())
    storage = find_storage(CUDA, a.data_ptr)
    assert storage is not None
    assert storage.nbytes == 96
    api.copy_from_host(storage, 8, np.array([100.0, 200.0], "float32"))
    out = np.empty(4, "float32")
    api.copy_to_host(storage, 4, out)
    np.testing.assert_array_equal(out, [1.0, 100.0, 200.0, 4.0])
    with pytest.raises(ArrayError, match="do not fit"):
        api.copy_to_host(storage, 90, out)


def test_streams_are_per_thread_and_non_blocking(fake: FakeLog) -> None:
    dev = runtime.cuda()
    stream = dev.create_raw_stream()
    assert "cuStreamCreate flags=1" in fake.lines()
    dev.set_raw_stream(stream)
    fake.reset()
    a = runtime.array(np.ones(4, "float32"), dev)
    assert "cuMemcpyHtoDAsync 16 stream=user" in fake.lines()
    seen: list[str] = []

    def other() -> None:  # another thread: its own context activation and default stream
        fake.reset()
        a.numpy()
        seen.extend(fake.lines())

    worker = threading.Thread(target=other)
    worker.start()
    worker.join()
    assert seen[0] == "cuCtxSetCurrent"
    assert "cuMemcpyDtoHAsync 16 stream=0" in seen
    dev.sync()
    assert fake.lines()[-1] == "cuStreamSynchronize user"
    dev.set_raw_stream(0)
    dev.free_raw_stream(stream)


def test_workspace_pool_reuses_freed_blocks(fake: FakeLog) -> None:
    api = device_table.get_device_api(runtime.cuda())
    first = api.alloc_workspace(runtime.cuda(), 1000)
    assert first.nbytes == 4096  # page-rounded, as TVM's pool
    api.free_workspace(first)
    fake.reset()
    again = api.alloc_workspace(runtime.cuda(), 3000)
    assert again is first
    assert fake.lines() == []
    bigger = api.alloc_workspace(runtime.cuda(), 5000)
    assert bigger.nbytes == 8192
    assert fake.lines() == ["cuMemAlloc 8192"]


def test_launch_packs_arguments_as_tvm(fake: FakeLog) -> None:
    mod = _module(ADD_ONE, SCALE)
    a = runtime.array(np.zeros(1000, "float32"), runtime.cuda())
    b = runtime.empty((1000,), "float32", runtime.cuda())
    pa, pb = (int(x.data_ptr) for x in (a, b))
    fake.reset()
    mod["add_one_kernel"](pa, pb, 1000, 4, 256)
    lines = fake.lines()
    assert lines[0] == f"cuModuleLoadData ptx {len(PTX)}"  # NUL-terminated by tvmrt
    assert lines[1] == "cuModuleGetFunction add_one_kernel params=3"
    assert lines[2] == (
        "cuLaunchKernel add_one_kernel grid=4,1,1 block=256,1,1 smem=0 stream=0 "
        "args= dev dev u32:1000"
    )
    fake.reset()
    # float32 narrowed to its 32-bit pattern; int64 kept; dyn. shared memory >= 48 KiB set
    mod["scale_kernel"](pa, 1.5, -2, 3, 5, 64, 65536)
    f32 = struct.unpack("<I", struct.pack("<f", 1.5))[0]
    assert fake.lines()[-2:] == [
        "cuFuncSetAttribute scale_kernel 8=65536",
        "cuLaunchKernel scale_kernel grid=5,3,1 block=64,1,1 smem=65536 stream=0 "
        f"args= dev u32:{f32} u64:{2**64 - 2}",
    ]
    fake.reset()
    mod["add_one_kernel"](pa, None, 7, 0, 32)  # null handle; a zero extent stays 1
    assert fake.lines() == [
        "cuLaunchKernel add_one_kernel grid=1,1,1 block=32,1,1 smem=0 stream=0 args= dev u64:0 u32:7"
    ]
    with pytest.raises(KernelError, match="argument 2 must be a int32 value, got 'x'"):
        mod["add_one_kernel"](pa, pb, "x", 1, 1)


def test_launch_from_another_thread_activates_the_context(fake: FakeLog) -> None:
    mod = _module(ADD_ONE)
    mod["add_one_kernel"](None, None, 1, 1, 1)
    errors: list[BaseException] = []

    def other() -> None:
        try:
            mod["add_one_kernel"](None, None, 2, 1, 1)
        except BaseException as exc:  # the stand-in refuses a thread without a context
            errors.append(exc)

    fake.reset()
    worker = threading.Thread(target=other)
    worker.start()
    worker.join()
    assert not errors
    assert fake.lines()[0] == "cuCtxSetCurrent"


def test_kernel_timer_and_global_barrier(fake: FakeLog) -> None:
    mod = _module(ADD_ONE)
    with kernel_timer() as timer:
        mod["add_one_kernel"](None, None, 1, 1, 1)
        mod["add_one_kernel"](None, None, 1, 1, 1)
    assert timer.times == [("add_one_kernel", 0.25)] * 2
    fake.reset()
    mod["__tvm_prepare_global_barrier"]()
    assert fake.lines()[-2:] == ["cuModuleGetGlobal __tvm_global_barrier_state", "cuMemsetD32 0 x1"]


def test_hold_stream_queues_a_gate_before_the_launches(fake: FakeLog) -> None:
    mod = _module(ADD_ONE)
    api = get_device_api(runtime.cuda())
    assert isinstance(api, CUDADeviceAPI)
    mod["add_one_kernel"](None, None, 1, 1, 1)  # loads the module outside the hold
    fake.reset()
    start = time.perf_counter()
    with kernel_timer() as timer, api.hold_stream(runtime.cuda()):
        mod["add_one_kernel"](None, None, 1, 1, 1)
    lines = fake.lines()
    assert lines[0] == "cuLaunchHostFunc stream=0"  # the stream waits for the block's exit
    assert lines[2].startswith("cuLaunchKernel add_one_kernel")  # after the start event
    assert lines[-2:] == ["cuStreamSynchronize 0", "cuEventElapsedTime"]
    assert timer.times == [("add_one_kernel", 0.25)]
    assert time.perf_counter() - start < 5  # released on exit, not by the gate's timeout


def test_a_wait_inside_a_hold_lets_the_hold_go(fake: FakeLog) -> None:
    """A copy to host memory (or a sync) inside ``hold_stream`` would wait for the held
    stream: the backend lets the hold go first instead of waiting out its timeout."""
    api = get_device_api(runtime.cuda())
    assert isinstance(api, CUDADeviceAPI)
    arr = runtime.array(np.arange(4, dtype="float32"), runtime.cuda())
    start = time.perf_counter()
    with api.hold_stream(runtime.cuda(), timeout=30):
        arr.numpy()
        runtime.cuda().sync()
    assert time.perf_counter() - start < 5


def test_cooperative_launch_flag(fake: FakeLog) -> None:
    info = FunctionInfo(
        "add_one_kernel", ADD_ONE.arg_types, ("tirx.use_cooperative_launch", "blockIdx.x")
    )
    _module(info)["add_one_kernel"](None, None, 1, 8)
    assert fake.lines()[-1].startswith("cuLaunchCooperativeKernel add_one_kernel grid=8,1,1")


def test_ptx_newer_than_the_driver_is_refused_naming_both(fake: FakeLog) -> None:
    fake.config(driver=12040)
    _cuda_driver._driver.clear()  # the driver version is read once, at load
    device_table.register_device_api(CUDA, backend(), override=True)
    mod = _module(ADD_ONE, data=PTX.replace(".version 8.0", ".version 9.0"))
    with pytest.raises(
        ModuleLoadError, match=r"ISA version 9\.0, which needs CUDA 13\.0, newer than .*CUDA 12\.4"
    ):
        mod["add_one_kernel"](None, None, 1, 1, 1)
    assert not any(line.startswith("cuModuleLoadData") for line in fake.lines())


def _cubin(sm: int) -> bytes:
    head = bytearray(64)
    head[:4] = b"\x7fELF"
    head[4], head[5], head[8] = 2, 1, 8
    struct.pack_into("<H", head, 18, 190)
    struct.pack_into("<I", head, 48, (sm << 8) | 4)
    return bytes(head)


def test_sass_for_another_sm_is_refused_naming_both(fake: FakeLog) -> None:
    mod = CUDAModule("cubin", _cubin(90), {"add_one_kernel": ADD_ONE}, "test module")
    assert mod.image.summary() == "SASS sm_90"
    with pytest.raises(ModuleLoadError, match=r"SASS sm_90 only.*this GPU, sm_75"):
        mod["add_one_kernel"](None, None, 1, 1, 1)
    fake.config(sm=86)  # same major, higher minor: runs
    ok = CUDAModule("cubin", _cubin(80), {"add_one_kernel": ADD_ONE}, "test module")
    device_table.register_device_api(CUDA, backend(), override=True)
    ok["add_one_kernel"](None, None, 1, 1, 1)
    assert "cuModuleLoadData binary" in fake.lines()


def test_missing_driver_is_a_named_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_cuda_driver.LIBRARY_ENV, "/nonexistent/libcuda.so.1")
    monkeypatch.setattr(_cuda_driver, "_driver", [])
    api = backend()
    assert api.attribute(runtime.cuda(), "exist") is False
    with pytest.raises(DeviceUnavailableError, match="cannot load the NVIDIA driver library"):
        api.alloc(runtime.cuda(), 16)


def _entry(fmt: str, infos: list[FunctionInfo], data: bytes, extra: bool) -> bytes:
    w = ByteWriter()
    w.string(fmt)
    w.u64(len(infos))
    for info in infos:
        w.string(info.name)
        w.string("")  # old artifacts leave the name empty: the key names the kernel
        w.u64(len(info.arg_types))
        for t in info.arg_types:
            w.u8(t.type_code)
            w.u8(t.bits)
            w.u16(t.lanes)
        w.strings(list(info.launch_param_tags))
        if extra:
            w.u64(len(info.arg_types))
            for _ in info.arg_types:
                w.i32(0)
    w.string(data)
    return bytes(w.buffer)


@pytest.mark.parametrize("extra", [False, True], ids=["tvm<=0.20", "tvm-ffi"])
def test_blob_entry_both_layouts(extra: bool) -> None:
    blob = _entry("ptx", [ADD_ONE, SCALE], PTX.encode(), extra) + b"tail"
    reader = ByteReader(blob, "blob", ModuleLoadError)
    mod = load_cuda_binary(reader)
    assert reader.remaining == 4  # the legacy blob goes on after the entry
    assert mod.type_key == "cuda"
    assert mod.format == "ptx"
    assert mod.table["scale_kernel"].arg_types == SCALE.arg_types
    assert mod.table["add_one_kernel"].arg_extra_tags == ((0, 0, 0) if extra else ())
    assert mod.image.summary() == "PTX ISA 8.0 for sm_75"
    assert mod.get_source().startswith("//\n.version 8.0")


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (_entry("cu", [], b"", False), "CUDA C source, which needs the CUDA toolkit"),
        (_entry("cuda", [], b"", False), "format 'cuda' is CUDA C source"),
        (_entry("ptx", [], b"not ptx", False), "neither PTX"),
        (
            _entry("ptx", [FunctionInfo("k", (T("int8"),), ())], PTX.encode(), False),
            "cannot handle argument 0 of type int8",
        ),
        (
            _entry("ptx", [FunctionInfo("k", (T("float16"),), ())], PTX.encode(), False),
            "type float16 as a device function argument",
        ),
        (_entry("fatbin", [], struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 4096), False), "past"),
    ],
)
def test_hostile_or_unsupported_entries(blob: bytes, message: str) -> None:
    with pytest.raises(ModuleLoadError, match=message):
        load_cuda_binary(ByteReader(blob, "cuda entry", ModuleLoadError))


def test_tensor_map_arguments_are_refused() -> None:
    w = ByteReader(_entry("ptx", [ADD_ONE], PTX.encode(), True), "e", ModuleLoadError)
    raw = bytearray(w._view)  # flip the last extra tag to 1 (a TMA tensor map)
    at = raw.index(PTX.encode()) - 8 - 4
    raw[at] = 1
    with pytest.raises(ModuleLoadError, match="TMA tensor map"):
        load_cuda_binary(ByteReader(bytes(raw), "e", ModuleLoadError))


def test_separate_files_with_meta(tmp_path: Path) -> None:
    (tmp_path / "dev.ptx").write_text(PTX)
    meta = {
        "tvm_version": "0.1.0",
        "func_info": {
            "add_one_kernel": {
                "name": "",
                "arg_types": ["handle", "handle", "int32"],
                "thread_axis_tags": ["blockIdx.x", "threadIdx.x"],
            }
        },
    }
    import json

    (tmp_path / "dev.tvm_meta.json").write_text(json.dumps(meta))
    mod = runtime.load_module(str(tmp_path / "dev.ptx"))
    assert isinstance(mod, CUDAModule)
    assert mod.table["add_one_kernel"] == ADD_ONE
    (tmp_path / "bad.ptx").write_text(PTX)
    with pytest.raises(ModuleLoadError, match=r"'bad\.tvm_meta\.json' is missing"):
        runtime.load_module(str(tmp_path / "bad.ptx"))


def test_separate_files_are_read_as_the_blob_entry_is(tmp_path: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    (tmp_path / "k.ptx").write_text(PTX)
    os.mkfifo(tmp_path / "k.tvm_meta.json")  # a FIFO blocked the reader forever
    code = (
        "from tvmrt import runtime\n"
        f"try: runtime.load_module({str(tmp_path / 'k.ptx')!r})\n"
        "except Exception as e: print(type(e).__name__ + ': ' + str(e))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout.strip()
    meta = tmp_path / "k.tvm_meta.json"
    assert out == (
        f"ModuleLoadError: CUDA kernel table {meta} is not a regular file (a FIFO); expected a file"
    )
    (tmp_path / "wide.ptx").write_text(PTX)
    info = {"k": {"name": "k", "arg_types": ["handle"] * 2000, "thread_axis_tags": []}}
    (tmp_path / "wide.tvm_meta.json").write_text(json.dumps({"func_info": info}))
    with pytest.raises(ModuleLoadError, match=r"kernel 'k' has 2000 arguments \(at most 1024\)"):
        runtime.load_module(str(tmp_path / "wide.ptx"))  # as the C runtime's limit


def test_backend_workspace_calls_reach_the_pool(fake: FakeLog) -> None:
    import ctypes

    from tvmrt.runtime.kernel_services import native_library

    install_device_workspace()
    lib = native_library()
    alloc, free = lib.TVMBackendAllocWorkspace, lib.TVMBackendFreeWorkspace
    alloc.restype, alloc.argtypes = (
        ctypes.c_void_p,
        [ctypes.c_int] * 2 + [ctypes.c_uint64] + [ctypes.c_int] * 2,
    )
    free.restype, free.argtypes = ctypes.c_int, [ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    fake.reset()
    first = alloc(CUDA, 0, 3000, 2, 32)
    assert first
    assert free(CUDA, 0, first) == 0
    again = alloc(CUDA, 0, 100, 2, 32)
    assert again == first  # reused, not reallocated:
    assert [line for line in fake.lines() if "cuMem" in line] == ["cuMemAlloc 4096"]
    assert free(CUDA, 0, again) == 0


@pytest.mark.parametrize("extra", [False, True], ids=["tvm<=0.20", "tvm-ffi-0.21"])
@pytest.mark.parametrize("tree", [False, True], ids=["pre-2020", "import-tree"])
def test_cuda_entry_inside_a_module_blob(extra: bool, tree: bool) -> None:
    entry = _entry("ptx", [ADD_ONE, SCALE], PTX.encode(), extra)
    w = ByteWriter()
    if tree:  # TVM 0.7-0.20: _lib, the cuda module, then the import tree (_lib imports it)
        w.u64(3)
        w.string("_lib")
        w.string("cuda")
        w.raw(entry)
        w.string("_import_tree")
        for vec in ([0, 1, 1], [1]):
            w.u64(len(vec))
            for v in vec:
                w.u64(v)
    else:  # before apache/tvm#4532: the imported modules only
        w.u64(1)
        w.string("cuda")
        w.raw(entry)
    payload = bytes(w.buffer)
    parsed = parse_module_blob(struct.pack("<Q", len(payload)) + payload, "__tvm_dev_mblob")
    (mod,) = [m for m in parsed.modules if m is not None]
    assert isinstance(mod, CUDAModule)
    assert set(mod.table) == {"add_one_kernel", "scale_kernel"}
    assert parsed.has_import_tree == tree
