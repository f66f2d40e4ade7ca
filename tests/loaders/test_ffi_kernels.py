"""tvm-ffi kernel libraries (TVM >= 0.21): loading, ABI detection, graphs over real kernels.

Tier: cpu. Fresh kernels are built with ``apache-tvm`` (test extra) in a subprocess, so
this process never imports ``tvm`` (as in deployment: no symbol interposition from
libtvm_ffi). Crafted libraries for the other ABI versions are built with the system C
compiler. Each graph runs with the default thread count, with one thread, and (one
subprocess) under ``TVM_NUM_THREADS=1``.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tvmrt
import tvmrt.runtime as rt
from tvmrt.binfmt import abi, binary
from tvmrt.binfmt.stream import ByteWriter
from tvmrt.contrib import graph_executor
from tvmrt.error import KernelError, ModuleLoadError
from tvmrt.runtime import kernel_services
from tvmrt.runtime import ndarray as nd
from tvmrt.runtime.loaders import FFILibraryModule, link
from tvmrt.runtime.loaders.opencl import current_device
from tvmrt.testing import GraphBuilder

BUILD_SCRIPT = r"""
import sys
import tvm
from tvm import te, topi

OUT = sys.argv[1]
TARGET = {"kind": "llvm", "mcpu": "x86-64-v2"}  # portable; the CLI string form is refused


def named(f, name):
    return f.with_attr("global_symbol", name)


def add(name="add", n=1024, dtype="float32"):
    a = te.placeholder((n,), dtype, name="A")
    b = te.placeholder((n,), dtype, name="B")
    c = te.compute((n,), lambda i: a[i] + b[i], name="C")
    return named(te.create_prim_func([a, b, c]), name)


def conv_relu():  # a parallel outer loop, a vectorised inner loop
    data = te.placeholder((1, 8, 16, 16), "float32", name="data")
    weight = te.placeholder((16, 8, 3, 3), "float32", name="weight")
    bias = te.placeholder((16,), "float32", name="bias")
    conv = topi.nn.conv2d_nchw(data, weight, stride=1, padding=1, dilation=1)
    out = topi.nn.relu(conv + topi.reshape(bias, (1, 16, 1, 1)))
    f = named(te.create_prim_func([data, weight, bias, out]), "conv_relu")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"conv_relu": f}))
    sch.work_on("conv_relu")
    for block in ["pad_temp", "T_reshape", "T_add"]:
        sch.compute_inline(sch.get_sblock(block))
    n, co, oh, ow, rc, ry, rx = sch.get_loops(sch.get_sblock("conv2d_nchw"))
    ow_o, ow_i = sch.split(ow, factors=[None, 8])
    sch.reorder(n, co, oh, ow_o, rc, ry, rx, ow_i)
    sch.parallel(sch.fuse(n, co))
    sch.vectorize(ow_i)
    sch.decompose_reduction(sch.get_sblock("conv2d_nchw"), rc)
    return sch.mod["conv_relu"]


def bigbuf(name="bigbuf"):  # a 2 MiB intermediate: TVMBackendAllocWorkspace
    a = te.placeholder((512, 1024), "float32", name="A")
    t = te.compute((512, 1024), lambda i, j: a[i, j] * 2.0, name="T")
    b = te.compute((512, 1024), lambda i, j: t[511 - i, j] + 1.0, name="B")
    return named(te.create_prim_func([a, b]), name)


def select():  # bool and float16 arguments
    cond = te.placeholder((64,), "bool", name="cond")
    x = te.placeholder((64,), "float16", name="x")
    y = te.placeholder((64,), "float16", name="y")
    out = te.compute((64,), lambda i: te.if_then_else(cond[i], x[i], y[i]), name="out")
    return named(te.create_prim_func([cond, x, y, out]), "select")


def build(funcs, target, name):
    tvm.compile(tvm.IRModule(funcs), target=target).export_library(f"{OUT}/{name}.so")


