"""Issue 48: firmware that faults, hangs, aborts or runs out of workspace, packages that
need a vendor SDK or hold objects for another machine or float ABI: each is a clear error
naming what went wrong, never a hang or a wrong answer. Every bad package is made here,
from a good one of tests/mlf_aot (TVM 0.16's MLF export)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from support.mlf_aot_cases import golden, package_path, same_bits
from tvmrt.error import ModuleLoadError, TVMError, UsageError
from tvmrt.micro import board, build_firmware, run_firmware


def _copy(mlf_root: Path, case: str, tmp_path: Path) -> Path:
    folder = tmp_path / case
    shutil.copytree(package_path(mlf_root, case, "folder"), folder)
    return folder


def _edit_entry(folder: Path, model: str, statement: str, header: str = "") -> None:
    """Put ``statement`` first in the entry function's body (and ``header`` on top)."""
    for source in (folder / "codegen/host/src").glob("*.c"):
        text = source.read_text()
        entry = re.search(r"int32_t tvmgen_" + model + r"_run\([^)]*\)\s*\{", text)
        if entry is not None:
            text = text[: entry.end()] + statement + text[entry.end() :]
            source.write_text(header + text)
            return
    raise AssertionError("no entry function found")


def _run(folder: Path, case_root: Path, case: str, name: str, tmp_path: Path) -> list[np.ndarray]:
    inputs, _ = golden(case_root, case)
    firmware = build_firmware(str(folder), board(name), work=tmp_path / "work")
    return run_firmware(firmware, list(inputs.values()), timeout=20).outputs


def test_a_vendor_sdk_header_is_refused_naming_it(mlf_root: Path, tmp_path: Path) -> None:
    folder = _copy(mlf_root, "int8_c_linked", tmp_path)
    _edit_entry(folder, "int8_net", "", header='#include "esp_attr.h"\n#include <esp_timer.h>\n')
    with pytest.raises(ModuleLoadError) as info:
        build_firmware(str(folder), board("mps2-an385"), work=tmp_path / "work")
    message = str(info.value)
    assert "includes <esp_attr.h> (ESP-IDF (Espressif)); tvmrt's micro runtime does not" in message
    assert "<esp_timer.h> (ESP-IDF (Espressif))" in message


