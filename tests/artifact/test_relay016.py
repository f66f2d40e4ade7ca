"""Every CPU packaging form of relay016 (tests/fixtures/build_relay016.py, TVM 0.16, Relay) against TVM's outputs.

Each case runs the way relay016/README.md says TVM ran it (system_lib()["default"],
lib["default"], AotModule, graph_executor.create over an MLF / tvmc package's members), and
through ``tvmrt run``, from absolute and relative paths; outputs must equal golden.npz
bitwise (the golden was computed by TVM with the very kernels in the artifact; the MLF C
build is compiled here, and its README allows rtol=1e-5, atol=1e-6).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import numpy as np
import pytest

from support.fixtures import artifact_folder
from support.opencl import opencl_unusable
from tvmrt import runtime
from tvmrt.cli import main as cli_main
from tvmrt.contrib import graph_executor
from tvmrt.error import FunctionNotFoundError, InputNotFoundError, ModuleLoadError
from tvmrt.runtime.executor import AotModule


def _relay016() -> Path:
    """relay016/, the project's own TVM 0.16 build (tests/fixtures/build_relay016.py)."""
    return artifact_folder("relay016")


# (folder, file, how TVM ran it)
CASES = [
    ("systemlib-so", "deploy.so", "system_lib"),
    ("systemlib-so", "deploy.so", "lib_default"),
    ("systemlib-tar", "deploy.tar", "system_lib"),
    ("systemlib-tar", "deploy.tar", "lib_default"),
    ("systemlib-seed-flow", "deploy.tar", "system_lib"),
    ("systemlib-seed-flow", "deploy_devc_c.tar", "system_lib"),
    ("systemlib-seed-flow", "deploy_devc_c.tar", "lib_default"),
    ("aot-so", "deploy.so", "aot"),
    ("linkparams-so", "deploy.so", "lib_default"),
    ("tvmc-package", "module.tar", "tvmc_members"),
    ("tvmc-package", "module.tar", "lib_default"),
    ("mlf-graph", "model_llvm.tar", "mlf_members"),
    ("mlf-graph", "model_llvm.tar", "lib_default"),
    ("mlf-graph", "model_c_crt.tar", "mlf_members"),
    ("mlf-graph", "model_c_crt.tar", "lib_default"),
]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TVMRT_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "relay016-cache"))


def _golden(folder: str) -> dict[str, np.ndarray]:
    with np.load(_relay016() / folder / "golden.npz") as data:
        return {k: data[k] for k in data.files}


def _check(folder: str, file: str, out: np.ndarray) -> None:
    golden = _golden(folder)["output_0"]
    if file == "model_c_crt.tar":  # C compiled here: README's tolerance
        np.testing.assert_allclose(out, golden, rtol=1e-5, atol=1e-6)
    else:
        assert out.dtype == golden.dtype
        assert out.shape == golden.shape
        assert np.array_equal(out, golden), np.abs(out - golden).max()


def _members(tar: Path, dest: Path) -> dict[str, Path]:
    with tarfile.open(tar) as archive:
        archive.extractall(dest, filter="data")
    return {str(p.relative_to(dest)): p for p in dest.rglob("*") if p.is_file()}


def _run_like_tvm(folder: str, file: str, how: str, path: Path, tmp_path: Path) -> np.ndarray:
    data = _golden(folder)["data"]
    dev = runtime.cpu(0)
    if how == "tvmc_members":  # what tvmc.run does once TVMCPackage untarred the package
        files = _members(path, tmp_path / "pkg")
        lib = runtime.load_module(str(files["mod.so"]))
        m = graph_executor.create(files["mod.json"].read_text(), lib, dev)
        m.load_params(files["mod.params"].read_bytes())
        m.set_input(data=data)
    elif how == "mlf_members":  # README: untar, load/compile codegen/host, create, load_params
        files = _members(path, tmp_path / "mlf")
        if "codegen/host/lib/default_lib0.o" in files:
            lib = runtime.load_module(str(files["codegen/host/lib/default_lib0.o"]))
        else:  # C sources: tvmrt compiles an export tar of them against its own headers
            code = tmp_path / "code.tar"
            with tarfile.open(code, "w") as archive:
                for name, p in files.items():
                    if name.startswith("codegen/host/src/"):
                        archive.add(p, arcname=Path(name).name)
            lib = runtime.load_module(str(code))
        graph = files["executor-config/graph/default.graph"].read_text()
        m = graph_executor.create(graph, lib, dev)
        m.load_params(files["parameters/default.params"].read_bytes())
        m.set_input("data", data)
    else:
        lib = runtime.load_module(str(path))
        if how == "aot":
            assert lib.type_key == "AotExecutorFactory"
            m = AotModule(lib["default"](dev))
        elif how == "system_lib":
            m = graph_executor.GraphModule(runtime.system_lib()["default"](dev))
        else:
            assert lib.type_key == "GraphExecutorFactory"
            m = graph_executor.GraphModule(lib["default"](dev))
        m.set_input("data", data)
    m.run()
    return m.get_output(0).numpy()


