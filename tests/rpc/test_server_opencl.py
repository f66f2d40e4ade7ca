"""OpenCL devices over RPC: clients make arrays on the server's OpenCL device (pocl here),
copy into and out of them at byte offsets, and run TVM 0.16's OpenCL artifacts remotely.

Two clients drive tvmrt's server: an unmodified TVM 0.16 client (hhb-tvm 3.2.3, which has
no OpenCL runtime of its own: the device exists only on the server) and tvmrt's client.
Outputs are checked against the artifacts' ``golden.npz`` (OpenCL tolerance:
relay016/README.md). Skipped without an OpenCL driver that runs a kernel on this machine.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from support.opencl import opencl_unusable
from support.peers import tvm016_python
from support.rpc_server import run_peer, tvmrt_rpc
from tvmrt import nd, rpc, runtime
from tvmrt.contrib import graph_executor

if opencl_unusable():
    pytest.skip(str(opencl_unusable()), allow_module_level=True)

TOL = {"rtol": 1e-5, "atol": 1e-5}

# runs under TVM 0.16: argv = port, relay016 folder, out.npz
CLIENT = r"""
import json, sys
import numpy as np
import tvm
from tvm import rpc
from tvm.contrib import graph_executor

port, art, out_path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
remote = rpc.connect("127.0.0.1", port, session_timeout=120)
cl, cpu = remote.cl(0), remote.cpu(0)
report = {"exist": cl.exist, "name": cl.device_name}
x = np.arange(16, dtype="float32")
a = tvm.nd.array(x, cl)
report["round_trip"] = a.numpy().tolist()
b = tvm.nd.empty((16,), "float32", cl)
a.copyto(b)  # kCopyAmongRemote on the server's OpenCL device
report["among"] = b.numpy().tolist()
# b's DLTensor moved to byte offset 16 (12 floats): TVM 0.16 sends the offset in
# kCopyAmongRemote (its copyfrom/numpy of a remote array send byte_offset 0 instead)
c = tvm.nd.array(np.full(12, -1.0, "float32"), cl)
t = b.handle.contents
t.byte_offset, t.shape[0] = 16, 12
c.copyto(b)
b.copyto(c)  # and back out of the offset, into c
t.byte_offset, t.shape[0] = 0, 16
report["after_offset_write"] = b.numpy().tolist()
report["offset_read"] = c.numpy().tolist()
outs = {}
for name, devs in (("opencl-factory", [cl]), ("hetero-opencl-cpu", [cl, cpu])):
    golden = np.load(art + "/" + name + "/golden.npz")
    remote.upload(art + "/" + name + "/deploy.so", target=name + ".so")
    # upstream's one-argument load_module (hhb-tvm's sends three)
    lib = remote.get_function("tvm.rpc.server.load_module")(name + ".so")
    m = graph_executor.GraphModule(lib["default"](*devs))
    m.set_input("data", golden["data"])  # copied to wherever the graph keeps it
    m.run()
    outs[name] = m.get_output(0).numpy()
    report[name + "_times"] = list(m.module.time_evaluator("run", cl, number=1, repeat=2)().results)
np.savez(out_path, **outs)
print(json.dumps(report))
"""


@pytest.mark.slow
def test_tvm016_client_runs_opencl_on_tvmrt_server(artifacts: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.npz"
    with tvmrt_rpc("server", "--workdir", str(tmp_path)) as (server, port):
        done = run_peer(tvm016_python(), CLIENT, str(port), str(artifacts / "relay016"), str(out))
        assert done.returncode == 0, done.stderr[-3000:]
        assert server.poll() is None, "the server exited"
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["exist"]
    assert report["name"] == runtime.opencl(0).device_name
    x = list(range(16))
    assert report["round_trip"] == x
    assert report["among"] == x
    assert report["after_offset_write"] == x[:4] + [-1.0] * 12
    assert report["offset_read"] == [-1.0] * 12
    got = np.load(out)
    for name in ("opencl-factory", "hetero-opencl-cpu"):
        golden = np.load(artifacts / "relay016" / name / "golden.npz")
        np.testing.assert_allclose(got[name], golden["output_0"], **TOL)
        assert all(0 < s < 10 for s in report[name + "_times"])


def test_tvmrt_client_copies_at_byte_offsets_on_remote_opencl(
    artifacts: Path, tmp_path: Path
) -> None:
    folder = artifacts / "relay016" / "opencl-factory"
    with tvmrt_rpc("server", "--workdir", str(tmp_path)) as (_, port):
        remote = rpc.connect("127.0.0.1", port)
        try:
            dev = remote.cl(0)
            assert dev.exist
            x = np.arange(32, dtype="float32")
            a = nd.array(x, dev)
            view = a._create_view((8,), relative_byte_offset=40)  # floats 10..17
            np.testing.assert_array_equal(view.numpy(), x[10:18])
            view.copyfrom(np.full(8, 7.0, "float32"))
            expected = x.copy()
            expected[10:18] = 7.0
            np.testing.assert_array_equal(a.numpy(), expected)
            b = nd.empty((8,), "float32", dev)
            view.copyto(b)  # from an offset on the server, to a fresh OpenCL array
            np.testing.assert_array_equal(b.numpy(), np.full(8, 7.0, "float32"))

            golden = np.load(folder / "dense_golden.npz")
            remote.upload(str(folder / "dense.so"))
            m = graph_executor.GraphModule(remote.load_module("dense.so")["default"](dev))
            m.set_input("x", golden["x"])
            m.run()
            for i in range(2):
                out = m.get_output(i)
                assert out.device == dev
                np.testing.assert_allclose(out.numpy(), golden[f"output_{i}"], **TOL)
        finally:
            remote.close()
