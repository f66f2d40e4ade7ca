"""DLR's C API refuses what it must, by name, never crashing (under ASan + UBSan): hostile
Neo folders the tests make (bad meta JSON, missing, duplicate and dangling files, a
truncated params blob, a FIFO or junk for a library, other DLR backends) through the DLR
program, and tests/native/c/dlr_checks.c misusing the API call by call (NULL pointers, bad
indexes and counts, tensors of another dtype or device, handles used after delete, model
elements, zero-copy inputs)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from tests.native.conftest import NativeBuild
from tests.native.dlr_programs import (
    check_program,
    neo_folder,
    neo_root,
    program_for,
    run_program,
)

from tvmrt import dlr
from tvmrt.error import TVMError

__all__ = ["neo_root"]  # a fixture


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


def _fifo(name: str) -> Callable[[Path], None]:
    def spoil(folder: Path) -> None:
        (folder / name).unlink()
        os.mkfifo(folder / name)

    return spoil


def _sparse(name: str, keep: bool = True) -> Callable[[Path], None]:
    def spoil(folder: Path) -> None:
        if not keep:
            (folder / name).write_bytes(b"")
        with open(folder / name, "r+b") as f:
            f.truncate(3 << 30)  # sparse: no disk, and no memory unless read

    return spoil


def _treelite(folder: Path) -> None:
    (folder / "compiled.params").unlink()


def _saved_model(folder: Path) -> None:
    (folder / "compiled.params").unlink()
    (folder / "saved_model.pb").write_bytes(b"\x08\x01")


def _tensorrt(folder: Path) -> None:
    (folder / "compiled.so").rename(folder / "compiled.tensorrt")


def _data_transform(folder: Path) -> None:
    meta = json.loads((folder / "compiled.meta").read_text())
    meta["DataTransform"] = {"Input": {"ColumnTransform": []}}
    (folder / "compiled.meta").write_text(json.dumps(meta))


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
    # every file is opened without blocking and sized before it is read (files.c)
    "FIFO graph": (_fifo("compiled_model.json"), "DLRError: graph file "),
    "FIFO params": (_fifo("compiled.params"), "DLRError: params file "),
    "FIFO meta": (_fifo("compiled.meta"), "DLRError: metadata file "),
    "3 GiB graph": (_sparse("compiled_model.json"), "over the limit of 1073741824 bytes"),
    "3 GiB meta": (_sparse("compiled.meta"), "over the limit of 16777216 bytes"),
    "3 GiB library": (_sparse("compiled.so"), "over the limit of 2147483648 bytes"),
    "3 GiB of zeros for params": (
        _sparse("compiled.params", keep=False),
        "does not start with the magic b79c04054f8de5f7 of a TVM params blob",
    ),
    "empty folder": (_empty, "DLRError: Unable to determine backend from path: "),
    "no params (Treelite)": (_treelite, "DLR takes it for a Treelite (decision tree) model"),
    "SavedModel": (_saved_model, "is a TensorFlow 2 SavedModel (DLR's tensorflow backend)"),
    "DataTransform": (_data_transform, "describes DataTransform (an AutoML model taking JSON"),
    "TensorRT engine": (_tensorrt, "This model requires DLR release-1.1.0 to run."),
}

# the refusals of DLR's own rules (files, backend), worded as tvmrt.dlr words them; the
# others come from the runtimes' parsers and loaders, whose C and Python texts differ
DLR_WORDS = {
    "FIFO library",
    "FIFO graph",
    "FIFO params",
    "FIFO meta",
    "3 GiB graph",
    "3 GiB meta",
    "3 GiB library",
    "3 GiB of zeros for params",
    "DataTransform",
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
    native, program = native_asan, program_for(native_asan, out)
    folder = neo_folder(neo_root, tmp_path)
    spoil, expected = HOSTILE[case]
    spoil(folder)
    proc = run_program(native, program, folder)
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
    "pool threads": "3",  # SetDLRNumThreads sized tvmrt's pool
    "pool threads after 0": "3",  # n <= 0 changes nothing, as DLR
    "device type": "1",
    "delete again": "0 ok",
    "managed after delete": "2 read",
    "elems name 1": "class_id",
    "elems output 0": "10 2",
    "elems twice": "0 ok",  # the second meta read replaces the first (no leak under ASan)
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
    "elems relay": "DLRError: Invalid RelayVM model. Must have RELAY_EXEC, TVM_LIB and "
    "NEO_METADATA",
    "elems short params": "ParamsFormatError: params blob: truncated",
    "tensor device": "DeviceUnavailableError: ",
    "zero copy unaligned": "ArrayError: zero-copy input 'data': data at ",
}


def test_the_api_refuses_misuse_by_name(
    native: NativeBuild, native_root: Path, neo_root: Path, tmp_path: Path
) -> None:
    exe = check_program(native, native_root, "dlr_checks")
    folder = neo_folder(neo_root, tmp_path)
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