build({"add": add()}, TARGET, "add")
tvm.compile(tvm.IRModule({"add": add()}), target=TARGET).export_library(f"{OUT}/add.tar")
build({"conv_relu": conv_relu(), "add4096": add("add4096", 4096)}, TARGET, "net")
build({"bigbuf": bigbuf()}, TARGET, "bigbuf")
build({"cbig": bigbuf("cbig"), "cadd": add("cadd")}, "c", "ckern")
build({"select": select(), "add16": add("add16", 64, "float16")}, TARGET, "dtypes")
"""

KERNEL_LIBS = ("add", "net", "bigbuf", "ckern", "dtypes")


@pytest.fixture(scope="session")
def kernels(tmp_path_factory) -> Path:
    """Folder with the kernel libraries, built once per session by apache-tvm."""
    prebuilt = os.environ.get("TVMRT_TEST_FFI_KERNELS")
    if prebuilt:
        return Path(prebuilt)
    if importlib.util.find_spec("tvm") is None:  # find_spec does not import it
        if os.environ.get("CI"):
            pytest.fail("apache-tvm (test extra) is missing in CI")
        pytest.skip("apache-tvm is not installed (pip install -e '.[test]')")
    if link.find_compiler() is None:
        pytest.skip("export_library needs a C compiler")
    out = tmp_path_factory.mktemp("ffi-kernels")
    script = out / "build_kernels.py"
    script.write_text(BUILD_SCRIPT)
    proc = subprocess.run(
        [sys.executable, str(script), str(out)], capture_output=True, text=True, timeout=600
    )
    if proc.returncode != 0:
        pytest.fail(f"building the kernels with apache-tvm failed:\n{proc.stderr[-4000:]}")
    return out


@pytest.fixture(params=["default", "one"], ids=["threads-default", "threads-1"])
def threads(request):
    """Run with the default pool size, then with one thread."""
    if request.param == "one":
        kernel_services.set_num_threads(1)
    yield kernel_services.num_threads()
    kernel_services.set_num_threads(0)


def load(kernels: Path, name: str) -> FFILibraryModule:
    module = rt.load_module(kernels / f"{name}.so")
    assert isinstance(module, FFILibraryModule)
    return module


def run_graph(builder: GraphBuilder, module, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    gmod = graph_executor.create(builder.to_json(), module, tvmrt.cpu(0))
    for key, value in inputs.items():
        gmod.set_input(key, value)
    gmod.run()
    return [gmod.get_output(i).numpy() for i in range(gmod.get_num_outputs())]


def conv_relu_ref(data, weight, bias):
    padded = np.pad(data, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((1, weight.shape[0], 16, 16), dtype=np.float64)
    for ky in range(3):
        for kx in range(3):
            window = padded[:, :, ky : ky + 16, kx : kx + 16]
            out += np.einsum("nchw,oc->nohw", window, weight[:, :, ky, kx])
    return np.maximum(out + bias.reshape(1, -1, 1, 1), 0)


rng = np.random.default_rng(0)


# -- ABI detection ------------------------------------------------------------------------


@pytest.mark.parametrize("name", KERNEL_LIBS)
def test_fresh_builds_classify_as_tvm_ffi(kernels, name):
    scan = abi.scan_tvm_symbols(binary.ElfFile.from_path(kernels / f"{name}.so").symbols())
    assert scan.abi == "tvm-ffi"
    assert all(f.startswith("__tvm_ffi_") for f in scan.functions)


def test_legacy_artifact_still_classifies_legacy(artifacts):
    elf = binary.ElfFile.from_path(artifacts / "mobilenet_v1" / "deploy_lib.so")
    assert abi.scan_tvm_symbols(elf.symbols()).abi == "legacy"
    module = rt.load_module(artifacts / "mobilenet_v1" / "deploy_lib.so")
    assert not isinstance(module, FFILibraryModule)


def test_symbols_and_function_names(kernels):
    net = load(kernels, "net")
    assert net.function_names == ["add4096", "conv_relu"]
    assert net.abi == "tvm-ffi"
    scan = abi.scan_tvm_symbols(binary.ElfFile.from_path(kernels / "net.so").symbols())
    assert "__TVMBackendParallelLaunch" in scan.slots
    c = abi.scan_tvm_symbols(binary.ElfFile.from_path(kernels / "ckern.so").symbols())
    assert {"TVMBackendAllocWorkspace", "TVMFFIErrorSetRaisedFromCStrParts"} <= set(c.undefined)


# -- kernels called directly --------------------------------------------------------------


def test_add_called_directly_and_through_main(kernels):
    module = load(kernels, "add")
    a, b = rng.random(1024, dtype=np.float32), rng.random(1024, dtype=np.float32)
    out = nd.empty((1024,), "float32")
    assert module["add"](nd.array(a), nd.array(b), out) is None
    np.testing.assert_allclose(out.numpy(), a + b)
    module["main"](nd.array(b), nd.array(b), out)  # __tvm_ffi_main forwards to the entry
    np.testing.assert_allclose(out.numpy(), b + b)


def test_shape_mismatch_raises_kernel_error_with_kind(kernels):
    module = load(kernels, "add")
    with pytest.raises(KernelError, match=r"^ValueError: Invalid A\.shape\[0\] on argument #0"):
        module["add"](nd.empty((8,), "float32"), nd.empty((1024,)), nd.empty((1024,)))
    with pytest.raises(KernelError, match=r"^TypeError: Mismatched .*dtype"):
        module["add"](nd.empty((1024,), "int32"), nd.empty((1024,)), nd.empty((1024,)))
    with pytest.raises(KernelError, match=r"^TypeError: .*3"):
        module["add"](nd.empty((1024,)))


def test_misaligned_tensor_is_refused_before_the_call(kernels):
    module = load(kernels, "add")
    pool = nd.empty((1025,), "float32")
    shifted = pool._create_view((1024,), relative_byte_offset=4)
    with pytest.raises(tvmrt.error.ArrayError, match=r"not 64-byte aligned"):
        module["add"](shifted, shifted, shifted)


def test_tar_export_is_linked_then_loaded(kernels, tmp_path, monkeypatch):
    monkeypatch.setenv("TVMRT_CACHE_DIR", str(tmp_path))
    module = rt.load_module(kernels / "add.tar")
    assert isinstance(module, FFILibraryModule)
    a = nd.array(np.arange(1024, dtype=np.float32))
    out = nd.empty((1024,), "float32")
    module["add"](a, a, out)
    np.testing.assert_array_equal(out.numpy(), 2 * a.numpy())


def test_same_file_loads_into_separate_instances(kernels):
    first, second = load(kernels, "add"), load(kernels, "add")
    assert first._lib._handle != second._lib._handle


# -- graphs over the kernels ----------------------------------------------------------------


def test_graph_elementwise(kernels, threads):
    b = GraphBuilder()
    x, y = b.input("x", (1024,)), b.input("y", (1024,))
    (t,) = b.op("add1", "add", [x, y], [(1024,)])
    (z,) = b.op("add2", "add", [t, y], [(1024,)])
    b.output(z)
    xv, yv = rng.random(1024, dtype=np.float32), rng.random(1024, dtype=np.float32)
    (out,) = run_graph(b, load(kernels, "add"), {"x": xv, "y": yv})
    np.testing.assert_allclose(out, xv + 2 * yv, rtol=1e-6)


@pytest.mark.slow
def test_graph_conv2d_relu_parallel_then_flattened_add(kernels, threads):
    b = GraphBuilder()
    data, w, bias = (
        b.input("data", (1, 8, 16, 16)),
        b.input("w", (16, 8, 3, 3)),
        b.input("b", (16,)),
    )
    (c,) = b.op("conv", "conv_relu", [data, w, bias], [(1, 16, 16, 16)])
    (s,) = b.op("double", "add4096", [c, c], [(1, 16, 16, 16)], flatten_data=True)
    b.output(c, s)
    dv = rng.standard_normal((1, 8, 16, 16)).astype(np.float32)
    wv = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    bv = rng.standard_normal(16).astype(np.float32)
    kernel_services.reset_stats()
    conv, doubled = run_graph(b, load(kernels, "net"), {"data": dv, "w": wv, "b": bv})
    np.testing.assert_allclose(conv, conv_relu_ref(dv, wv, bv), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(doubled, 2 * conv, rtol=1e-6)
    stats = kernel_services.stats()
    assert stats.launches >= 1
    assert (stats.serial_launches == stats.launches) == (threads == 1)


@pytest.mark.slow
@pytest.mark.parametrize(("lib", "func"), [("bigbuf", "bigbuf"), ("ckern", "cbig")])
def test_graph_large_intermediate_buffer(kernels, threads, lib, func):
    b = GraphBuilder()
    a = b.input("a", (512, 1024))
    (out,) = b.op("big", func, [a], [(512, 1024)])
    b.output(out)
    av = rng.random((512, 1024), dtype=np.float32)
    kernel_services.reset_stats()
    (result,) = run_graph(b, load(kernels, lib), {"a": av})
    np.testing.assert_allclose(result, av[::-1] * 2 + 1, rtol=1e-6)
    stats = kernel_services.stats()
    assert stats.workspace_allocs >= 1
    assert stats.workspace_allocs == stats.workspace_frees


def test_graph_target_c_elementwise(kernels, threads):
    b = GraphBuilder()
    x, y = b.input("x", (1024,)), b.input("y", (1024,))
    (z,) = b.op("cadd", "cadd", [x, y], [(1024,)])
    b.output(z)
    xv, yv = rng.random(1024, dtype=np.float32), rng.random(1024, dtype=np.float32)
    (out,) = run_graph(b, load(kernels, "ckern"), {"x": xv, "y": yv})
    np.testing.assert_allclose(out, xv + yv)


def test_graph_bool_and_float16(kernels, threads):
    b = GraphBuilder()
    cond = b.input("cond", (64,), "bool")
    x, y = b.input("x", (64,), "float16"), b.input("y", (64,), "float16")
    (s,) = b.op("sel", "select", [cond, x, y], [(64,)], dtype="float16")
    (z,) = b.op("sum", "add16", [s, y], [(64,)], dtype="float16")
    b.output(z)
    cv = rng.random(64) > 0.5
    xv, yv = rng.random(64).astype(np.float16), rng.random(64).astype(np.float16)
    (out,) = run_graph(b, load(kernels, "dtypes"), {"cond": cv, "x": xv, "y": yv})
    np.testing.assert_array_equal(out, np.where(cv, xv, yv) + yv)


def test_graph_kernel_error_names_the_node(kernels):
    b = GraphBuilder()
    x = b.input("x", (512,))
    (z,) = b.op("too_short", "add", [x, x], [(512,)])
    b.output(z)
    gmod = graph_executor.create(b.to_json(), load(kernels, "add"), tvmrt.cpu(0))
    with pytest.raises(
        KernelError,
        match=r"(?s)^node 1 'too_short' \(kernel 'add'\): ValueError: Invalid A\.shape\[0\] .*expected 1024$",
    ):
        gmod.run()


@pytest.mark.slow
def test_graphs_under_tvm_num_threads_1(kernels):
    """Every graph test again in a child process started with TVM_NUM_THREADS=1."""
    env = {**os.environ, "TVM_NUM_THREADS": "1", "TVMRT_TEST_FFI_KERNELS": str(kernels)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__,
         "-k", "graph and not tvm_num_threads"],
        capture_output=True, text=True, env=env, timeout=600, cwd=Path(__file__).parent,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout


def test_pool_follows_tvm_num_threads():
    if os.environ.get("TVM_NUM_THREADS") == "1":
        assert kernel_services.num_threads() == 1


# -- refusals before anything runs --------------------------------------------------------


def test_bind_now_is_refused_before_loading(kernels):
    code = textwrap.dedent(f"""
        import tvmrt.runtime as rt
        from tvmrt.error import ModuleLoadError
        try:
            rt.load_module({str(kernels / "add.so")!r})
        except ModuleLoadError as exc:
            print(exc)
    """)
    env = {**os.environ, "LD_BIND_NOW": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "TVMFFIErrorSetRaisedFromCStrParts, which tvmrt supplies by patching" in proc.stdout
    assert "LD_BIND_NOW" in proc.stdout


def test_tvm_ffi_and_tvmrt_share_a_process(kernels):
    """tvm_ffi keeps working on the same file, in either order, errors included."""
    if importlib.util.find_spec("tvm_ffi") is None:
        pytest.skip("apache-tvm-ffi is not installed")
    code = textwrap.dedent(f"""
        import sys
        import numpy as np
        import tvm_ffi
        import tvmrt.runtime as rt
        from tvmrt.error import KernelError
        from tvmrt.runtime import ndarray as nd
        path = {str(kernels / "add.so")!r}

        def with_tvm_ffi():
            f = tvm_ffi.load_module(path)["add"]
            a = np.arange(1024, dtype="float32")
            out = np.zeros(1024, "float32")
            f(tvm_ffi.from_dlpack(a), tvm_ffi.from_dlpack(a), tvm_ffi.from_dlpack(out))
            assert (out == 2 * a).all()
            try:
                f(tvm_ffi.from_dlpack(np.zeros(8, "float32")), tvm_ffi.from_dlpack(a),
                  tvm_ffi.from_dlpack(out))
            except ValueError as exc:
                assert "Invalid A.shape[0]" in str(exc)
            else:
                raise AssertionError("no error from tvm_ffi")

        def with_tvmrt():
            f = rt.load_module(path)["add"]
            a = nd.array(np.arange(1024, dtype="float32"))
            out = nd.empty((1024,), "float32")
            f(a, a, out)
            assert (out.numpy() == 2 * a.numpy()).all()
            try:
                f(nd.empty((8,), "float32"), a, out)
            except KernelError as exc:
                assert str(exc).startswith("ValueError: Invalid A.shape[0]")
            else:
                raise AssertionError("no error from tvmrt")

        order = [with_tvm_ffi, with_tvmrt] if sys.argv[1] == "ffi" else [with_tvmrt, with_tvm_ffi]
        for step in order + order:
            step()
        print("ok")
    """)
    for first in ("ffi", "tvmrt"):
        proc = subprocess.run(
            [sys.executable, "-c", code, first], capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert proc.stdout.strip() == "ok"


# -- crafted libraries: other tvm-ffi versions and services ------------------------------

ANY_C = (
    "#include <stdint.h>\ntypedef struct { int32_t type_index; uint32_t pad; int64_t v; } Any;\n"
)
V021_C = (
    ANY_C
    + r"""
