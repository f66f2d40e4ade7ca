"""Real legacy models end to end against goldens from TVM v0.19's own graph executor.

Tier: cpu. Uses the real artifacts (``artifacts`` fixture): MobileNet v1/v2 NNVM-era
``.so`` libraries with parallel kernels and workspace, and the iris ``.tar`` whose graph
and params are embedded in the library (GraphExecutorFactory). Outputs must match the
goldens to ``rtol=1e-6, atol=1e-7`` (in practice they are bitwise equal).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import tvmrt.runtime as rt
from tvmrt import error as rt_error
from tvmrt.binfmt import binary
from tvmrt.binfmt.stream import ByteReader
from tvmrt.contrib import graph_executor
from tvmrt.error import ModuleLoadError
from tvmrt.runtime import kernel_services
from tvmrt.runtime.params import read_ndarray

MODELS = ["mobilenet_v1", "mobilenet_v2"]


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TVMRT_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "tvmrt-cache"))


@pytest.fixture
def threads() -> Iterator[None]:
    yield
    kernel_services.set_num_threads(0)


def _mobilenet(folder: Path) -> graph_executor.GraphModule:
    lib = rt.load_module(folder / "deploy_lib.so")
    module = graph_executor.create((folder / "deploy_graph.json").read_text(), lib, rt.cpu())
    module.load_params((folder / "deploy_param.params").read_bytes())
    return module


def _check(module: graph_executor.GraphModule, golden: np.lib.npyio.NpzFile) -> None:
    module.set_input("data", golden["data"])
    module.run()
    out = module.get_output(0).numpy()
    np.testing.assert_allclose(out, golden["output_0"], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("model", MODELS)
def test_mobilenet_matches_golden(artifacts, model, threads):
    folder = artifacts / model
    golden = np.load(folder / "golden.npz")
    module = _mobilenet(folder)
    _check(module, golden)
    _check(module, golden)  # a second run reuses the cached workspace and warm pool
    assert kernel_services.stats().workspace_bytes_in_use == 0


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("n", [1, 2, 3])
def test_mobilenet_with_thread_counts(artifacts, model, n, threads):
    kernel_services.set_num_threads(n)
    folder = artifacts / model
    kernel_services.reset_stats()
    _check(_mobilenet(folder), np.load(folder / "golden.npz"))
    stats = kernel_services.stats()
    assert stats.launches > 0
    if n == 1:
        assert stats.serial_launches == stats.launches
    else:
        assert stats.serial_launches == 0


def test_mobilenet_with_tvm_num_threads_env(artifacts):
    folder = artifacts / "mobilenet_v1"
    code = (
        "import sys, numpy as np\n"
        "from pathlib import Path\n"
        "import tvmrt.runtime as rt\n"
        "from tvmrt.contrib import graph_executor\n"
        "from tvmrt.runtime import kernel_services\n"
        "d = Path(sys.argv[1])\n"
        "m = graph_executor.create((d / 'deploy_graph.json').read_text(),\n"
        "                          rt.load_module(d / 'deploy_lib.so'), rt.cpu())\n"
        "m.load_params((d / 'deploy_param.params').read_bytes())\n"
        "g = np.load(d / 'golden.npz')\n"
        "m.run(data=g['data'])\n"
        "np.testing.assert_allclose(m.get_output(0).numpy(), g['output_0'], rtol=1e-6, atol=1e-7)\n"
        "print(kernel_services.num_threads(), kernel_services.stats().serial_launches)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env["TVM_NUM_THREADS"] = "2"
    result = subprocess.run(
        [sys.executable, "-c", code, str(folder)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["2", "0"]


def test_mobilenet_concurrent_executors(artifacts, threads):
    """Two executors over one library, run from two threads, both stay correct."""
    kernel_services.set_num_threads(2)
    folder = artifacts / "mobilenet_v2"
    golden = np.load(folder / "golden.npz")
    modules = [_mobilenet(folder) for _ in range(2)]
    errors: list[str] = []

    def work(module: graph_executor.GraphModule) -> None:
        try:
            for _ in range(3):
                _check(module, golden)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(repr(exc))

    pool = [threading.Thread(target=work, args=(m,)) for m in modules]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=120)
    assert errors == []


def test_iris_factory_matches_golden(artifacts):
    folder = artifacts / "iris-factory"
    golden = np.load(folder / "golden.npz")
    lib = rt.load_module(folder / "deploy_lib.tar")
    module = graph_executor.GraphModule(lib["default"](rt.cpu()))
    inputs, expected = golden["float_input"], golden["output_0"]
    assert inputs.shape == (4, 4)
    for i in range(len(inputs)):
        module.set_input("float_input", inputs[i : i + 1])
        module.run()
        out = module.get_output(0).numpy()
        np.testing.assert_allclose(out, expected[i : i + 1], rtol=1e-6, atol=1e-7)


def _factory_payload(artifacts: Path) -> tuple[str, dict[str, np.ndarray], str]:
    """Graph JSON, params and module name read straight from the blob bytes in ``devc.o``."""
    with tarfile.open(artifacts / "iris-factory" / "deploy_lib.tar") as archive:
        stream = archive.extractfile("devc.o")
        assert stream is not None
        elf = binary.ElfFile(stream.read(), "devc.o")
    (symbol,) = [s for s in elf.symbols(dynamic=False) if s.name == "__tvm_dev_mblob"]
    reader = ByteReader(elf.read_symbol(symbol), "blob", ModuleLoadError)
    reader.u64("nbytes")
    reader.u64("number of modules")
    assert reader.string("key") == "GraphExecutorFactory"
    graph_json = reader.string("graph_json")
    count = reader.u64("number of params")
    names = reader.strings("names")
    assert len(names) == count
    arrays = {name: read_ndarray(reader, name).numpy() for name in names}
    return graph_json, arrays, reader.string("module_name")


def test_iris_factory_graph_and_params_match_the_blob(artifacts):
    graph_json, params, module_name = _factory_payload(artifacts)
    assert module_name == "default"
    lib = rt.load_module(artifacts / "iris-factory" / "deploy_lib.tar")
    assert lib["get_graph_json"]() == graph_json
    assert json.loads(graph_json)["nodes"][0]["name"] == "float_input"
    got = lib["get_graph_params"]()
    assert sorted(got) == sorted(params)
    for name, arr in got.items():
        np.testing.assert_array_equal(arr.numpy(), params[name])
    executor = graph_executor.GraphModule(lib["default"](rt.cpu()))
    for name, arr in params.items():
        np.testing.assert_array_equal(executor.get_input(name).numpy(), arr)


@pytest.mark.parametrize("model", MODELS)
def test_debug_executor_times_every_kernel(artifacts, model, tmp_path):
    from tvmrt.contrib.debugger import debug_executor

    folder = artifacts / model
    graph_json = (folder / "deploy_graph.json").read_text()
    lib = rt.load_module(folder / "deploy_lib.so")
    debug = debug_executor.create(graph_json, lib, rt.cpu(), dump_root=str(tmp_path))
    debug.load_params((folder / "deploy_param.params").read_bytes())
    golden = np.load(folder / "golden.npz")
    debug.set_input("data", golden["data"])
    per_node = debug.run_individual(number=1, repeat=1)
    ops = [i for i, n in enumerate(json.loads(graph_json)["nodes"]) if n["op"] == "tvm_op"]
    assert all(per_node[i][0] > 0 for i in ops)
    report = debug.profile(data=golden["data"])
    names = [str(call["Name"]) for call in report.calls]
    kernels = [json.loads(graph_json)["nodes"][i]["attrs"]["func_name"] for i in ops]
    assert names == kernels  # one row per tvm_op, in graph order
    assert all(call["Duration (us)"].microseconds > 0 for call in report.calls)
    np.testing.assert_allclose(
        debug.get_output(0).numpy(), golden["output_0"], rtol=1e-6, atol=1e-7
    )


def test_kernel_error_carries_its_message_and_node(artifacts):
    folder = artifacts / "mobilenet_v1"
    doc = json.loads((folder / "deploy_graph.json").read_text())
    doc["attrs"]["shape"][1][0] = [1, 3, 224, 225]  # the input, wider than compiled for
    lib = rt.load_module(folder / "deploy_lib.so")
    module = graph_executor.create(json.dumps(doc), lib, rt.cpu())
    first = next(n for n in doc["nodes"] if n["op"] == "tvm_op")
    with pytest.raises(rt_error.KernelError) as info:
        module.run()
    message = str(info.value)
    assert message.startswith(
        f"node 1 {first['name']!r} (kernel {first['attrs']['func_name']!r}): "
    )
    assert "shape" in message.lower()  # the kernel's own assertion text
