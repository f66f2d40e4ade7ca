"""DLR's C API (libdlr.so) on Neo Relay VM folders (code.ro + compiled.so + compiled.meta, made
by tests/dlr/build_neo_fixtures.py with TVM 0.16's relay.vm.compile), plain and under ASan +
UBSan: examples/cpp/dlr_model.c runs the folder, and a Neo folder the test makes from the
relayvm fixtures' dyn-shape-op, and its outputs are TVM's, byte for byte, and the Python
tvmrt.dlr's; tests/native/c/dlr_vm_checks.c checks DLR's RelayVMModel answers call
by call (inputs and dtypes from the meta, output shapes from the meta until a run, what it
refuses, models from memory); hostile VM folders give named errors through DLRGetLastError."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from tests.native.conftest import NativeBuild
from tests.native.dlr_programs import check_program, neo_root, program, program_for

from tvmrt import dlr
from tvmrt.error import TVMError

__all__ = ["neo_root", "program"]  # fixtures


def _vm_folder(neo_root: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "neo-relayvm"
    shutil.copytree(neo_root / "neo-relayvm", folder)
    return folder


@pytest.mark.parametrize("batch", [1, 5])
def test_a_dlr_program_runs_a_neo_relay_vm_folder_bitwise(
    native: NativeBuild, program: Path, neo_root: Path, tmp_path: Path, batch: int
) -> None:
    folder = _vm_folder(neo_root, tmp_path)
    golden = np.load(neo_root / "neo-relayvm.npz")
    x = golden[f"x_{batch}"]
    x.tofile(tmp_path / "x.bin")
    proc = native.run(program, folder, tmp_path, f"x={tmp_path / 'x.bin'}")
    assert proc.returncode == 0, proc.stderr
    assert "Sanitizer" not in proc.stderr
    assert proc.stdout.splitlines() == [
        "DLR 1.10.0, backend relayvm, metadata yes, 1 inputs, 0 weights, 2 outputs",
        "input 0: x float32 (-1, 4)",  # the meta's shape: any batch
        f"output 0: features float32 ({batch}, 3)",  # the run's shapes
        f"output 1: total float32 ({batch})",
    ]
    python = dlr.DLRModel(str(folder)).run({"x": x})
    for i, name in enumerate(["features", "total"]):
        produced = (tmp_path / f"output_{i}.bin").read_bytes()
        assert produced == golden[f"{name}_{batch}"].tobytes()  # TVM 0.16's VM
        assert produced == python[i].tobytes()  # tvmrt.dlr's


@pytest.mark.parametrize("run", ["mixed", "empty"])
def test_a_neo_folder_made_from_the_relayvm_fixtures_runs_bitwise(
    native: NativeBuild, program: Path, artifacts: Path, tmp_path: Path, run: str
) -> None:
    """dyn-shape-op (argwhere, take, a dynamic reshape: int32 and float32 outputs whose shapes
    depend on the data, empty ones for an all-zero input) laid out as Neo ships a Relay VM
    model, with a meta the test writes."""
    case = artifacts / "relayvm" / "dyn-shape-op"
    golden = np.load(case / "golden.npz")
    x = golden[f"x__{run}"]
    outs = [golden[f"output_{i}__{run}"] for i in range(3)]
    folder = tmp_path / "neo-dyn-shape-op"
    folder.mkdir()
    shutil.copy(case / "code.ro", folder / "code.ro")
    shutil.copy(case / "lib.so", folder / "compiled.so")
    outputs = [
        {"name": f"out{i}", "dtype": str(o.dtype), "shape": [None, *o.shape[1:]]}
        for i, o in enumerate(outs)
    ]
    meta = {
        "Requirements": {"TargetDeviceType": "cpu"},
        "Model": {
            "Inputs": [{"name": "x", "dtype": "float32", "shape": [3, 4]}],
            "Outputs": outputs,
        },
    }
    (folder / "compiled.meta").write_text(json.dumps(meta))
    x.tofile(tmp_path / "x.bin")
    proc = native.run(program, folder, tmp_path, f"x={tmp_path / 'x.bin'}")
    assert proc.returncode == 0, proc.stderr
    assert "Sanitizer" not in proc.stderr
    shapes = [", ".join(str(d) for d in o.shape) for o in outs]
    assert proc.stdout.splitlines() == [
        "DLR 1.10.0, backend relayvm, metadata yes, 1 inputs, 0 weights, 3 outputs",
        "input 0: x float32 (3, 4)",
        f"output 0: out0 int32 ({shapes[0]})",
        f"output 1: out1 float32 ({shapes[1]})",
        f"output 2: out2 int32 ({shapes[2]})",
    ]
    python = dlr.DLRModel(str(folder)).run({"x": x})
    for i, expected in enumerate(outs):
        produced = (tmp_path / f"output_{i}.bin").read_bytes()
        assert produced == expected.tobytes()  # TVM 0.16's VM
        assert produced == python[i].tobytes()  # tvmrt.dlr's


CHECKS = {
    "create": "0 ok",
    "backend": "relayvm",
    "has metadata": "1",
    "inputs": "1",  # main's parameters
    "weights": "0",
    "outputs": "2",  # Model.Outputs
    "input 0": "x",
    "input 0 type": "float32",
    "input 0 shape": "-1 (-1, 4)",  # the meta's; -1: unknown size
    "input 1": "-1 DLRError: GetDLRInputName: input index 1 is out of range: the model has 1 "
    "inputs",
    "weight 0": "-1 DLRError: GetDLRWeightName: Not Implemented! (a RelayVM model has no weights)",
    "output 1 type": "float32",
    "output 0 shape before": "-1 (-1, 3)",  # before a run: the meta's, as DLR
    "output 1 shape before": "-1 (-1)",
    "output before run": "-1 DLRError: GetDLROutput: the RelayVM model has not run yet: its "
    "outputs are unknown",
    "output ptr before run": "-1 DLRError: GetDLROutputPtr: the RelayVM model has not run yet: "
    "its outputs are unknown",
    "run unset": "-1 DLRError: input x of the RelayVM model is not set (SetDLRInput)",
    "get input unset": "-1 DLRError: input x has not been set",
    "set unknown": "-1 DLRError: Invalid input node name! 'nope' is not a parameter of main",
    "set negative": "-1 InvalidArgumentError: SetDLRInput: shape[0] is -1, expected a size >= 0",
    "set null": "-1 InvalidArgumentError: SetDLRInput: input is NULL",
    "zero copy": "-1 DLRError: SetDLRInputTensorZeroCopy: model is not a TVMModel. Found "
    "'relayvm' but expected 'tvm'",
    "threads": "-1 DLRError: SetDLRNumThreads: Not Implemented! (RelayVM model)",
    "affinity": "-1 DLRError: UseDLRCPUAffinity: Not Implemented! (RelayVM model)",
    "set 5": "0 ok",
    "get input": "0 ok",
    "input round trip": "equal",
    "run 5": "0 ok",
    "output 0 shape": "15 (5, 3)",
    "output 1 shape": "5 (5)",
    "output 0": "0 ok",
    "total index": "1",
    "output total": "0 ok",
    "output 2": "-1 DLRError: GetDLROutput: output index 2 is out of range: the model has 2 "
    "outputs",
    "managed": "0 ok",
    "set tensor no data": "-1 InvalidArgumentError: SetDLRInputTensor: the tensor's data is NULL",
    "set tensor no shape": "-1 InvalidArgumentError: SetDLRInputTensor: the tensor has no valid "
    "shape (ndim 2)",
    "output tensor no data": "-1 InvalidArgumentError: GetDLROutputTensor: the tensor's data is "
    "NULL",
    "output tensor small": "-1 ArrayError: TVMArrayCopyFromTo: The size in bytes must exactly "
    "match (60 vs 16)",
    "set tensor 1": "0 ok",
    "run 1": "0 ok",
    "output 0 shape after 1": "3 (1, 3)",
    "output ptr": "0 ok",
    "delete": "0 ok",
    "managed after delete": "5",  # the first run's output outlives the model
    "elems": "0 ok",
    "elems set": "0 ok",
    "elems run": "0 ok",
    "elems total": "0 ok",
    "elems delete": "0 ok",
    "elems no meta": "-1 DLRError: Invalid RelayVM model. Must have RELAY_EXEC, TVM_LIB and "
    "NEO_METADATA elements",
}


def test_the_api_answers_as_dlrs_relay_vm_model(
    native: NativeBuild, native_root: Path, neo_root: Path, tmp_path: Path
) -> None:
    exe = check_program(native, native_root, "dlr_vm_checks")
    folder = _vm_folder(neo_root, tmp_path)
    golden = np.load(neo_root / "neo-relayvm.npz")
    golden["x_5"].tofile(tmp_path / "x5.bin")
    golden["x_1"].tofile(tmp_path / "x1.bin")
    run = native.run(exe, folder, tmp_path / "x5.bin", tmp_path / "x1.bin")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Sanitizer" not in run.stderr
    lines = dict(line.split(": ", 1) for line in run.stdout.splitlines())
    for label, expected in CHECKS.items():
        assert lines[label] == expected, label
    assert (folder / "features_5.bin").read_bytes() == golden["features_5"].tobytes()
    assert (folder / "total_5.bin").read_bytes() == golden["total_5"].tobytes()
    assert (folder / "features_1.bin").read_bytes() == golden["features_1"].tobytes()
    assert (folder / "managed_total.bin").read_bytes() == golden["total_5"].tobytes()
    assert (folder / "elems_total.bin").read_bytes() == golden["total_1"].tobytes()


def _meta(folder: Path, change: Callable[[dict[str, object]], None]) -> None:
    meta = json.loads((folder / "compiled.meta").read_text())
    change(meta["Model"])
    (folder / "compiled.meta").write_text(json.dumps(meta))


def _no_meta(folder: Path) -> None:
    (folder / "compiled.meta").unlink()


def _bad_meta(folder: Path) -> None:
    (folder / "compiled.meta").write_text('{"Model": ')


def _short_code(folder: Path) -> None:
    code = (folder / "code.ro").read_bytes()
    (folder / "code.ro").write_bytes(code[:200])


def _flipped_code(folder: Path) -> None:
    code = bytearray((folder / "code.ro").read_bytes())
    code[len(code) // 2] ^= 0xFF  # inside main's instructions: a hash stops it
    (folder / "code.ro").write_bytes(bytes(code))


def _junk_code(folder: Path) -> None:
    (folder / "code.ro").write_bytes(b"\x1d\x15\x14\x42" * 3)


def _no_inputs(folder: Path) -> None:
    _meta(folder, lambda model: model.pop("Inputs"))


def _no_outputs(folder: Path) -> None:
    _meta(folder, lambda model: model.pop("Outputs"))


def _gpu(folder: Path) -> None:
    meta = json.loads((folder / "compiled.meta").read_text())
    meta["Requirements"]["TargetDeviceType"] = "gpu"
    (folder / "compiled.meta").write_text(json.dumps(meta))


def _input(**change: object) -> Callable[[Path], None]:
    return lambda folder: _meta(folder, lambda model: model["Inputs"][0].update(change))  # type: ignore[index]


def _output(**change: object) -> Callable[[Path], None]:
    return lambda folder: _meta(folder, lambda model: model["Outputs"][0].update(change))  # type: ignore[index]


# (spoil, the error CreateDLRModel gives, whether tvmrt.dlr says the same words)
HOSTILE: dict[str, tuple[Callable[[Path], None], str, bool]] = {
    "missing meta": (
        _no_meta,
        "DLRError: Invalid RelayVM model artifact. Must have .so, .ro, and .meta files.",
        True,
    ),
    "meta not JSON": (_bad_meta, "compiled.meta is not valid JSON (unexpected end", False),
    "code.ro truncated": (
        _short_code,
        "ModuleLoadError: Relay VM executable: truncated: ",
        False,
    ),
    "code.ro damaged": (_flipped_code, "ModuleLoadError: Relay VM executable: instruction ", False),
    "code.ro junk": (  # its magic is read before the rest (binfmt/files.py, files.c)
        _junk_code,
        "ModuleLoadError: Relay VM code ",
        True,
    ),
    "no Model.Inputs": (_no_inputs, "DLRError: Invalid or missing input metadata: ", False),
    "no Model.Outputs": (_no_outputs, "DLRError: No output metadata found.", True),
    # a meta's shapes and dtypes size the caller's copies: checked at load (dlr_vm.c)
    "input shape overflows": (
        _input(shape=[1 << 32, 1 << 32]),
        "DLRError: Invalid or missing input metadata: Model.Inputs[0] (main's parameter 'x'): "
        "a shape whose size in bytes overflows int64",
        True,
    ),
    "output shape overflows": (
        _output(shape=[-1, 1 << 62]),
        "DLRError: No output metadata found. (Model.Outputs[0]: a shape whose size in bytes "
        "overflows int64)",
        True,
    ),
    "input dtype unknown": (
        _input(dtype="nope"),
        "DLRError: Invalid or missing input metadata: Model.Inputs[0] (main's parameter 'x'): "
        "a dtype that is not a data type",
        True,
    ),
    "gpu model": (
        _gpu,
        'DLRError: Compiled model requires device type "gpu" but user gave "cpu".',
        True,
    ),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_relay_vm_folders_give_named_errors(
    native_asan: NativeBuild, native_root: Path, neo_root: Path, tmp_path: Path, case: str
) -> None:
    """Under ASan + UBSan."""
    out = native_root / "dlr-example-asan"
    out.mkdir(exist_ok=True)
    exe = program_for(native_asan, out)
    folder = _vm_folder(neo_root, tmp_path)
    spoil, expected, same_words = HOSTILE[case]
    spoil(folder)
    np.load(neo_root / "neo-relayvm.npz")["x_1"].tofile(tmp_path / "x.bin")
    proc = native_asan.run(exe, folder, tmp_path, f"x={tmp_path / 'x.bin'}")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.startswith("CreateDLRModel failed: "), proc.stderr
    assert expected in proc.stderr
    assert "Sanitizer" not in proc.stderr
    with pytest.raises(TVMError) as python:
        dlr.DLRModel(str(folder))
    if same_words:
        assert str(python.value) in proc.stderr


def test_a_meta_describing_fewer_outputs_than_the_run_gives_is_named(
    native_asan: NativeBuild, native_root: Path, neo_root: Path, tmp_path: Path
) -> None:
    """DLR wrote past its outputs here; tvmrt names both counts."""
    out = native_root / "dlr-example-asan"
    out.mkdir(exist_ok=True)
    exe = program_for(native_asan, out)
    folder = _vm_folder(neo_root, tmp_path)
    _meta(folder, lambda model: model.update(Outputs=model["Outputs"][:1]))  # type: ignore[index]
    np.load(neo_root / "neo-relayvm.npz")["x_1"].tofile(tmp_path / "x.bin")
    proc = native_asan.run(exe, folder, tmp_path, f"x={tmp_path / 'x.bin'}")
    assert proc.returncode == 1
    assert proc.stderr == (
        "RunDLRModel failed: DLRError: the model gave 2 outputs but its metadata "
        "(Model.Outputs) describes 1\n"
    )


def test_an_output_dtype_the_run_disagrees_with_is_refused_not_copied(
    native_asan: NativeBuild, native_root: Path, neo_root: Path, tmp_path: Path
) -> None:
    """The meta says int8 where the executable gives float32: the caller sizes its buffer by
    the meta (3 bytes), so copying the run's 12 bytes wrote past it (ASan: heap-buffer-overflow
    in GetDLROutput); now the run is refused, naming both dtypes, in C and Python."""
    out = native_root / "dlr-example-asan"
    out.mkdir(exist_ok=True)
    exe = program_for(native_asan, out)
    folder = _vm_folder(neo_root, tmp_path)
    _output(dtype="int8")(folder)
    x = np.load(neo_root / "neo-relayvm.npz")["x_1"]
    x.tofile(tmp_path / "x.bin")
    proc = native_asan.run(exe, folder, tmp_path, f"x={tmp_path / 'x.bin'}")
    expected = (
        "DLRError: output 0 (features) of the run is float32 but the metadata "
        "(Model.Outputs[0].dtype) says int8"
    )
    assert "Sanitizer" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 1
    assert proc.stderr == f"RunDLRModel failed: {expected}\n"
    model = dlr.DLRModel(str(folder))
    with pytest.raises(TVMError) as python:
        model.run({"x": x})
    assert str(python.value) == expected.removeprefix("DLRError: ")