@pytest.mark.parametrize(
    ("folder", "file", "how"), CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in CASES]
)
def test_runs_like_tvm_from_absolute_path(folder, file, how, tmp_path):
    out = _run_like_tvm(folder, file, how, _relay016() / folder / file, tmp_path)
    _check(folder, file, out)


@pytest.mark.parametrize(
    ("folder", "file", "how"), CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in CASES]
)
def test_runs_like_tvm_from_relative_path(folder, file, how, tmp_path, monkeypatch):
    monkeypatch.chdir(_relay016() / folder)
    out = _run_like_tvm(folder, file, how, Path(file), tmp_path)
    _check(folder, file, out)


CLI_CASES = sorted({(c[0], c[1]) for c in CASES})


@pytest.mark.parametrize(("folder", "file"), CLI_CASES, ids=[f"{c[0]}-{c[1]}" for c in CLI_CASES])
@pytest.mark.parametrize("where", ["absolute", "relative", "dot"])
def test_tvmrt_run(folder, file, where, tmp_path, monkeypatch, capsys):
    inputs = tmp_path / "in.npz"
    np.savez(inputs, data=_golden(folder)["data"])
    outputs = tmp_path / "out.npz"
    if where == "absolute":
        target = str(_relay016() / folder / file)
    else:
        monkeypatch.chdir(_relay016() / folder)
        target = file if where == "relative" else "."
        if where == "dot" and len([p for p in os.listdir(".") if p.endswith((".so", ".tar"))]) > 1:
            target = file  # the folder holds two libraries: `.` asks to pick one
    assert cli_main(["run", target, "-i", str(inputs), "-o", str(outputs)]) == 0
    with np.load(outputs) as saved:
        (out,) = [saved[k] for k in saved.files]
    _check(folder, file, out)


# -- the seed's "Deploy as System Module" flow ----------------------------------------------


def test_seed_system_module_flow(tmp_path):
    """Build a tar of lib0.o + devc.c (the blob as C source) → tvmrt links → system_lib()."""
    members = _members(_relay016() / "systemlib-seed-flow" / "deploy_devc_c.tar", tmp_path / "m")
    devc = members["devc.c"].read_text()
    assert "TVMBackendRegisterSystemLibSymbol" in devc  # registers the blob while loading
    build = tmp_path / "app.tar"
    with tarfile.open(build, "w") as archive:  # a new archive, as an application would make
        archive.add(members["lib0.o"], arcname="lib0.o")
        archive.add(members["devc.c"], arcname="devc.c")
    lib = runtime.load_module(str(build))
    system = runtime.system_lib()
    assert system.implements_function("get_graph_json")  # the blob's root factory's functions
    assert runtime.get_global_func("runtime.SystemLib")()["default"] is not None
    m = graph_executor.GraphModule(system["default"](runtime.cpu(0)))
    m.set_input("data", _golden("systemlib-seed-flow")["data"])
    m.run()
    _check("systemlib-seed-flow", "deploy_devc_c.tar", m.get_output(0).numpy())
    del lib  # the registered code stays loaded: system_lib() keeps working (TVM segfaults)
    again = graph_executor.GraphModule(runtime.system_lib()["default"](runtime.cpu(0)))
    again.set_input("data", _golden("systemlib-seed-flow")["data"])
    again.run()
    _check("systemlib-seed-flow", "deploy_devc_c.tar", again.get_output(0).numpy())


def test_system_lib_lookup_rules():
    runtime.load_module(str(_relay016() / "systemlib-so" / "deploy.so"))
    kernel = "tvmgen_default_fused_nn_softmax"
    for getter in (runtime.system_lib, runtime.get_global_func("module._GetSystemLib")):
        library = getter()
        assert library.type_key == "system_lib"
        assert library.implements_function(kernel)
    # a prefix is tried first, then the unprefixed name (v0.19 SystemLibrary::GetSymbol)
    prefixed = runtime.system_lib("nosuchprefix_")
    assert prefixed.implements_function(kernel)
    assert runtime.system_lib() is runtime.system_lib()  # one module per prefix
    with pytest.raises(FunctionNotFoundError):
        runtime.system_lib()["no_such_function"]


# -- AOT executor API ------------------------------------------------------------------------


