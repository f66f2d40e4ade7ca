"""Every CPU graph-executor artifact the C runtime loads, run by a C program
(tests/native/c/run_model.c) against libtvmrt_runtime, plain and under ASan + UBSan, with
outputs compared with the artifacts' golden.npz (TVM's own outputs) bit for bit.

Export tars (`.o` members) are linked into a shared library first, as TVM's load_module
does; the C runtime itself loads shared libraries only.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from tests.native.conftest import C_DIR, INCLUDE, NativeBuild, link_shared


@dataclass(frozen=True)
class Case:
    """One artifact: how run_model loads it and where its golden is."""

    folder: str  # under the artifacts root (tests/support/fixtures.py)
    mode: str  # factory | syslib | files
    lib: str  # a file of the folder, or "<tar>!" to link the tar's objects
    graph: str = ""
    params: str = ""
    input_name: str = "data"
    samples: int = 1  # golden rows run one at a time (iris: 4)
    bitwise: bool = True  # else rtol=1e-5, atol=1e-6 (C kernels built by this host's cc)


CASES = {
    "mobilenet_v1-files": Case(
        "mobilenet_v1", "files", "deploy_lib.so", "deploy_graph.json", "deploy_param.params"
    ),
    "systemlib-so-factory": Case("relay016/systemlib-so", "factory", "deploy.so"),
    "systemlib-so-syslib": Case("relay016/systemlib-so", "syslib", "deploy.so"),
    "systemlib-tar-syslib": Case("relay016/systemlib-tar", "syslib", "deploy.tar!"),
    "linkparams-so-factory": Case("relay016/linkparams-so", "factory", "deploy.so"),
    "tvmc-package-files": Case(
        "relay016/tvmc-package", "files", "module.tar/mod.so", "mod.json", "mod.params"
    ),
    "mlf-graph-llvm-files": Case(
        "relay016/mlf-graph",
        "files",
        "model_llvm.tar!",
        "executor-config/graph/default.graph",
        "parameters/default.params",
    ),
    "mlf-graph-c-files": Case(
        "relay016/mlf-graph",
        "files",
        "model_c_crt.tar!",
        "executor-config/graph/default.graph",
        "parameters/default.params",
        bitwise=False,
    ),
    # kernels that call runtime functions by name (TVMBackendGetFuncFromEnv -> sort.c)
    "contrib-sort-topk": Case("contrib/sort-topk", "factory", "deploy.so", input_name="x"),
    "contrib-nms": Case("contrib/nms-static", "factory", "deploy.so"),
    "iris-factory": Case(
        "iris-factory", "factory", "deploy_lib.tar!", input_name="float_input", samples=4
    ),
}


def _prepare(case: Case, src: Path, work: Path) -> tuple[Path, list[Path]]:
    """The library to load and the graph/params paths, extracted or linked under `work`."""
    work.mkdir(parents=True, exist_ok=True)
    lib_name = case.lib
    extra = [case.graph, case.params] if case.mode == "files" else []
    if lib_name.endswith("!") or "/" in lib_name:
        tar_name = lib_name.rstrip("!").split("/")[0]
        with tarfile.open(src / tar_name) as tar:  # gzip or plain
            tar.extractall(work, filter="data")
        if lib_name.endswith("!"):
            # .o members (llvm), or C sources (target "c": kernels that call TVMBackend*
            # functions by name, resolved from libtvmrt_runtime in the process)
            objects = sorted(work.rglob("*.o")) or sorted(work.rglob("codegen/host/src/*.c"))
            assert objects, f"{tar_name} holds no objects"
            lib = link_shared(objects, work / "linked.so")
        else:
            lib = work / lib_name.split("/", 1)[1]
        return lib, [work / e for e in extra]
    return src / lib_name, [src / e for e in extra]


@pytest.mark.parametrize("name", sorted(CASES))
def test_model_matches_golden(
    name: str,
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    artifacts: Path,
    tmp_path: Path,
) -> None:
    case = CASES[name]
    src = artifacts / case.folder
    golden = np.load(src / "golden.npz")
    lib, extra = _prepare(case, src, tmp_path / "art")
    exe = compile_c(native, "run_model", False)
    inputs = golden[case.input_name]
    for row in range(case.samples):
        x = inputs[row : row + 1] if case.samples > 1 else inputs
        x_path = tmp_path / f"in{row}.bin"
        np.ascontiguousarray(x).tofile(x_path)
        prefix = tmp_path / f"out{row}_"
        proc = native.run(exe, case.mode, lib, *extra, case.input_name, x_path, prefix)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        outputs = [k for k in golden.files if k.startswith("output_")]
        assert proc.stdout.strip() == f"outputs: {len(outputs)}"
        for i, key in enumerate(sorted(outputs)):
            want = golden[key][row : row + 1] if case.samples > 1 else golden[key]
            got = np.fromfile(f"{prefix}{i}.bin", dtype=want.dtype).reshape(want.shape)
            if case.bitwise:
                np.testing.assert_array_equal(got, want, err_msg=f"{name} {key} row {row}")
            else:
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=name)


def test_static_library_runs_a_system_lib(
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    artifacts: Path,
    tmp_path: Path,
) -> None:
    """The same program linked with libtvmrt_runtime.a (exporting the runtime to the
    kernels with -rdynamic) loads a system-lib library, whose constructors register its
    kernels with TVMBackendRegisterSystemLibSymbol inside dlopen."""
    src = artifacts / "relay016" / "systemlib-so"
    golden = np.load(src / "golden.npz")
    exe = compile_c(native, "run_model", True)
    x_path = tmp_path / "in.bin"
    golden["data"].tofile(x_path)
    proc = native.run(exe, "syslib", src / "deploy.so", "data", x_path, tmp_path / "out")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = np.fromfile(tmp_path / "out0.bin", dtype=np.float32).reshape(golden["output_0"].shape)
    np.testing.assert_array_equal(got, golden["output_0"])


def test_bare_library_name_is_the_current_folder(
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    artifacts: Path,
    tmp_path: Path,
) -> None:
    """TVMModLoadFromFile("deploy_lib.so") loads ./deploy_lib.so (TVM's C++ runtime hands the
    bare name to dlopen, which searches the library path instead), and the graph is created
    under the old name tvm.graph_runtime.create, as in TVM's deployment guide."""
    src = artifacts / "mobilenet_v1"
    for name in ("deploy_lib.so", "deploy_graph.json", "deploy_param.params"):
        (tmp_path / name).symlink_to(src / name)
    golden = np.load(src / "golden.npz")
    golden["data"].tofile(tmp_path / "cat.bin")
    exe = compile_c(native, "run_model", False)
    args = ["deploy_lib.so", "deploy_graph.json", "deploy_param.params", "data", "cat.bin"]
    proc = native.run(exe, "files", *args, "out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = np.fromfile(tmp_path / "out0.bin", dtype=np.float32).reshape(golden["output_0"].shape)
    np.testing.assert_array_equal(got, golden["output_0"])
    assert int(got.argmax()) == int(golden["output_0"].argmax())


def test_system_module_linked_into_the_program(
    native: NativeBuild, artifacts: Path, tmp_path: Path
) -> None:
    """TVM's "Deploy as System Module": the kernels object (lib0.o) and the blob as C source
    (devc.c, compiled as C++ for its dynamic initializer) linked with libtvmrt_runtime.a
    and run_model.c into one program that loads no library at all."""
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("g++ is not installed; devc.c must be compiled as C++")
    src = artifacts / "relay016" / "systemlib-seed-flow"
    with tarfile.open(src / "deploy_devc_c.tar") as tar:
        tar.extractall(tmp_path, filter="data")
    flags = native.flags.split()
    include = f"-I{INCLUDE}"
    runtime = str(native.lib_dir / "libtvmrt_runtime.a")
    steps = [
        [cxx, *flags, include, "-x", "c++", "-c", "devc.c", "-o", "devc.o"],
        ["cc", "-std=c11", *flags, include, "-c", str(C_DIR / "run_model.c"), "-o", "main.o"],
        [
            cxx,
            *flags,
            "main.o",
            "lib0.o",
            "devc.o",
            runtime,
            "-ldl",
            "-lpthread",
            "-lm",
            "-o",
            "app",
        ],
    ]
    for cmd in steps:
        proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, " ".join(cmd) + "\n" + proc.stderr
    golden = np.load(src / "golden.npz")
    golden["data"].tofile(tmp_path / "in.bin")
    proc = native.run(tmp_path / "app", "syslib", "-", "data", "in.bin", "out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = np.fromfile(tmp_path / "out0.bin", dtype=np.float32).reshape(golden["output_0"].shape)
    np.testing.assert_array_equal(got, golden["output_0"])
