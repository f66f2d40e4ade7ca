"""An unmodified TVM 0.16 client (hhb-tvm 3.2.3, its own Python venv) drives tvmrt's server.

The client uploads real artifacts, loads them remotely, runs them through TVM's own
``graph_executor`` and ``debug_executor`` faces, times them with ``time_evaluator``, and
saves what it got back; the outputs must equal the artifacts' ``golden.npz``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from support.peers import tvm016_python
from support.rpc_server import run_peer, tvmrt_rpc

pytestmark = pytest.mark.slow

# runs under TVM 0.16: argv = port, out.npz, then (mode, folder, file) triples
CLIENT = r"""
import json, sys, tempfile
import numpy as np
import tvm
from tvm import rpc
from tvm.contrib import graph_executor
from tvm.contrib.debugger import debug_executor

port, out_path, jobs = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
remote = rpc.connect("127.0.0.1", port, session_timeout=120)
dev = remote.cpu()
outputs, report = {}, {}
for i in range(0, len(jobs), 3):
    mode, folder, name = jobs[i : i + 3]
    golden = np.load(folder + "/golden.npz")
    remote.upload(folder + "/" + name)
    lib = remote.load_module(name)
    if mode == "factory":
        m = graph_executor.GraphModule(lib["default"](dev))
    else:
        graph = open(folder + "/deploy_graph.json").read()
        create = debug_executor.create if mode == "debug" else graph_executor.create
        kwargs = {"dump_root": tempfile.mkdtemp()} if mode == "debug" else {}
        m = create(graph, lib, dev, **kwargs)
        m.load_params(bytearray(open(folder + "/deploy_param.params", "rb").read()))
    m.set_input("data", tvm.nd.array(golden["data"], dev))
    m.run()
    outputs[f"{i // 3}"] = m.get_output(0).numpy()
    if mode != "debug":
        timer = m.module.time_evaluator("run", dev, number=1, repeat=2)
        report[f"{i // 3}"] = list(timer().results)
report["listdir"] = remote.listdir(".")
np.savez(out_path, **outputs)
print(json.dumps(report))
"""


def _drive(artifacts: Path, tmp_path: Path, jobs: list[tuple[str, str, str]]) -> dict[str, Any]:
    python = tvm016_python()
    out = tmp_path / "out.npz"
    args = [x for mode, folder, name in jobs for x in (mode, str(artifacts / folder), name)]
    with tvmrt_rpc("server", "--workdir", str(tmp_path)) as (server, port):
        done = run_peer(python, CLIENT, str(port), str(out), *args)
        assert done.returncode == 0, done.stderr[-3000:]
        assert server.poll() is None, "the server exited"
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    got = np.load(out)
    for i, (_, folder, _) in enumerate(jobs):
        golden = np.load(artifacts / folder / "golden.npz")
        np.testing.assert_allclose(got[str(i)], golden["output_0"], rtol=1e-6, atol=1e-7)
    return report


def test_factory_path_on_relay016_artifacts(artifacts: Path, tmp_path: Path) -> None:
    jobs = [
        ("factory", "relay016/linkparams-so", "deploy.so"),
        ("factory", "relay016/systemlib-so", "deploy.so"),
        # a .tar is linked on the board (tvmrt's loader), as TVM's server does
        ("factory", "relay016/systemlib-tar", "deploy.tar"),
    ]
    report = _drive(artifacts, tmp_path, jobs)
    assert {"deploy.so", "deploy.tar"} <= set(report["listdir"].split(","))
    for i in range(len(jobs)):
        times = report[str(i)]
        assert len(times) == 2
        assert all(0 < t < 5 for t in times)


def test_graph_executor_create_with_params_on_mobilenet_v1(artifacts: Path, tmp_path: Path) -> None:
    # graph_executor.create(json, remote lib, remote dev) + load_params + set_input/run/get_output
    report = _drive(artifacts, tmp_path, [("create", "mobilenet_v1", "deploy_lib.so")])
    assert len(report["0"]) == 2
    assert all(t > 0 for t in report["0"])


def test_debug_executor_on_mobilenet_v1(artifacts: Path, tmp_path: Path) -> None:
    # tvm.graph_executor_debug.create: TVM's debug_executor times every node remotely
    _drive(artifacts, tmp_path, [("debug", "mobilenet_v1", "deploy_lib.so")])