__attribute__((weak)) void (*__TVMFFIErrorSetRaisedFromCStr)(const char*, const char*) = 0;
__attribute__((weak)) void* __tvm_ffi_library_ctx = 0;
const char __tvm_main__[] = "scale";
int scale(void* self, const Any* args, int n, Any* result) {
  if (n != 2 || args[0].type_index != 1 || args[1].type_index != 1) {
    __TVMFFIErrorSetRaisedFromCStr("TypeError", "scale expects two ints");
    return -1;
  }
  result->type_index = 1;
  result->v = args[0].v * args[1].v;
  return 0;
}
"""
)
# TVM 0.22-0.23: prefixed names, errors through the __TVMFFIErrorSetRaisedFromCStr slot
V022_C = (
    ANY_C
    + r"""
__attribute__((weak)) void (*__TVMFFIErrorSetRaisedFromCStr)(const char*, const char*) = 0;
__attribute__((weak)) void* (*__TVMBackendAllocWorkspace)(int, int, uint64_t, int, int) = 0;
__attribute__((weak)) int (*__TVMBackendFreeWorkspace)(int, int, void*) = 0;
int __tvm_ffi_check(void* self, const Any* args, int n, Any* result) {
  char* p = (char*)__TVMBackendAllocWorkspace(1, 0, 1 << 21, 2, 32);
  if (p == 0) return -1;
  p[(1 << 21) - 1] = 1;
  if (__TVMBackendFreeWorkspace(1, 0, p) != 0) return -1;
  if (n != 1) {
    __TVMFFIErrorSetRaisedFromCStr("ValueError", "check expects one argument");
    return -1;
  }
  return 0;
}
"""
)
LOOKUP_C = (
    ANY_C
    + r"""