def test_a_model_that_never_returns_is_stopped(
    mlf_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _copy(mlf_root, "int8_c_linked", tmp_path)
    _edit_entry(folder, "int8_net", "for (volatile int spin = 1; spin;) {}")
    inputs, _ = golden(mlf_root, "int8_c_linked")
    firmware = build_firmware(str(folder), board("mps2-an385"), work=tmp_path / "work")
    monkeypatch.setenv("TVMRT_MICRO_TIMEOUT", "3")
    with pytest.raises(TVMError, match=r"no answer within 3 s \(set TVMRT_MICRO_TIMEOUT"):
        run_firmware(firmware, list(inputs.values()))


def test_a_fault_is_reported_with_the_fault_registers(mlf_root: Path, tmp_path: Path) -> None:
    folder = _copy(mlf_root, "int8_c_linked", tmp_path)
    _edit_entry(folder, "int8_net", "__builtin_trap();")
    with pytest.raises(TVMError, match=r"(?s)on mps2-an386: the processor faulted.*CFSR=\d+"):
        _run(folder, mlf_root, "int8_c_linked", "mps2-an386", tmp_path)


def test_an_abort_inside_the_model_is_reported(mlf_root: Path, tmp_path: Path) -> None:
    folder = _copy(mlf_root, "int8_c_linked", tmp_path)
    header = '#include "tvm/runtime/crt/platform.h"\n'
    _edit_entry(folder, "int8_net", "TVMPlatformAbort(kTvmErrorPlatformCheckFailure);", header)
    with pytest.raises(TVMError, match=r"(?s)called TVMPlatformAbort.*TVMPlatformAbort 1280"):
        _run(folder, mlf_root, "int8_c_linked", "mps3-an547", tmp_path)


def test_a_workspace_smaller_than_the_kernels_ask_is_an_error_not_an_overrun(
    mlf_root: Path, tmp_path: Path
) -> None:
    """metadata.json says the kernels need no workspace; they ask TVMBackendAllocWorkspace
    for 1728 bytes: the stack allocator refuses, the kernel returns -1."""
    folder = _copy(mlf_root, "float_packed_separate", tmp_path)
    meta = json.loads((folder / "metadata.json").read_text())
    for entry in meta["modules"]["float_net"]["memory"]["functions"]["main"]:
        entry["workspace_size_bytes"] = 0
    (folder / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(TVMError, match=r"the model's entry returned -1"):
        _run(folder, mlf_root, "float_packed_separate", "mps2-an385", tmp_path)


def test_inputs_of_the_wrong_size_or_dtype_are_refused(mlf_root: Path, tmp_path: Path) -> None:
    path = str(package_path(mlf_root, "int8_c_linked", "tar"))
    firmware = build_firmware(path, board("mps2-an385"), work=tmp_path)
    with pytest.raises(
        UsageError, match=r"input 'x': expected int8 of 16 bytes \(shape \[1, 16\]\)"
    ):
        run_firmware(firmware, [np.zeros((1, 16), "float32")])
    with pytest.raises(UsageError, match="got int8 of shape"):
        run_firmware(firmware, [np.zeros((1, 8), "int8")])


def _object_package(mlf_root: Path, tmp_path: Path, flags: list[str]) -> Path:
    """The c package with its C compiled to objects (as an llvm build ships them)."""
    folder = _copy(mlf_root, "int8_c_linked", tmp_path)
    lib = folder / "codegen/host/lib"
    lib.mkdir()
    include = Path(__import__("tvmrt").__file__).parent / "include"
    for i, source in enumerate(sorted((folder / "codegen/host/src").glob("*.c"))):
        subprocess.run(
            [
                *flags,
                "-O2",
                "-c",
                str(source),
                "-I",
                str(include),
                "-I",
                str(folder / "codegen/host/include"),
                "-o",
                str(lib / f"lib{i}.o"),
            ],
            check=True,
        )
        source.unlink()
    return folder


def test_an_object_code_package_links_and_runs(mlf_root: Path, tmp_path: Path) -> None:
    folder = _object_package(
        mlf_root, tmp_path, ["arm-none-eabi-gcc", "-mthumb", "-mcpu=cortex-m3", "-mfloat-abi=soft"]
    )
    _, want = golden(mlf_root, "int8_c_linked")
    assert same_bits(_run(folder, mlf_root, "int8_c_linked", "mps2-an385", tmp_path)[0], want[0])


def test_objects_of_another_float_abi_or_machine_are_refused(
    mlf_root: Path, tmp_path: Path
) -> None:
    soft = ["arm-none-eabi-gcc", "-mthumb", "-mcpu=cortex-m3", "-mfloat-abi=soft"]
    folder = _object_package(mlf_root, tmp_path / "soft", soft)
    with pytest.raises(
        ModuleLoadError, match=r"lib0.o uses the soft-float ABI, mps2-an386 the hard"
    ):
        build_firmware(str(folder), board("mps2-an386"), work=tmp_path / "w1")
    host = shutil.which("cc") or shutil.which("gcc")
    if host is None:
        pytest.skip("no host C compiler to make an x86-64 object")
    folder = _object_package(mlf_root, tmp_path / "host", [host])
    with pytest.raises(ModuleLoadError, match=r"lib0.o is not 32-bit little-endian"):
        build_firmware(str(folder), board("mps2-an385"), work=tmp_path / "w2")


def test_unknown_boards_and_missing_compilers_are_usage_errors(mlf_root: Path) -> None:
    path = str(package_path(mlf_root, "int8_c_linked", "tar"))
    with pytest.raises(UsageError, match=r"unknown board 'esp32'; tvmrt builds for mps2-an385"):
        board("esp32")
    with pytest.raises(UsageError, match=r"'no-such-gcc' was not found; install Arm's GNU"):
        build_firmware(path, board("mps2-an385"), cc="no-such-gcc")


def test_a_graph_naming_no_kernel_is_refused_before_any_code_is_written(
    micro_root: Path, tmp_path: Path
) -> None:
    """The graph's function names become C calls: one that is not an identifier (here a
    statement smuggled in) is refused, naming the node."""
    folder = tmp_path / "sine_graph"
    shutil.copytree(micro_root / "sine" / "sine_graph", folder)
    graph_file = folder / "executor-config/graph/sine.graph"
    graph = json.loads(graph_file.read_text())
    op = next(n for n in graph["nodes"] if n["op"] == "tvm_op")
    op["attrs"]["func_name"] = "abort(); int x"
    graph_file.write_text(json.dumps(graph))
    with pytest.raises(ModuleLoadError, match=r"calls 'abort\(\); int x', not a kernel"):
        build_firmware(str(folder), board("mps2-an385"), work=tmp_path / "work")
