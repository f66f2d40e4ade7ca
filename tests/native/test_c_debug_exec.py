"""The debug executor from a C program (tests/native/c/debug_exec.c), plain and under
ASan + UBSan + LSan: TVM's run_individual bytes, every node's output bitwise the Python
engine's, and a misused call in the Python engine's words."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from tests.native.conftest import NativeBuild

from tvmrt import runtime
from tvmrt.error import TVMError


def test_debug_executor_from_c(
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    artifacts: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = artifacts / "batched" / "cnn-b1"
    with np.load(folder.parent / "golden.npz") as npz:
        x = np.ascontiguousarray(npz["x"][:1])
    (tmp_path / "x.bin").write_bytes(x.tobytes())
    proc = native.run(
        compile_c(native, "debug_exec", False),
        folder / "deploy_lib.so",
        tmp_path / "x.bin",
        tmp_path / "out.bin",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-1] == "ok"

    # the reference: the Python engine's debug executor over the same file
    monkeypatch.setenv("TVMRT_GRAPH_ENGINE", "python")
    mod = runtime.load_module(str(folder / "deploy_lib.so"))["debug_create"](
        "default", runtime.cpu()
    )
    mod["set_input"]("x", runtime.ndarray.array(x))
    count = int(lines[0].split()[1])
    want = b""
    for nid in range(count):
        mod["execute_node"](nid)
        want += mod["get_node_output"](nid, 0).numpy().tobytes()
    want += mod["debug_get_output"](count - 1).numpy().tobytes()
    assert (tmp_path / "out.bin").read_bytes() == want
    with pytest.raises(TVMError) as err:
        mod["execute_node"](count)
    assert lines[1] == f"{type(err.value).__name__}: {err.value}"
    graph = json.loads(runtime.load_module(str(folder / "deploy_lib.so"))["get_graph_json"]())
    ops = sum(node["op"] != "null" for node in graph["nodes"])
    assert lines[2] == f"profiled {ops}"
    assert os.path.getsize(tmp_path / "out.bin") > 0
