"""TVM's own deployment guide runs on tvmrt with only ``import tvm`` changed.

The guide is TVM's ``docs/deploy/nnvm.md`` (v0.6; the seeds recording beside $TVMRT_ARTIFACTS is a copy
whose extraction lost the file names and two lines, checked below). Its Python example
uses TVM <= 0.6 names that later TVMs keep as aliases or that old scripts still call:
``tvm.module.load``, the global ``tvm.graph_runtime.create``, ``tvm.gpu``, ``tvm.nd.empty``
and ``get_output(index, out)``. Run on MobileNet v1 (a real TVM artifact) it must give the
outputs TVM gave (``golden.npz``).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import tvmrt

# TVM v0.6, docs/deploy/nnvm.md, the Python example, verbatim
GUIDE = """\
import tvm

# tvm module for compiled functions.
loaded_lib = tvm.module.load("deploy.so")
# json graph
loaded_json = open(temp.relpath("deploy.json")).read()
# parameters in binary
loaded_params = bytearray(open(temp.relpath("deploy.params"), "rb").read())

fcreate = tvm.get_global_func("tvm.graph_runtime.create")
ctx = tvm.gpu(0)
gmodule = fcreate(loaded_json, loaded_lib, ctx.device_type, ctx.device_id)
set_input, get_output, run = gmodule["set_input"], gmodule["get_output"], gmodule["run"]
set_input("x", tvm.nd.array(x_np))
gmodule["load_params"](loaded_params)
run()
out = tvm.nd.empty(shape)
get_output(0, out)
print(out.asnumpy())
"""


class _TempDir:
    """The guide's ``temp`` (``tvm.contrib.util.tempdir()`` earlier in the tutorial)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def relpath(self, name: str) -> str:
        return str(self.path / name)


def _seed_example(seeds: Path) -> list[str]:
    text = next(seeds.glob("002_*.txt")).read_text()
    block = text[text.index("import tvm\n") : text.index("get_output(0, out)") + 18]
    return [line for line in block.splitlines() if line.strip()]


def test_the_seed_is_this_guide(artifacts: Path) -> None:
    """Every line of the seed's example is a line of the guide (names aside)."""
    guide = GUIDE.replace('"deploy.so"', '""').splitlines()
    missing = [line for line in _seed_example(artifacts.parent / "seeds") if line not in guide]
    assert missing == []


def test_guide_example_runs_with_only_the_import_changed(
    artifacts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = artifacts / "mobilenet_v1"
    golden = np.load(folder / "golden.npz")
    # the files under the guide's names, in the guide's working folder
    for guide_name, real in (
        ("deploy.so", "deploy_lib.so"),
        ("deploy.json", "deploy_graph.json"),
        ("deploy.params", "deploy_param.params"),
    ):
        (tmp_path / guide_name).symlink_to(folder / real)
    monkeypatch.chdir(tmp_path)

    source = GUIDE.replace("import tvm\n", "import tvmrt as tvm\n", 1)
    # no GPU here: the CPU in place of gpu(0); MobileNet's input is "data", not "x"
    source = source.replace("tvm.gpu(0)", "tvm.cpu(0)").replace('set_input("x"', 'set_input("data"')
    assert source.count("\n") == GUIDE.count("\n")
    namespace: dict[str, object] = {
        "temp": _TempDir(tmp_path),
        "x_np": golden["data"],
        "shape": golden["output_0"].shape,
    }
    with warnings.catch_warnings():  # tvm.gpu and asnumpy warn, as in TVM v0.19
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", ResourceWarning)  # the guide's open().read()
        exec(compile(source, "nnvm.md", "exec"), namespace)

    out = namespace["out"]
    assert isinstance(out, tvmrt.runtime.NDArray)
    np.testing.assert_allclose(out.numpy(), golden["output_0"], rtol=1e-5, atol=1e-6)


def test_gpu_is_cuda_under_its_old_name() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        dev = tvmrt.gpu(0)
    assert (dev.device_type, dev.device_id) == (2, 0)
    assert dev == tvmrt.cuda(0)


def test_relay_params_helpers_read_and_write_the_runtime_format() -> None:
    """``relay.save_param_dict`` writes what ``runtime.load_param_dict`` reads, and back."""
    weights = {"w": np.arange(6, dtype="float32").reshape(2, 3), "b": np.array([1, 2], "int8")}
    blob = tvmrt.relay.save_param_dict(weights)
    assert blob == tvmrt.runtime.save_param_dict(weights)
    loaded = tvmrt.relay.load_param_dict(blob)
    assert list(loaded) == ["w", "b"]
    np.testing.assert_array_equal(loaded["w"].numpy(), weights["w"])
    np.testing.assert_array_equal(tvmrt.runtime.load_param_dict(blob)["b"].numpy(), weights["b"])


def test_module_load_is_load_module(artifacts: Path) -> None:
    lib = tvmrt.module.load(str(artifacts / "mobilenet_v1" / "deploy_lib.so"))
    assert isinstance(lib, tvmrt.runtime.Module)
    assert tvmrt.module.load is tvmrt.runtime.load_module
