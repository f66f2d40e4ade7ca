"""Every file reader refuses a FIFO (it never blocks) and checks a file's size before reading
it (a sparse 3 GiB file where a smaller one belongs costs a page, not 3 GiB), in tvmrt.dlr and
the loaders beneath it (binfmt/files.py). Each reader runs in a child process with a timeout,
so a reader that blocks on a FIFO shows as a timeout, and the child reports its peak RSS
(VmHWM) after the refusal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.paths import REPO

_CHILD = """
import sys
from tvmrt.error import TVMError
kind, path = sys.argv[1], sys.argv[2]
try:
    if kind == "dlr":
        from tvmrt import dlr
        dlr.DLRModel(path)
    elif kind == "module":
        from tvmrt.runtime.module import load_module
        load_module(path)
    elif kind == "params":
        from tvmrt.runtime.params import mapped_file
        with mapped_file(path) as view:
            bytes(view[:8])
    elif kind == "graph":
        from tvmrt.binfmt.files import read_graph
        read_graph(path)
    elif kind == "mlf":
        from tvmrt.runtime.loaders.mlf_aot import read_package
        read_package(path, path)
    print("loaded")
except TVMError as exc:
    print(f"{type(exc).__name__}: {exc}")
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
print("peak-kib", hwm)
"""

PEAK_BOUND_KIB = 400 << 10  # the child's own peak (imports included) stays far below 3 GiB


def _child(kind: str, path: Path, timeout: float = 30) -> tuple[str, int]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, kind, str(path)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the {kind} reader blocked on {path} (no answer in {timeout} s)")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    return lines[-2], int(lines[-1].split()[1])


DLR_FILES = {
    "neo-cpu": ["compiled_model.json", "compiled.params", "compiled.meta", "compiled.so"],
    "neo-relayvm": ["code.ro", "compiled.meta", "compiled.so"],
}
ROLES = {
    "compiled_model.json": "graph file",
    "compiled.params": "params file",
    "compiled.meta": "metadata file",
    "compiled.so": "the model library",
    "code.ro": "Relay VM code",
}
CASES = [(folder, name) for folder, names in DLR_FILES.items() for name in names]


@pytest.mark.parametrize(("folder", "name"), CASES)
def test_a_fifo_in_a_neo_folder_is_refused_not_waited_on(neo_copy, folder: str, name: str) -> None:  # type: ignore[no-untyped-def]
    model = neo_copy(folder)
    (model / name).unlink()
    os.mkfifo(model / name)
    said, _ = _child("dlr", model)
    assert said == (
        f"DLRError: {ROLES[name]} {model / name} is not a regular file (a FIFO); expected a file"
    )


# params and code.ro may be as large as 16 GiB (weights): their magic is read first (below)
BOUNDED = [(f, n) for f, n in CASES if n not in ("compiled.params", "code.ro")]
LIMITS = {"compiled_model.json": 1 << 30, "compiled.meta": 16 << 20, "compiled.so": 2 << 30}


@pytest.mark.parametrize(("folder", "name"), BOUNDED)
def test_a_sparse_3_gib_file_in_a_neo_folder_is_refused_unread(
    neo_copy, folder: str, name: str
) -> None:  # type: ignore[no-untyped-def]
    model = neo_copy(folder)
    path = model / name
    with open(path, "r+b") as f:
        f.truncate(3 << 30)  # the real bytes, then zeros to 3 GiB (no disk used)
    said, peak = _child("dlr", model)
    assert said == (
        f"DLRError: {ROLES[name]} {path} is {3 << 30} bytes, over the limit of {LIMITS[name]} "
        "bytes for it; expected a smaller file"
    )
    assert peak < PEAK_BOUND_KIB, f"peak RSS {peak} KiB reading {name}"


@pytest.mark.parametrize("name", ["compiled.params", "code.ro"])
def test_a_sparse_3_gib_file_of_zeros_is_refused_at_its_magic(neo_copy, name: str) -> None:  # type: ignore[no-untyped-def]
    model = neo_copy("neo-cpu" if name == "compiled.params" else "neo-relayvm")
    path = model / name
    path.unlink()
    with open(path, "wb") as f:
        f.truncate(3 << 30)
    said, peak = _child("dlr", model)
    what = "a TVM params blob" if name == "compiled.params" else "a Relay VM executable"
    magic = "b79c04054f8de5f7" if name == "compiled.params" else "1d1514422fde25d2"
    cls = "ParamsFormatError" if name == "compiled.params" else "ModuleLoadError"
    assert said == (
        f"{cls}: {ROLES[name]} {path} does not start with the magic {magic} of {what} (it "
        f"starts with 0000000000000000); expected {what}"
    )
    assert peak < PEAK_BOUND_KIB, f"peak RSS {peak} KiB reading {name}"


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _sparse(path: Path) -> Path:
    with open(path, "wb") as f:
        f.truncate(3 << 30)
    return path


def test_the_loaders_refuse_fifos(tmp_path: Path) -> None:
    lib = _fifo(tmp_path / "deploy.so")
    said, _ = _child("module", lib)
    assert (
        said
        == f"ModuleLoadError: module file {lib} is not a regular file (a FIFO); expected a file"
    )
    params = _fifo(tmp_path / "deploy.params")
    said, _ = _child("params", params)
    assert said == (
        f"ParamsFormatError: params file {params} is not a regular file (a FIFO); expected a file"
    )
    graph = _fifo(tmp_path / "deploy_graph.json")
    said, _ = _child("graph", graph)
    assert said == (
        f"GraphFormatError: graph file {graph} is not a regular file (a FIFO); expected a file"
    )
    mlf = tmp_path / "mlf"
    mlf.mkdir()
    meta = _fifo(mlf / "metadata.json")
    said, _ = _child("mlf", meta)
    assert said == (
        f"ModuleLoadError: MLF metadata {meta} is not a regular file (a FIFO); expected a file"
    )


def test_the_loaders_check_sizes_before_reading(tmp_path: Path) -> None:
    lib = _sparse(tmp_path / "deploy.so")
    said, peak = _child("module", lib)
    assert said == (
        f"ModuleLoadError: module file {lib} is {3 << 30} bytes, over the limit of {2 << 30} "
        "bytes for it; expected a smaller file"
    )
    assert peak < PEAK_BOUND_KIB
    graph = _sparse(tmp_path / "deploy_graph.json")
    said, peak = _child("graph", graph)
    assert said == (
        f"GraphFormatError: graph file {graph} is {3 << 30} bytes, over the limit of {1 << 30} "
        "bytes for it; expected a smaller file"
    )
    assert peak < PEAK_BOUND_KIB
    mlf = tmp_path / "mlf"
    mlf.mkdir()
    meta = _sparse(mlf / "metadata.json")
    said, peak = _child("mlf", meta)
    assert said == (
        f"ModuleLoadError: MLF metadata {meta} is {3 << 30} bytes, over the limit of "
        f"{16 << 20} bytes for it; expected a smaller file"
    )
    assert peak < PEAK_BOUND_KIB
