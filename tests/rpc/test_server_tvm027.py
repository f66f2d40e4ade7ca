"""An unmodified TVM 0.27 client (tvm-ffi dialect) drives tvmrt's server.

TVM 0.27 builds a kernel library for the host (a tvm-ffi library), uploads it, allocates
remote arrays, calls the kernel on them, reads the result back and times it remotely.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from support.rpc_server import run_peer, tvmrt_rpc

pytestmark = pytest.mark.slow

tvm = pytest.importorskip("tvm", reason="apache-tvm (TVM 0.27) is a test dependency")

CLIENT = r"""
import json, os, sys, tempfile
import numpy as np
import tvm
from tvm import rpc, te

port, out_path = int(sys.argv[1]), sys.argv[2]
n = 1024
A = te.placeholder((n,), name="A", dtype="float32")
B = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
lib = tvm.compile(te.create_prim_func([A, B]).with_attr("global_symbol", "scale"), target="llvm")
path = os.path.join(tempfile.mkdtemp(), "scale.so")
lib.export_library(path)

remote = rpc.connect("127.0.0.1", port, session_timeout=60)
remote.upload(path)
rlib = remote.load_module("scale.so")
dev = remote.cpu()
x = np.random.RandomState(0).standard_normal(n).astype("float32")
a = tvm.runtime.tensor(x, dev)
b = tvm.runtime.empty((n,), "float32", dev)
rlib["scale"](a, b)
timer = rlib.time_evaluator("scale", dev, number=5, repeat=3)
times = list(timer(a, b).results)
np.savez(out_path, x=x, y=b.numpy())
print(json.dumps({"times": times, "files": remote.listdir(".")}))
"""


def test_tvm027_client_uploads_calls_and_times_a_kernel(tmp_path: Path) -> None:
    out = tmp_path / "out.npz"
    with tvmrt_rpc("server") as (server, port):
        done = run_peer(sys.executable, CLIENT, str(port), str(out))
        assert done.returncode == 0, done.stderr[-3000:]
        assert server.poll() is None
    report = json.loads(done.stdout.strip().splitlines()[-1])
    got = np.load(out)
    np.testing.assert_array_equal(got["y"], got["x"] * np.float32(2) + np.float32(1))
    assert len(report["times"]) == 3
    assert all(0 < t < 1 for t in report["times"])
    assert "scale.so" in report["files"].split(",")
