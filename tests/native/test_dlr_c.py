"""DLR's C API (dlr.h, libdlr.so): a DLR program, examples/cpp/dlr_model.c, built by
examples/cpp's Makefile with -ldlr, runs a Neo-layout CPU folder (made from TVM 0.16's build
by tests/dlr/build_neo_fixtures.py) plain and under ASan + UBSan; its outputs are TVM's,
byte for byte, and the Python tvmrt.dlr's. DLR's device check keeps its words; Relay VM
folders are refused by name; hostile folders the tests make (bad meta JSON, missing and
duplicate files, a truncated params blob, a FIFO for a library) give errors, never a crash;
tests/native/c/dlr_checks.c misuses the API call by call."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tests.native.conftest import INCLUDE, NativeBuild, _build

from support.built import built
from support.paths import REPO
from tvmrt import dlr
from tvmrt.dlr.dlr_model import DLRError
from tvmrt.error import TVMError

NEO_SCRIPT = REPO / "tests" / "dlr" / "build_neo_fixtures.py"
DEVICE_ERROR = 'Compiled model requires device type "gpu" but user gave "cpu".'


@pytest.fixture(scope="module")
def neo_root() -> Path:
    return built(NEO_SCRIPT, "dlr")


def _program(native: NativeBuild, out: Path) -> Path:
    """examples/cpp's dlr_model, built by its Makefile against this build's libdlr.so."""
    exe = out / "dlr_model"
    if not exe.exists():
        env = dict(native.env)
        env["TVMRT_LIBDIR"] = str(native.lib_dir)
        env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
        cflags = f"-std=c11 -Wall -Wextra -Werror {native.flags}"
        proc = subprocess.run(
            [
                "make",
                "-s",
                "-C",
                str(REPO / "examples" / "cpp"),
                "dlr_model",
                f"BUILD={out}",
                f"CFLAGS={cflags}",
                f"TVMRT_CONFIG={sys.executable} -m tvmrt.config",
            ],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return exe


@pytest.fixture
def program(native: NativeBuild, native_root: Path) -> Path:
    out = native_root / f"dlr-example-{native.variant}"
    out.mkdir(exist_ok=True)
    return _program(native, out)


def _neo(neo_root: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "neo-cpu"
    shutil.copytree(neo_root / "neo-cpu", folder)
    golden = np.load(neo_root / "neo-cpu.npz")
    golden["data"].tofile(tmp_path / "data.bin")
    golden["mask"].tofile(tmp_path / "mask.bin")
    return folder


def _run(
    native: NativeBuild, program: Path, folder: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    tmp = folder.parent
    return native.run(
        program, folder, tmp, *extra, f"data={tmp / 'data.bin'}", f"mask={tmp / 'mask.bin'}"
    )


def test_a_dlr_program_runs_a_neo_folder_bitwise(
    native: NativeBuild, program: Path, neo_root: Path, tmp_path: Path
) -> None:
    folder = _neo(neo_root, tmp_path)
    (folder / "libdlr.so").write_bytes(b"DLR's own library: never loaded")
    proc = _run(native, program, folder)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "DLR 1.10.0, backend tvm, metadata yes, 2 inputs, 2 weights, 2 outputs",
        "input 0: data float32 (1, 3, 8, 8)",
        "input 1: mask int32 (1, 10)",
        "output 0: probabilities float32 (1, 10)",
        "output 1: class_id int32 (1)",
    ]
    golden = np.load(neo_root / "neo-cpu.npz")
    python = dlr.DLRModel(str(folder)).run({"data": golden["data"], "mask": golden["mask"]})
    for i in range(2):
        produced = (tmp_path / f"output_{i}.bin").read_bytes()
        assert produced == golden[f"out_{i}"].tobytes()  # TVM 0.16's run
        assert produced == python[i].tobytes()  # tvmrt.dlr's


def test_the_program_builds_as_cxx_too(native_root: Path, neo_root: Path, tmp_path: Path) -> None:
    """DLR's own dlr.h is C++ only; DLR programs were C++: tvmrt's header serves both."""
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    native = _build("plain", native_root)
    exe = tmp_path / "dlr_model_cxx"
    cmd = ["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-x", "c++", f"-I{INCLUDE}"]
    cmd += [str(REPO / "examples" / "cpp" / "dlr_model.c"), "-x", "none", "-o", str(exe)]
    cmd += [f"-L{native.lib_dir}", "-ldlr", f"-Wl,-rpath,{native.lib_dir}"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    folder = _neo(neo_root, tmp_path)
    proc = _run(native, exe, folder)
    assert proc.returncode == 0, proc.stderr
    golden = np.load(neo_root / "neo-cpu.npz")
    assert (tmp_path / "output_0.bin").read_bytes() == golden["out_0"].tobytes()


def test_the_device_check_keeps_dlrs_words(
    native: NativeBuild, program: Path, neo_root: Path, tmp_path: Path
) -> None:
    folder = _neo(neo_root, tmp_path)
    meta = json.loads((folder / "compiled.meta").read_text())
    meta["Requirements"]["TargetDeviceType"] = "gpu"
    (folder / "compiled.meta").write_text(json.dumps(meta))
    proc = _run(native, program, folder)
    assert proc.returncode == 1
    assert proc.stderr == f"CreateDLRModel failed: DLRError: {DEVICE_ERROR}\n"
    with pytest.raises(DLRError, match=re.escape(DEVICE_ERROR)):
        dlr.DLRModel(str(folder))
    asked_gpu = native.run(program, neo_root / "neo-cpu", tmp_path, "2")
    assert asked_gpu.stderr == (
        'CreateDLRModel failed: DLRError: Compiled model requires device type "cpu" but '
        'user gave "gpu".\n'
    )


def test_relay_vm_folders_are_refused_by_name(
    native: NativeBuild, program: Path, neo_root: Path, tmp_path: Path
) -> None:
    proc = native.run(program, neo_root / "neo-relayvm", tmp_path)
    assert proc.returncode == 1
    assert "UnsupportedError: Relay VM models need tvmrt's native Relay VM" in proc.stderr
    assert str(neo_root / "neo-relayvm") in proc.stderr


def _bad_meta(folder: Path) -> None:
    (folder / "compiled.meta").write_text('{"Requirements": {"TargetDeviceType": "gpu"')


def _deep_meta(folder: Path) -> None:
    (folder / "compiled.meta").write_text("[" * 5000 + "]" * 5000)


def _links(folder: Path) -> None:
    (folder / "kernels.so").symlink_to(folder.parent)
    (folder / "more.params").mkdir()


def _dangling(folder: Path) -> None:
    (folder / "extra.json").symlink_to(folder / "missing.json")


def _no_lib(folder: Path) -> None:
    (folder / "compiled.so").unlink()


def _two_graphs(folder: Path) -> None:
    shutil.copy(folder / "compiled_model.json", folder / "other.json")


def _short_params(folder: Path) -> None:
    blob = (folder / "compiled.params").read_bytes()
    (folder / "compiled.params").write_bytes(blob[: len(blob) // 3])


def _bad_graph(folder: Path) -> None:
    (folder / "compiled_model.json").write_text('{"nodes": [{"op": "null", "name": 7}]}')


def _junk_lib(folder: Path) -> None:
    (folder / "compiled.so").write_bytes(b"\x7fELF" + b"\0" * 60)


def _fifo_lib(folder: Path) -> None:
    (folder / "compiled.so").unlink()
    os.mkfifo(folder / "compiled.so")


def _treelite(folder: Path) -> None:
    (folder / "compiled.params").unlink()


def _saved_model(folder: Path) -> None:
    (folder / "compiled.params").unlink()
    (folder / "saved_model.pb").write_bytes(b"\x08\x01")


def _tensorrt(folder: Path) -> None:
    (folder / "compiled.so").rename(folder / "compiled.tensorrt")


def _empty(folder: Path) -> None:
    for f in folder.iterdir():
        f.unlink()


HOSTILE = {
    # DLR ignores a meta that does not parse: the model runs, without metadata (the value: what
    # the program prints); the others fail with an error that says this
    "bad meta JSON": (_bad_meta, "metadata no"),
    "meta nested 5000 deep": (_deep_meta, "metadata no"),
    # folders (and links to them) with model suffixes are not model files; a dangling link is
    "links": (_links, "metadata yes"),
    "dangling link": (_dangling, "DLRError: Found multiple *.json files: "),
    "no library": (
        _no_lib,
        "DLRError: Invalid TVM model artifact. Must have .so, .json, and .params",
    ),
    "two graphs": (_two_graphs, "DLRError: Found multiple *.json files: "),
    "truncated params": (_short_params, "ParamsFormatError: params blob: truncated"),
    "bad graph": (_bad_graph, "GraphFormatError: "),
    "junk library": (_junk_lib, "ModuleLoadError: cannot load "),
    "FIFO library": (_fifo_lib, "DLRError: the model library "),
    "empty folder": (_empty, "DLRError: Unable to determine backend from path: "),
    "no params (Treelite)": (_treelite, "DLR takes it for a Treelite (decision tree) model"),
    "SavedModel": (_saved_model, "is a TensorFlow 2 SavedModel (DLR's tensorflow backend)"),
    "TensorRT engine": (_tensorrt, "This model requires DLR release-1.1.0 to run."),
}

# the refusals of DLR's own rules (files, backend), worded as tvmrt.dlr words them; the
# others come from the runtimes' parsers and loaders, whose C and Python texts differ
DLR_WORDS = {
    "dangling link",
    "no library",
    "two graphs",
    "empty folder",
    "no params (Treelite)",
    "SavedModel",
    "TensorRT engine",
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_folders_give_clear_errors(
    native_asan: NativeBuild, native_root: Path, neo_root: Path, tmp_path: Path, case: str
) -> None:
    """Under ASan + UBSan."""
    out = native_root / "dlr-example-asan"
    out.mkdir(exist_ok=True)
    native, program = native_asan, _program(native_asan, out)
    folder = _neo(neo_root, tmp_path)
    spoil, expected = HOSTILE[case]
    spoil(folder)
    proc = _run(native, program, folder)
    if expected.startswith("metadata "):  # the model runs
        assert proc.returncode == 0, proc.stderr
        assert expected in proc.stdout
        golden = np.load(neo_root / "neo-cpu.npz")
        assert (tmp_path / "output_0.bin").read_bytes() == golden["out_0"].tobytes()
        return
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.startswith("CreateDLRModel failed: "), proc.stderr
    assert expected in proc.stderr
    assert "Sanitizer" not in proc.stderr
    with pytest.raises(TVMError) as python:
        dlr.DLRModel(str(folder))
    if case in DLR_WORDS:  # DLR's own checks: the Python tvmrt.dlr says the same
        assert str(python.value) in proc.stderr


CHECKS = {
    "null handle": "-1 InvalidArgumentError: CreateDLRModel: handle is NULL",
    "no model": "-1 InvalidArgumentError: RunDLRModel: model is nullptr, create it first",
    "create": "0 ok",
    "count": "-1 DLRError: Mismatch found in input data size. Value read: 5, Expected: 192",
    "negative": "-1 InvalidArgumentError: SetDLRInput: shape[0] is -1, expected a size >= 0",
    "dim": "-1 InvalidArgumentError: SetDLRInput: dim is 33, expected 0 to 32",
    "unknown": "-1 DLRError: nope is not a valid input name.",
    "null input": "-1 InvalidArgumentError: SetDLRInput: input is NULL",
    "flat": "0 ok",
    "round trip": "equal",
    "input name": "-1 DLRError: GetDLRInputName: input index 2 is out of range: the model has "
    "2 inputs",
    "input 1 type": "int32",
    "output": "-1 DLRError: GetDLROutput: output index 5 is out of range: the model has 2 outputs",
    "tensor dtype": "-1 ArrayError: input 'data' expects shape (1, 3, 8, 8) and dtype float32, "
    "got shape (1, 3, 8, 8) and dtype int32",
    "tensor flat": "0 ok",
    "mask count": "-1 DLRError: Mismatch found in input data size. Value read: 1, Expected: 10",
    "run": "0 ok",
    "zero copy": "0 ok",
    "zero copy output": "equal",  # the bound buffer, not the zeros set before, was read
    "zero copy unknown": "-1 DLRError: nope is not a valid input name.",
    "run again": "0 ok",
    "class_id index": "1",
    "index nope": "-1 DLRError: Couldn't find index for output node nope!",
    "affinity 0": "0 ok",
    "threads": "0 ok",
    "device type": "1",
    "delete again": "0 ok",
    "managed after delete": "2 read",
    "elems name 1": "class_id",
    "elems output 0": "10 2",
    "elems missing": "-1 DLRError: Invalid TVM model. Must have TVM_GRAPH, TVM_PARAMS and TVM_LIB "
    "elements",
    "elems type": "-1 InvalidArgumentError: model element 1 has type 42, expected a "
    "DLRModelElemType (0 to 5)",
    "bad meta": "0 ok",  # DLR ignores a meta that does not parse (no device check either)
    "bad meta has metadata": "0",
    "bad meta name": "-1 DLRError: No metadata file was found! (BAD/compiled.meta is not valid "
    "JSON (expected ',' or '}' at byte 43))",
    "bad meta device": "-1 DLRError: No metadata file was found! (BAD/compiled.meta is not "
    "valid JSON (expected ',' or '}' at byte 43))",
}
REFUSED = {
    "affinity 1": "UnsupportedError: UseDLRCPUAffinity: ",
    "malloc": "UnsupportedError: SetDLRCustomAllocatorMalloc: ",
    "pipeline": "UnsupportedError: CreateDLRPipeline: ",
    "use after delete": "ArgumentTypeError: RunDLRModel: ",
    "elems relay": "UnsupportedError: Relay VM models need ",
    "elems short params": "ParamsFormatError: params blob: truncated",
    "tensor device": "DeviceUnavailableError: ",
    "zero copy unaligned": "ArrayError: zero-copy input 'data': data at ",
}


def test_the_api_refuses_misuse_by_name(
    native: NativeBuild, native_root: Path, neo_root: Path, tmp_path: Path
) -> None:
    exe = native_root / f"dlr_checks-{native.variant}"
    cmd = ["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", *native.flags.split(), f"-I{INCLUDE}"]
    cmd += [str(REPO / "tests" / "native" / "c" / "dlr_checks.c"), "-o", str(exe)]
    cmd += [f"-L{native.lib_dir}", "-ldlr", f"-Wl,-rpath,{native.lib_dir}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    folder = _neo(neo_root, tmp_path)
    bad = tmp_path / "bad-meta"
    shutil.copytree(folder, bad)
    (bad / "compiled.meta").write_text('{"Requirements": {"TargetDeviceType": "gpu"')
    run = native.run(exe, folder, bad)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Sanitizer" not in run.stderr
    lines = dict(line.split(": ", 1) for line in run.stdout.splitlines())
    for label, expected in CHECKS.items():
        assert lines[label] == expected.replace("BAD", str(bad)), label
    for label, start in REFUSED.items():
        assert lines[label].startswith(f"-1 {start}"), (label, lines[label])


def test_libdlr_exports_dlrs_api_and_tvms(native: NativeBuild) -> None:
    lib = native.lib_dir / "libdlr.so"
    out = subprocess.run(
        ["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True
    ).stdout
    exported = {line.split()[-1] for line in out.splitlines() if line.split()[-2:-1] == ["T"]}
    text = (INCLUDE / "dlr.h").read_text()
    declared = set(re.findall(r"^DLR_DLL [^(;]*?\b(\w+)\(", text, re.MULTILINE))
    assert len(declared) == 37  # DLR 1.10's dlr.h less CreateDLRModelFromHexagon
    assert declared <= exported
    assert all(n in declared or n.startswith(("TVM", "tvmrt_")) for n in exported)
    elf = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True, check=True)
    assert "Library soname: [libdlr.so]" in elf.stdout


@pytest.mark.skipif(shutil.which("pkg-config") is None, reason="pkg-config is not installed")
def test_pkg_config_dlr_links_a_dlr_program(
    native_root: Path, neo_root: Path, tmp_path: Path
) -> None:
    """The wheel's layout (tvmrt/include, tvmrt/lib with libdlr.so and pkgconfig/dlr.pc):
    `pkg-config --cflags --libs dlr` is all a DLR program needs."""
    native = _build("plain", native_root)
    package = REPO / "src" / "tvmrt"
    root = tmp_path / "site" / "tvmrt"
    shutil.copytree(package / "include", root / "include")
    shutil.copytree(package / "lib" / "pkgconfig", root / "lib" / "pkgconfig")
    shutil.copy(native.lib_dir / "libdlr.so", root / "lib" / "libdlr.so")
    env = dict(native.env, PKG_CONFIG_PATH=str(root / "lib" / "pkgconfig"))
    flags = subprocess.run(
        ["pkg-config", "--cflags", "--libs", "dlr"], env=env, capture_output=True, text=True
    ).stdout.split()
    exe = tmp_path / "dlr_model"
    source = REPO / "examples" / "cpp" / "dlr_model.c"
    subprocess.run(["cc", "-std=c11", str(source), *flags, "-o", str(exe)], env=env, check=True)
    folder = _neo(neo_root, tmp_path)
    proc = _run(native, exe, folder)
    assert proc.returncode == 0, proc.stderr
    golden = np.load(neo_root / "neo-cpu.npz")
    assert (tmp_path / "output_1.bin").read_bytes() == golden["out_1"].tobytes()
    ldd = subprocess.run(["ldd", str(exe)], capture_output=True, text=True, check=True).stdout
    assert str((root / "lib").resolve()) in os.path.realpath(
        ldd.split("libdlr.so => ")[1].split(" (")[0]
    )


def test_libdlr_keeps_the_wheels_glibc_floor(native_root: Path) -> None:
    """No glibc symbol newer than manylinux2014's 2.17 (stat and fstat, GLIBC_2.33 today,
    are not used: the wheel would need glibc 2.33)."""
    lib = _build("plain", native_root).lib_dir / "libdlr.so"
    out = subprocess.run(["objdump", "-T", str(lib)], capture_output=True, text=True, check=True)
    versions = {tuple(map(int, v.split("."))) for v in re.findall(r"GLIBC_(\d+\.\d+)", out.stdout)}
    assert versions, out.stdout[:2000]
    assert max(versions) <= (2, 17), sorted(versions)


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")
def test_cmake_target_tvmrt_dlr_links_a_dlr_program(
    native_root: Path, neo_root: Path, tmp_path: Path
) -> None:
    """find_package(tvmrt) gives tvmrt::dlr (libdlr.so found in the wheel's lib/)."""
    native = _build("plain", native_root)
    package = REPO / "src" / "tvmrt"
    root = tmp_path / "site" / "tvmrt"
    shutil.copytree(package / "include", root / "include")
    shutil.copytree(package / "lib" / "cmake", root / "lib" / "cmake")
    for name in ("libdlr.so", "libtvmrt_runtime.so"):
        shutil.copy(native.lib_dir / name, root / "lib" / name)
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(REPO / "examples" / "cpp" / "dlr_model.c", project / "dlr_model.c")
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.13)\nproject(app C)\nfind_package(tvmrt REQUIRED)\n"
        "add_executable(dlr_model dlr_model.c)\ntarget_link_libraries(dlr_model tvmrt::dlr)\n"
    )
    build = tmp_path / "build"
    for cmd in (
        ["cmake", "-S", str(project), "-B", str(build), f"-Dtvmrt_DIR={root / 'lib/cmake/tvmrt'}"],
        ["cmake", "--build", str(build)],
    ):
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
    folder = _neo(neo_root, tmp_path)
    proc = _run(native, build / "dlr_model", folder)
    assert proc.returncode == 0, proc.stderr
    golden = np.load(neo_root / "neo-cpu.npz")
    assert (tmp_path / "output_0.bin").read_bytes() == golden["out_0"].tobytes()