def test_aot_module_api():
    lib = runtime.load_module(str(_relay016() / "aot-so" / "deploy.so"))
    executor = lib["default"](runtime.cpu(0))
    assert executor.type_key == "AotExecutor"
    m = AotModule(executor)
    assert m.get_num_inputs() == 1
    assert m.get_num_outputs() == 1
    assert m.get_input_name(0) == "data"
    assert m.get_input_index("data") == 0
    assert tuple(m.get_input(0).shape) == (1, 3, 16, 16)
    assert m.get_input_info() == ({"data": (1, 3, 16, 16)}, {"data": "float32"})
    assert lib["list_module_names"]() == ["default"]
    with pytest.raises(InputNotFoundError, match="Invalid input name"):
        m.get_input_index("nope")
    with pytest.raises(InputNotFoundError, match="Invalid input name"):
        m.set_input("nope", _golden("aot-so")["data"])
    m.run(data=_golden("aot-so")["data"])
    out = runtime.empty((1, 10), "float32")
    m.get_output(0, out)
    _check("aot-so", "deploy.so", out.numpy())
    with pytest.raises(FunctionNotFoundError):  # TVM's GraphModule on it fails the same way
        graph_executor.GraphModule(lib["default"](runtime.cpu(0)))


# -- refusals and inspection -----------------------------------------------------------------


@pytest.mark.parametrize("folder", ["opencl-factory", "hetero-opencl-cpu"])
def test_opencl_without_a_driver_says_what_to_install(folder):
    """Without an OpenCL ICD loader the artifact still loads (inspectable), and creating it
    on OpenCL says what to install; checked in a child process whose C runtime is pointed at
    a loader that is not there (TVMRT_LIBOPENCL)."""
    code = textwrap.dedent(
        f"""
        from tvmrt import runtime
        lib = runtime.load_module({str(_relay016() / folder / "deploy.so")!r})
        assert not runtime.opencl(0).exist
        try:
            lib["default"](runtime.opencl(0), runtime.cpu(0))
        except Exception as exc:
            print(type(exc).__name__, exc)
        """
    )
    env = {**os.environ, "TVMRT_LIBOPENCL": "/nonexistent/libOpenCL.so.1"}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(
        "DeviceUnavailableError OpenCL: cannot load the OpenCL library '/nonexistent/libOpenCL.so.1'"
    )
    assert "ocl-icd-libopencl1 and a driver such as pocl-opencl-icd" in proc.stdout


