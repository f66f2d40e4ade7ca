"""What a library needs from the runtime and the CPU is checked before its kernels run.

The libraries are tiny C kernel libraries in TVM's legacy ABI, built here with the system
C compiler (skipped without one): ``myadd`` (``y = x + 1``, the kernel of
tvmrt.testing.graphs.add_one) that first looks a runtime function up the way LLVM-built
TVM kernels do (handle cached in a ``.tvm_func.<name>`` local), and an AVX-512 build of
the same kernel (``-mavx512f``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tvmrt import runtime
from tvmrt.binfmt import binary
from tvmrt.cli import main as cli_main
from tvmrt.error import ModuleLoadError
from tvmrt.runtime.loaders import isa, link, needs
from tvmrt.runtime.registry import register_func, remove_global_func
from tvmrt.testing.graphs import add_one
from tvmrt.testing.kernels_c import KERNEL_PRELUDE as PRELUDE

# myadd calls NAME(x) before adding 1, its handle cached like LLVM's codegen caches it
CALLING_C = (
    PRELUDE
    + r"""
static void* cached __asm__(".tvm_func.NAME");
int myadd(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc, void* res) {
  TVMValue cargs[1], cret; int ccodes[1] = {7}, cret_code = 4;
  float* x = (float*)TENSOR(0)->data; float* y = (float*)TENSOR(1)->data; int i;
  if (cached == 0 && __TVMBackendGetFuncFromEnv(__tvm_module_ctx, "NAME", &cached) != 0) return -1;
  cargs[0] = args[0];
  if (__TVMFuncCall(cached, cargs, ccodes, 1, &cret, &cret_code) != 0) return -1;
  for (i = 0; i < TENSOR(0)->shape[0]; ++i) y[i] = x[i] + 1.0f;
  return 0;
}
"""
)

AVX512_C = (
    PRELUDE
    + r"""
