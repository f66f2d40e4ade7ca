"""tvmrt's tracker and TVM 0.16's, with tvmrt's server and TVM 0.16's, in every pairing.

A TVM 0.16 client asks the tracker for a key (``connect_tracker(...).request``), runs a
real artifact on the server it is given, and does it again: the second session works
only if the server registered again after the first.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from support.peers import tvm016_python
from support.rpc_server import run_peer, tvmrt_rpc
from support.tvm016_rpc import tvm016_rpc_server, tvm016_rpc_tracker

pytestmark = pytest.mark.slow

CLIENT = r"""
import json, sys
import numpy as np
import tvm
from tvm import rpc
from tvm.contrib import graph_executor

port, key, folder, sessions = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
tracker = rpc.connect_tracker("127.0.0.1", port)
golden = np.load(folder + "/golden.npz")


def session():
    remote = tracker.request(key, session_timeout=60)
    remote.upload(folder + "/deploy.so")
    dev = remote.cpu()
    # upstream's one-argument load_module: hhb-tvm's RPCSession.load_module sends three,
    # which TVM 0.16's own server rejects
    lib = remote.get_function("tvm.rpc.server.load_module")("deploy.so")
    m = graph_executor.GraphModule(lib["default"](dev))
    m.set_input("data", tvm.nd.array(golden["data"], dev))
    m.run()
    return m.get_output(0).numpy().tolist()


# every session ends when its objects go (the client closes the socket)
outs = [session() for _ in range(sessions)]
print(json.dumps({"outs": outs, "summary": tracker.summary()}))
"""


def _client(tracker_port: int, key: str, folder: Path, sessions: int = 2) -> dict[str, object]:
    done = run_peer(tvm016_python(), CLIENT, str(tracker_port), key, str(folder), str(sessions))
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    golden = np.load(folder / "golden.npz")["output_0"]
    outs = report["outs"]
    assert isinstance(outs, list)
    assert len(outs) == sessions
    for out in outs:
        np.testing.assert_allclose(np.array(out, dtype=np.float32), golden, rtol=1e-6, atol=1e-7)
    return report


def test_tvmrt_tracker_and_server_serve_a_tvm016_client_twice(artifacts: Path) -> None:
    folder = artifacts / "relay016" / "linkparams-so"
    with (
        tvmrt_rpc("tracker") as (_, tport),
        tvmrt_rpc("server", "--tracker", f"127.0.0.1:{tport}", "--key", "board"),
    ):
        report = _client(tport, "board", folder)
    summary = report["summary"]
    assert isinstance(summary, dict)
    assert summary["server_info"][0]["key"] == "server:board"
    assert summary["queue_info"]["board"]["pending"] == 0


def test_tvm016_server_and_client_use_tvmrt_tracker(artifacts: Path, tmp_path: Path) -> None:
    folder = artifacts / "relay016" / "linkparams-so"
    with (
        tvmrt_rpc("tracker") as (_, tport),
        tvm016_rpc_server(tmp_path, tracker=tport, key="tvm016"),
    ):
        _client(tport, "tvm016", folder)


def test_tvmrt_server_registers_with_tvm016_tracker(artifacts: Path, tmp_path: Path) -> None:
    folder = artifacts / "relay016" / "linkparams-so"
    with (
        tvm016_rpc_tracker(tmp_path) as tracker,
        tvmrt_rpc("server", "--tracker", f"127.0.0.1:{tracker.port}", "--key", "board"),
    ):
        _client(tracker.port, "board", folder)
