"""Every folder of contrib (tests/fixtures/build_contrib.py) runs and matches its golden.

The kernels of these TVM 0.16 builds call runtime functions by name (sort, top-k, NMS's
argsort, cblas/mkl/dnnl matmul; runtime/contrib/). Each folder is run the way its README
says TVM ran it (``GraphModule(load_module(...)["default"](cpu()))``) and through
``tvmrt run``; the sort family must equal TVM's outputs bitwise, the BLAS folders numpy's
float64 result within the README's rtol=1e-5, atol=1e-5.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tvmrt import runtime
from tvmrt.cli import main as cli_main
from tvmrt.contrib import graph_executor

FOLDERS = ["sort-topk", "nms-static", "dense-cblas", "dense-mkl", "dense-dnnl"]
BITWISE = {"sort-topk", "nms-static"}  # golden from TVM's own graph executor


def _golden(root: Path, folder: str) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    with np.load(root / "contrib" / folder / "golden.npz") as data:
        arrays = {k: data[k] for k in data.files}
    outputs = [arrays.pop(f"output_{i}") for i in range(len(arrays)) if f"output_{i}" in arrays]
    return arrays, outputs


def _check(folder: str, got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for out, golden in zip(got, want, strict=True):
        assert out.dtype == golden.dtype
        assert out.shape == golden.shape
        if folder in BITWISE:
            assert np.array_equal(out, golden), folder
        else:
            np.testing.assert_allclose(out, golden, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("folder", FOLDERS)
def test_runs_like_tvm(artifacts, folder):
    inputs, want = _golden(artifacts, folder)
    lib = runtime.load_module(str(artifacts / "contrib" / folder / "deploy.so"))
    module = graph_executor.GraphModule(lib["default"](runtime.cpu()))
    module.set_input(**inputs)
    module.run()
    _check(folder, [module.get_output(i).numpy() for i in range(module.get_num_outputs())], want)


@pytest.mark.parametrize("folder", FOLDERS)
def test_tvmrt_run(artifacts, folder, tmp_path, capsys):
    inputs, want = _golden(artifacts, folder)
    np.savez(tmp_path / "in.npz", **inputs)
    out = tmp_path / "out.npz"
    target = str(artifacts / "contrib" / folder / "deploy.so")
    assert cli_main(["run", target, "-i", str(tmp_path / "in.npz"), "-o", str(out)]) == 0
    with np.load(out) as saved:
        got = [saved[k] for k in saved.files]  # in output order
    _check(folder, got, want)


@pytest.mark.parametrize("folder", FOLDERS)
def test_inspect_lists_the_functions_as_provided(artifacts, folder, capsys):
    import json

    assert cli_main(["inspect", str(artifacts / "contrib" / folder / "deploy.so"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    functions = report["library"]["needs"]["functions"]
    assert functions
    assert set(functions.values()) == {"provided"}
    assert all(name.startswith("tvm.contrib.") for name in functions)
    assert report["runnable"] is True