#include <immintrin.h>
int myadd(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc, void* res) {
  float* x = (float*)TENSOR(0)->data; float* y = (float*)TENSOR(1)->data;
  _mm512_storeu_ps(y, _mm512_add_ps(_mm512_loadu_ps(x), _mm512_set1_ps(1.0f)));
  return 0;
}
"""
)


def build(tmp_path: Path, source: str, flags: tuple[str, ...] = (), strip: bool = False) -> Path:
    cc = link.find_compiler()
    if cc is None:
        pytest.skip("no C compiler to build test kernel libraries")
    folder = tmp_path / "artifact"
    folder.mkdir()
    (folder / "lib.c").write_text(source)
    lib = folder / "deploy.so"
    subprocess.run(
        [*cc, "-shared", "-fPIC", "-O2", *flags, "-o", str(lib), str(folder / "lib.c")],
        check=True,
        capture_output=True,
    )
    (folder / "lib.c").unlink()
    if strip:
        if shutil.which("strip") is None:
            pytest.skip("no strip tool")
        subprocess.run(["strip", "--strip-all", str(lib)], check=True)
    (folder / "deploy.json").write_text(add_one(16))
    return folder


def run_add_one(folder: Path) -> np.ndarray:
    from tvmrt.contrib import graph_executor

    lib = runtime.load_module(str(folder / "deploy.so"))
    module = graph_executor.create((folder / "deploy.json").read_text(), lib, runtime.cpu())
    module.set_input("x", np.arange(16, dtype="float32"))
    module.run()
    return module.get_output(0).numpy()


def test_inspect_reports_an_unknown_runtime_function_and_exits_1(tmp_path, capsys):
    folder = build(tmp_path, CALLING_C.replace("NAME", "tvmrt.test.no_such_function"))
    assert cli_main(["inspect", str(folder)]) == 1
    text = capsys.readouterr().out
    assert "calls:  tvmrt.test.no_such_function (missing)" in text
    assert (
        "its kernels call runtime functions that are not provided: 'tvmrt.test.no_such_function'"
        in text
    )
    assert "runs here" not in text
    assert cli_main(["inspect", str(folder), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["library"]["needs"]["functions"] == {"tvmrt.test.no_such_function": "missing"}
    assert report["runnable"] is False


def test_load_fails_early_naming_the_function_then_runs_once_it_is_registered(tmp_path):
    folder = build(tmp_path, CALLING_C.replace("NAME", "tvmrt.test.late_function"))
    with pytest.raises(
        ModuleLoadError,
        match=r"its kernels call runtime functions that are not provided: "
        r"'tvmrt\.test\.late_function' \(not in the library, its imports or the global registry\)",
    ):
        runtime.load_module(str(folder / "deploy.so"))
    seen = []
    register_func("tvmrt.test.late_function", lambda x: seen.append(x.shape), override=True)
    try:
        assert np.array_equal(run_add_one(folder), np.arange(16, dtype="float32") + 1)
        assert seen == [(16,)]  # the kernel called it through TVMFuncCall
    finally:
        remove_global_func("tvmrt.test.late_function")


@pytest.mark.parametrize(
    ("name", "library"),
    [
        ("tvm.contrib.cudnn.conv2d.forward", "cuDNN"),
        ("tvm.contrib.cublas.matmul", "cuBLAS"),
        ("tvm.contrib.thrust.sort", "Thrust"),
    ],
)
def test_a_cuda_library_extern_is_refused_by_name(tmp_path, name, library):
    """Host code of a CUDA build that calls cuDNN/cuBLAS/Thrust (TVM's -libs=...) is refused
    at load, naming the function and the library: tvmrt runs the model's own CUDA kernels
    and does not call NVIDIA's libraries."""
    folder = build(tmp_path, CALLING_C.replace("NAME", name))
    with pytest.raises(ModuleLoadError) as caught:
        runtime.load_module(str(folder / "deploy.so"))
    assert repr(name) in str(caught.value)
    assert (
        f"{library} on a CUDA GPU; tvmrt runs the model's own CUDA kernels, not {library}"
        in str(caught.value)
    )


def test_a_stripped_library_is_read_from_its_strings(tmp_path, capsys):
    """No .symtab: the tvm.contrib.* name is a string constant; NNPACK is named as such."""
    name = "tvm.contrib.nnpack.fully_connected_inference"
    folder = build(tmp_path, CALLING_C.replace("NAME", name), strip=True)
    elf = binary.ElfFile.from_path(folder / "deploy.so")
    assert elf.symbols(dynamic=False) == []
    assert needs.lookup_names(elf) == [name]
    with pytest.raises(
        ModuleLoadError, match=r"'tvm\.contrib\.nnpack\.fully_connected_inference' \(NNPACK"
    ):
        runtime.load_module(str(folder / "deploy.so"))
    assert cli_main(["run", str(folder), "--fill", "zeros"]) != 0
    assert "NNPACK (-libs=nnpack)" in capsys.readouterr().err


def test_an_avx512_library_is_refused_without_avx512_and_runs_with_it(tmp_path, capsys):
    folder = build(tmp_path, AVX512_C, flags=("-mavx512f",))
    found = isa.code_features(binary.ElfFile.from_path(folder / "deploy.so"))
    if found.evex == 0:
        pytest.skip("the compiler emitted no EVEX instructions for -mavx512f")
    assert "avx512f" in found.features
    host = isa.host_features()
    if host is not None and "avx512f" not in host:
        with pytest.raises(
            ModuleLoadError, match=r"its code uses CPU features this CPU lacks: avx512f \("
        ):
            runtime.load_module(str(folder / "deploy.so"))
        assert cli_main(["inspect", str(folder)]) == 1
        assert "this CPU lacks: avx512f" in capsys.readouterr().out
    else:  # the host has it: the same library loads and runs
        assert np.array_equal(run_add_one(folder), np.arange(16, dtype="float32") + 1)


def test_the_scanner_finds_no_evex_in_code_without_it(tmp_path):
    folder = build(tmp_path, CALLING_C.replace("NAME", "x"), flags=("-mavx2",))
    found = isa.code_features(binary.ElfFile.from_path(folder / "deploy.so"))
    assert found.evex == 0
    assert found.undecodable == 0


@pytest.mark.parametrize("kind", ["dnnl_json", "tensorrt"])
def test_a_byoc_module_in_the_blob_is_refused_by_name(kind):
    from tvmrt.runtime.loaders.blob import parse_module_blob

    def u64(v: int) -> bytes:
        return v.to_bytes(8, "little")

    payload = u64(1) + u64(len(kind)) + kind.encode() + b"\0" * 16
    with pytest.raises(
        ModuleLoadError, match=rf"imports a '{kind}' module: an external-codegen \(BYOC\)"
    ):
        parse_module_blob(u64(len(payload)) + payload, "__tvm_dev_mblob of 'x.so'")


def test_an_avx512_library_loads_where_the_host_reports_avx512(tmp_path, monkeypatch):
    """The other half of the check on a host without AVX-512: with the host's flags
    reporting it, the same library is accepted (loaded, not run: this CPU would die)."""
    folder = build(tmp_path, AVX512_C, flags=("-mavx512f",))
    if isa.code_features(binary.ElfFile.from_path(folder / "deploy.so")).evex == 0:
        pytest.skip("the compiler emitted no EVEX instructions for -mavx512f")
    host = isa.host_features() or frozenset()
    monkeypatch.setattr(isa, "host_features", lambda: host | {"avx512f"})
    lib = runtime.load_module(str(folder / "deploy.so"))
    assert lib is not None