def _mlf_with(tmp_path: Path, executors: list[str], extra: dict[str, bytes]) -> Path:
    meta = {"version": 7, "modules": {"default": {"executors": executors, "target": ["c"]}}}
    path = tmp_path / "model.tar"
    with tarfile.open(path, "w") as archive:
        for name, data in {"metadata.json": json.dumps(meta).encode(), **extra}.items():
            info = tarfile.TarInfo(f"./{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def test_mlf_refusals_name_form_and_reason(tmp_path):
    aot = _mlf_with(tmp_path, ["aot"], {"codegen/host/src/default_lib0.c": b";\n"})
    # an AOT package is C code compiled for this host: one without its entry says so
    with pytest.raises(
        ModuleLoadError, match=r"MLF AOT package.*no entry function tvmgen_default_run"
    ):
        runtime.load_module(aot)
    no_code = _mlf_with(tmp_path, ["graph"], {"executor-config/graph/default.graph": b"{}"})
    with pytest.raises(ModuleLoadError, match=r"Model Library Format tar.*no host code"):
        runtime.load_module(no_code)
    no_graph = _mlf_with(tmp_path, ["graph"], {"codegen/host/src/lib.c": b";\n"})
    with pytest.raises(ModuleLoadError, match=r"it has no executor-config/graph/default.graph"):
        runtime.load_module(no_graph)
    bad_c = _mlf_with(
        tmp_path,
        ["graph"],
        {"codegen/host/src/lib.c": b"this is not C\n", "executor-config/graph/default.graph": b""},
    )
    with pytest.raises(ModuleLoadError, match=r"compiling member 'codegen/host/src/lib.c'"):
        runtime.load_module(bad_c)


def test_missing_file_is_value_error_and_bare_names_stay_local(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="does not exist"):
        runtime.load_module(tmp_path / "missing.so")
    with pytest.raises(FileNotFoundError):
        runtime.load_module(tmp_path / "missing.so")
    monkeypatch.chdir(tmp_path)
    # "libm.so.6" exists on the library search path, but not here: never dlopen-ed from there
    with pytest.raises(ValueError, match="does not exist"):
        runtime.load_module("libm.so.6")


@pytest.mark.parametrize(
    ("folder", "file", "form", "runnable"),
    [
        ("systemlib-so", "deploy.so", "system-lib-so", True),
        ("systemlib-tar", "deploy.tar", "export-tar", True),
        ("systemlib-seed-flow", "deploy_devc_c.tar", "export-tar", True),
        ("aot-so", "deploy.so", "legacy-so", True),
        ("linkparams-so", "deploy.so", "legacy-so", True),
        ("tvmc-package", "module.tar", "tvmc", True),
        ("mlf-graph", "model_llvm.tar", "mlf", True),
        ("mlf-graph", "model_c_crt.tar", "mlf", True),
        # runnable where an OpenCL driver runs kernels
        ("opencl-factory", "deploy.so", "legacy-so", opencl_unusable() is None),
    ],
)
def test_inspect_names_the_form(folder, file, form, runnable, capsys):
    code = cli_main(["inspect", str(_relay016() / folder / file), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["library"]["form"] == form
    assert report["runnable"] is runnable
    assert code == (0 if runnable else 1)
    if folder == "aot-so":
        assert "AOT" in report["library"]["form_text"]
    elif runnable:
        assert report["graph"]["outputs"][0]["shape"] == [1, 10]


def test_system_lib_object_form(tmp_path):
    """One relocatable object (lib0.o + devc.o merged with ``ld -r``) loads like the tar."""
    import shutil
    import subprocess

    if shutil.which("ld") is None:
        pytest.skip("no ld")
    files = _members(_relay016() / "systemlib-tar" / "deploy.tar", tmp_path / "m")
    merged = tmp_path / "deploy.o"
    subprocess.run(
        ["ld", "-r", "-o", str(merged), str(files["lib0.o"]), str(files["devc.o"])], check=True
    )
    lib = runtime.load_module(merged)
    assert lib.type_key == "GraphExecutorFactory"
    m = graph_executor.GraphModule(runtime.system_lib()["default"](runtime.cpu(0)))
    m.set_input("data", _golden("systemlib-tar")["data"])
    m.run()
    _check("systemlib-tar", "deploy.tar", m.get_output(0).numpy())


def test_tvmc_classic_tar_variant(tmp_path):
    """A tvmc package whose library is an export tar (``mod.tar``) instead of ``mod.so``."""
    files = _members(_relay016() / "tvmc-package" / "module.tar", tmp_path / "pkg")
    package = tmp_path / "module.tar"
    with tarfile.open(package, "w") as archive:
        archive.add(_relay016() / "systemlib-tar" / "deploy.tar", arcname="mod.tar")
        archive.add(files["mod.json"], arcname="mod.json")
        archive.add(files["mod.params"], arcname="mod.params")
    lib = runtime.load_module(package)
    m = graph_executor.GraphModule(lib["default"](runtime.cpu(0)))
    m.set_input("data", _golden("tvmc-package")["data"])
    m.run()
    _check("tvmc-package", "module.tar", m.get_output(0).numpy())


def test_aot_cli_bench_and_whole_model_profile(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(_relay016() / "aot-so")
    assert cli_main(["bench", ".", "--repeat", "3", "--number", "2", "--json"]) == 0
    capsys.readouterr()
    assert cli_main(["profile", "deploy.so", "--json", "--trace", str(tmp_path / "t.json")]) == 0
    report = json.loads(capsys.readouterr().out)
    (call,) = report["calls"]
    assert call["Name"]["string"] == "tvmgen_default___tvm_main__"
    assert report["configuration"]["Executor"]["string"] == "AOT"
    trace = json.loads((tmp_path / "t.json").read_text())
    assert [e["ph"] for e in trace["traceEvents"]] == ["B", "E"]


@pytest.mark.parametrize("folder", ["opencl-factory", "hetero-opencl-cpu"])
def test_device_code_on_the_cpu_names_the_device(folder, capsys):
    """OpenCL kernels run on the CPU would get host pointers: refused, naming --device."""
    assert cli_main(["run", str(_relay016() / folder / "deploy.so")]) == 2  # a usage error
    err = capsys.readouterr().err
    assert "holds OpenCL kernels ('opencl' device module), which do not run on the CPU" in err
    assert "--device opencl" in err


def test_inspect_names_the_device_code(capsys):
    assert cli_main(
        ["inspect", str(_relay016() / "hetero-opencl-cpu" / "deploy.so"), "--json"]
    ) in (0, 1)
    report = json.loads(capsys.readouterr().out)
    assert report["library"]["device_code"].endswith("run it with --device opencl")
    assert report["graph"]["devices"] == [1, 4]  # device_index: CPU and OpenCL
