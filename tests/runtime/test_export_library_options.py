"""export_library as TVM v0.19 has it: fcompile=False/None/callable, addons, workspace_dir,
fpack_imports, cc and options; the module blob as devc.c (TVM's ModulePackImportsToC), and
system-lib builds (the deployment guide's "lib.o + device-blob C file")."""

from __future__ import annotations

import shutil
import subprocess
import tarfile

import numpy as np
import pytest

import tvmrt
from tvmrt import error, runtime
from tvmrt.contrib import graph_executor

pytestmark = pytest.mark.skipif(
    shutil.which("gcc") is None or shutil.which("g++") is None, reason="needs gcc and g++"
)

SYSTEMLIB = ("relay016", "systemlib-tar", "deploy.tar")


def _copy(artifacts, tmp_path, parts):
    """A writable copy (loading a tar links a .so next to it)."""
    source = artifacts.joinpath(*parts)
    target = tmp_path / "src" / source.name
    target.parent.mkdir()
    shutil.copy(source, target)
    return target, np.load(source.parent / "golden.npz")


def _output(path, golden):
    lib = runtime.load_module(str(path))
    module = graph_executor.GraphModule(lib["default"](tvmrt.cpu()))
    module.set_input("data", golden["data"])
    module.run()
    return module.get_output(0).numpy()


def test_fcompile_false_writes_lib0_o_and_devc_c_of_a_system_lib_build(artifacts, tmp_path):
    source, golden = _copy(artifacts, tmp_path, SYSTEMLIB)
    factory = runtime.load_module(str(source))
    out = tmp_path / "deploy.tar"
    assert factory.export_library(str(out), fcompile=False) is None
    with tarfile.open(out) as archive:
        assert archive.getnames() == ["lib0.o", "devc.c"]
        devc = archive.extractfile("devc.c").read().decode()
    assert 'TVMBackendRegisterSystemLibSymbol("__tvm_dev_mblob"' in devc
    np.testing.assert_array_equal(_output(out, golden), golden["output_0"])


def test_devc_c_is_tvms_own_packer_output(artifacts, tmp_path):
    """Compiled as C++ (as TVM compiles it), tvmrt's devc.c is TVM's token for token:
    compared after the preprocessor with the devc.c TVM 0.16 wrote for the same build."""
    flow = artifacts / "relay016" / "systemlib-seed-flow" / "deploy_devc_c.tar"
    source, _ = _copy(artifacts, tmp_path, ("relay016", "systemlib-seed-flow", flow.name))
    runtime.load_module(str(source)).export_library(str(tmp_path / "again.tar"))
    texts = {}
    for name, tar in (("tvm", flow), ("tvmrt", tmp_path / "again.tar")):
        folder = tmp_path / name
        with tarfile.open(tar) as archive:
            archive.extractall(folder, filter="data")
        texts[name] = subprocess.run(
            ["g++", "-E", "-P", "-x", "c++", str(folder / "devc.c")],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    assert texts["tvmrt"] == texts["tvm"]
    # and it is valid C too (gcc, where TVM's needs a C++ compiler)
    subprocess.run(
        [
            "gcc",
            "-std=c11",
            "-Wall",
            "-Werror",
            "-c",
            "-x",
            "c",
            str(tmp_path / "tvmrt" / "devc.c"),
            "-o",
            str(tmp_path / "devc.o"),
        ],
        check=True,
    )


def test_fcompile_callable_gets_the_files_and_the_kwargs(artifacts, tmp_path):
    source, _ = _copy(artifacts, tmp_path, SYSTEMLIB)
    factory = runtime.load_module(str(source))
    addon = tmp_path / "extra.c"
    addon.write_text("int tvmrt_test_addon(void) { return 7; }\n")
    seen = {}

    def fcompile(file_name, files, **kwargs):
        seen.update(file_name=file_name, files=list(files), kwargs=kwargs)
        return "made"

    work = tmp_path / "work"
    result = factory.export_library(
        str(tmp_path / "x.so"),
        fcompile=fcompile,
        addons=[str(addon)],
        workspace_dir=str(work),
        options=["-O2"],
    )
    assert result == "made"
    assert seen["file_name"] == str(tmp_path / "x.so")
    assert seen["files"] == [str(addon), str(work / "lib0.o"), str(work / "devc.c")]
    assert seen["kwargs"] == {"options": ["-O2"]}
    assert (work / "lib0.o").read_bytes()[:4] == b"\x7fELF"  # workspace_dir is kept


def test_default_shared_library_with_cc_options_and_addons(artifacts, tmp_path):
    source, golden = _copy(artifacts, tmp_path, ("iris-factory", "deploy_lib.tar"))
    factory = runtime.load_module(str(source))
    addon = tmp_path / "extra.c"
    addon.write_text("int tvmrt_test_addon(void) { return 7; }\n")
    out = tmp_path / "again.so"
    factory.export_library(str(out), cc="gcc", options=["-O1"], addons=[str(addon)])
    symbols = subprocess.run(["nm", "-D", str(out)], capture_output=True, text=True).stdout
    assert "tvmrt_test_addon" in symbols
    assert "__tvm_dev_mblob" in symbols
    again = graph_executor.GraphModule(runtime.load_module(str(out))["default"](tvmrt.cpu()))
    again.set_input("float_input", golden["float_input"][:1])
    again.run()
    np.testing.assert_array_equal(again.get_output(0).numpy()[0], golden["output_0"][0])
    with pytest.raises(error.ModuleLoadError, match="linking failed"):
        factory.export_library(str(tmp_path / "bad.so"), options=["--no-such-flag-xyz"])
    with pytest.raises(error.InvalidArgumentError, match="unknown option"):
        factory.export_library(str(tmp_path / "bad.so"), flags="-O3")


def test_fpack_imports_and_object_format(artifacts, tmp_path):
    source, _ = _copy(artifacts, tmp_path, SYSTEMLIB)
    factory = runtime.load_module(str(source))
    calls = []

    def pack(module, is_system_lib, prefix, workspace_dir):
        calls.append((module.type_key, is_system_lib, prefix))
        path = f"{workspace_dir}/blob.c"
        with open(path, "w") as f:
            f.write("/* empty */\n")
        return path

    files = factory.export_library(
        str(tmp_path / "x.tar"), fpack_imports=pack, fcompile=lambda name, files, **kw: files
    )
    assert calls == [("GraphExecutorFactory", True, "")]
    assert files[-1].endswith("blob.c")

    def fcompile(name, files, **kw):  # pragma: no cover - refused before the call
        raise AssertionError("called")

    fcompile.object_format = "cu"
    with pytest.raises(error.UnsupportedError, match="object_format 'cu'"):
        factory.export_library(str(tmp_path / "y.so"), fcompile=fcompile)
