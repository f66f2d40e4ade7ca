"""Cross-compiled ARM models against TVM's x86-64 outputs, run the ways TVM users run them.

The ``cross/ARCH`` artifacts (a triple and a factory, built by ``tests/fixtures/build_cross.py``) and the
fixtures ``tests/arm/build_fixtures.py`` builds with TVM 0.16 (factory, triple, system-lib,
``.tar`` export linked here with ``$CC``, an int8 QNN model, a model with parallel kernels)
each carry the outputs TVM gave for the same model built for x86-64. Other machine code for
the same math: ``rtol=1e-5, atol=1e-6``. These run only on an ARM machine (``make test-arm``
runs them under emulation); on others the inspect test checks that ARM builds are refused.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import numpy as np
import pytest

from support.paths import REPO
from tvmrt import runtime
from tvmrt.cli import main as cli_main
from tvmrt.contrib import graph_executor
from tvmrt.runtime import kernel_services

pytestmark = pytest.mark.arm

_ARCHES = {"aarch64": "aarch64", "arm64": "aarch64", "armv7l": "armv7hf", "armv8l": "armv7hf"}
ARCH = _ARCHES.get(platform.machine().lower())
on_arm = pytest.mark.skipif(ARCH is None, reason="ARM code runs on ARM (make test-arm)")
FIXTURES = Path(os.environ.get("TVMRT_ARM_FIXTURES", REPO / "build" / "arm-fixtures"))
TOL = {"rtol": 1e-5, "atol": 1e-6}


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TVMRT_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "arm-cache"))


@pytest.fixture(scope="module")
def built() -> Path:
    """This machine's folder of peer-built fixtures (scripts/test_arm.sh builds them)."""
    folder = FIXTURES / str(ARCH)
    if not folder.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"ARM fixtures {folder} are missing in CI (make test-arm builds them)")
        pytest.skip(f"ARM fixtures {folder} are missing (make test-arm builds them)")
    return folder


def _reference(folder: Path, name: str) -> dict[str, np.ndarray]:
    with np.load(folder / name) as data:
        return {k: data[k] for k in data.files}


def _check(module: graph_executor.GraphModule, golden: dict[str, np.ndarray]) -> None:
    module.set_input("data", golden["data"])
    module.run()
    out = module.get_output(0).numpy()
    assert out.shape == golden["output_0"].shape
    assert out.dtype == golden["output_0"].dtype
    np.testing.assert_allclose(out, golden["output_0"], **TOL)


def _triple(folder: Path) -> graph_executor.GraphModule:
    lib = runtime.load_module(str(folder / "deploy_lib.so"))
    module = graph_executor.create((folder / "deploy_graph.json").read_text(), lib, runtime.cpu())
    module.load_params((folder / "deploy_param.params").read_bytes())
    return module


def _factory(path: Path) -> graph_executor.GraphModule:
    lib = runtime.load_module(str(path))
    assert lib.type_key == "GraphExecutorFactory"
    return graph_executor.GraphModule(lib["default"](runtime.cpu(0)))


# -- artifacts/cross (project-built) --------------------------------------------------------------


@on_arm
@pytest.mark.parametrize("how", ["triple", "factory"])
def test_shared_cross_artifacts(artifacts, how):
    folder = artifacts / "cross" / str(ARCH)
    golden = {
        **_reference(folder, "inputs.npz"),
        **_reference(folder, "golden_x86_tvm016.npz"),
    }
    module = _triple(folder) if how == "triple" else _factory(folder / "deploy.so")
    _check(module, golden)


@on_arm
@pytest.mark.parametrize("how", ["triple", "factory"])
def test_shared_cross_artifacts_tvmrt_run(artifacts, how, tmp_path):
    folder = artifacts / "cross" / str(ARCH)
    out = tmp_path / "out.npz"
    if how == "factory":
        target = [str(folder / "deploy.so")]
    else:
        target = [
            "--graph",
            str(folder / "deploy_graph.json"),
            "--lib",
            str(folder / "deploy_lib.so"),
        ]
        target += ["--params", str(folder / "deploy_param.params")]
    assert cli_main(["run", *target, "-i", str(folder / "inputs.npz"), "-o", str(out)]) == 0
    golden = _reference(folder, "golden_x86_tvm016.npz")["output_0"]
    with np.load(out) as saved:
        (got,) = [saved[k] for k in saved.files]
    np.testing.assert_allclose(got, golden, **TOL)


# -- fixtures built by TVM 0.16 for this architecture ------------------------------------


@on_arm
def test_factory(built):
    _check(
        _factory(built / "cnn" / "deploy.so"), _reference(built / "cnn", "golden_x86_tvm016.npz")
    )


@on_arm
def test_triple_create_and_load_params(built):
    folder = built / "cnn"
    _check(_triple(folder), _reference(folder, "golden_x86_tvm016.npz"))


@on_arm
def test_system_lib(built):
    """A ``system-lib`` build registers its blob on load; TVM ran it as system_lib()["default"]."""
    folder = built / "cnn"
    lib = runtime.load_module(str(folder / "systemlib.so"))
    module = graph_executor.GraphModule(runtime.system_lib()["default"](runtime.cpu(0)))
    _check(module, _reference(folder, "golden_x86_tvm016.npz"))
    del lib


@on_arm
def test_tar_export_linked_here(built):
    """``export_library("deploy.tar")``: lib0.o + devc.o, linked by this machine's ``$CC``."""
    _check(
        _factory(built / "cnn" / "deploy.tar"), _reference(built / "cnn", "golden_x86_tvm016.npz")
    )


@on_arm
def test_int8_model(built):
    folder = built / "int8"
    golden = _reference(folder, "golden_x86_tvm016.npz")
    module = _factory(folder / "deploy.so")
    _check(module, golden)
    # integer arithmetic up to the final dequantize: the same values as TVM's x86 build
    np.testing.assert_array_equal(module.get_output(0).numpy(), golden["output_0"])


@on_arm
@pytest.mark.parametrize("threads", [1, 3])
def test_parallel_kernels(built, threads):
    import json

    folder = built / "parallel"
    assert json.loads((folder / "meta.json").read_text())["parallel_launch"]
    kernel_services.set_num_threads(threads)
    try:
        assert kernel_services.num_threads() == threads
        _check(_factory(folder / "deploy.so"), _reference(folder, "golden_x86_tvm016.npz"))
    finally:
        kernel_services.set_num_threads(0)


@on_arm
@pytest.mark.parametrize(
    ("model", "file"),
    [("cnn", "deploy.so"), ("cnn", "deploy.tar"), ("int8", "deploy.so"), ("parallel", "deploy.so")],
)
def test_tvmrt_run(built, model, file, tmp_path):
    folder = built / model
    golden = _reference(folder, "golden_x86_tvm016.npz")
    inputs = tmp_path / "in.npz"
    np.savez(inputs, data=golden["data"])
    out = tmp_path / "out.npz"
    args = ["run", str(folder / file), "-i", str(inputs), "-o", str(out), "--threads", "2"]
    assert cli_main(args) == 0
    with np.load(out) as saved:
        (got,) = [saved[k] for k in saved.files]
    np.testing.assert_allclose(got, golden["output_0"], **TOL)