__attribute__((weak)) int (*__TVMBackendGetFuncFromEnv)(void*, const char*, void**) = 0;
__attribute__((weak)) int (*__TVMFFIEnvModLookupFromImports)(void*, const char*, void**) = 0;
__attribute__((weak)) int (*__TVMFFIFunctionCall)(void*, const Any*, int, Any*) = 0;
__attribute__((weak)) void* __tvm_ffi__library_ctx = 0;
int __tvm_ffi_extern(void* self, const Any* args, int n, Any* result) {
  void* handle = 0;
  return __TVMBackendGetFuncFromEnv(__tvm_ffi__library_ctx, "tvmrt.test.no_such_function", &handle);
}
static int call_set_device(const Any* args, int n, Any* result) {
  void* handle = 0;
  if (__TVMFFIEnvModLookupFromImports(__tvm_ffi__library_ctx, "__tvm_set_device", &handle)) return -1;
  return __TVMFFIFunctionCall(handle, args, n, result);
}
int __tvm_ffi_set_device(void* self, const Any* args, int n, Any* result) {
  Any a[2] = {{1, 0, 2}, {1, 0, args[0].v}}; /* (kDLCUDA, device id) as tvm-ffi ints */
  return call_set_device(a, 2, result);
}
int __tvm_ffi_object_arg(void* self, const Any* args, int n, Any* result) {
  Any a[2] = {{1, 0, 2}, {64, 0, 0}}; /* a tvm-ffi object: not converted */
  return call_set_device(a, 2, result);
}
"""
)
UNKNOWN_SLOT_C = (
    ANY_C
    + r"""
__attribute__((weak)) void* (*__TVMFFIEnvGetStream)(int, int) = 0;
int __tvm_ffi_k(void* self, const Any* args, int n, Any* result) { return 0; }
"""
)
UNKNOWN_IMPORT_C = (
    ANY_C
    + r"""
extern int TVMFFIObjectDecRef(void* obj);
int __tvm_ffi_k(void* self, const Any* args, int n, Any* result) { return TVMFFIObjectDecRef(0); }
"""
)


def library_bin_c(payload: bytes) -> str:
    """C source of a library with ``__tvm_ffi__library_bin`` = ``u64 len | payload``."""
    data = len(payload).to_bytes(8, "little") + payload
    body = ", ".join(str(b) for b in data)
    return ANY_C + (
        f"const unsigned char __tvm_ffi__library_bin[{len(data)}] = {{{body}}};\n"
        "int __tvm_ffi_k(void* self, const Any* args, int n, Any* result) { return 0; }\n"
    )


def build_c(source: str, directory: Path, name: str) -> Path:
    cc = link.find_compiler()
    if cc is None:
        pytest.skip("no C compiler to build test libraries")
    src, out = directory / f"{name}.c", directory / f"{name}.so"
    src.write_text(source)
    subprocess.run([*cc, "-shared", "-fPIC", "-o", str(out), str(src)], check=True)
    return out


def test_tvm_ffi_021_plain_names_and_slot_errors(tmp_path):
    path = build_c(V021_C, tmp_path, "v021")
    scan = abi.scan_tvm_symbols(binary.ElfFile.from_path(path).symbols())
    assert scan.abi == "tvm-ffi-0.21"
    module = rt.load_module(path)
    assert isinstance(module, FFILibraryModule)
    assert module.function_names == ["scale"]
    assert module["scale"](6, 7) == 42
    assert module["main"](2, 3) == 6  # the entry named by the __tvm_main__ string
    with pytest.raises(KernelError, match=r"^TypeError: scale expects two ints$"):
        module["scale"](1.5, 2)


def test_tvm_ffi_022_errors_through_the_slot(tmp_path):
    module = rt.load_module(build_c(V022_C, tmp_path, "v022"))
    module["check"](None)  # also allocates 2 MiB of workspace through the slots
    with pytest.raises(KernelError, match=r"^ValueError: check expects one argument$"):
        module["check"]()


def test_function_lookups_and_calls_go_to_the_environment(tmp_path):
    module = rt.load_module(build_c(LOOKUP_C, tmp_path, "lookup"))
    with pytest.raises(KernelError, match=r"cannot find function 'tvmrt\.test\.no_such_function'"):
        module["extern"]()
    module["set_device"](3)  # looked up and called with TVMFFIAny arguments
    assert current_device(2) == rt.cuda(3)
    module["set_device"](0)
    with pytest.raises(KernelError, match="argument 1 is a tvm-ffi object"):
        module["object_arg"]()


@pytest.mark.parametrize(
    ("source", "symbol"),
    [(UNKNOWN_SLOT_C, "__TVMFFIEnvGetStream"), (UNKNOWN_IMPORT_C, "TVMFFIObjectDecRef")],
    ids=["slot", "import"],
)
def test_unsupported_abi_version_is_refused(tmp_path, source, symbol):
    path = build_c(source, tmp_path, "future")
    assert abi.scan_tvm_symbols(binary.ElfFile.from_path(path).symbols()).abi == "tvm-ffi"
    with pytest.raises(
        ModuleLoadError,
        match=rf"built for a tvm-ffi ABI version tvmrt does not support .*: {symbol}$",
    ):
        rt.load_module(path)


def test_library_bin_modules_tvmrt_cannot_load_are_skipped(tmp_path):
    w = ByteWriter()
    w.u64(3)  # indptr [0, 1, 1]: module 0 imports module 1
    for v in (0, 1, 1):
        w.u64(v)
    w.u64(1)  # children [1]
    w.u64(1)
    w.string("metal")  # Apple GPU code (a Relax executable first goes to the C runtime's VM)
    w.string(b"\x00" * 40)  # its bytes, length-prefixed
    w.string("_lib")
    module = rt.load_module(build_c(library_bin_c(bytes(w.buffer)), tmp_path, "bin"))
    assert isinstance(module, FFILibraryModule)
    assert module.skipped_modules == ("metal",)
    assert module["k"]() is None
    with pytest.raises(AttributeError, match=r"does not load: metal\)$"):
        module["vm_main"]


def test_corrupt_library_bin_is_refused(tmp_path):
    w = ByteWriter()
    w.u64(2)
    w.u64(0)
    w.u64(1)
    w.u64(0)
    w.string("metal")
    w.u64(1000)  # claims 1000 bytes that are not there
    with pytest.raises(ModuleLoadError, match=r"__tvm_ffi__library_bin of .*bin\.so"):
        rt.load_module(build_c(library_bin_c(bytes(w.buffer)), tmp_path, "bin"))
