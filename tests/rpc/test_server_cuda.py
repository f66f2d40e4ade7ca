"""CUDA devices over RPC: a tvmrt client uses ``remote.cuda(0)`` of a tvmrt RPC server whose
process has a GPU. Here the server's "GPU" is the recording libcuda stand-in
(tests/support/fake_libcuda.c, named by TVMRT_LIBCUDA in the server's environment; it logs
each driver call to FAKE_LIBCUDA_LOG as it happens): arrays are made and copied on the
server's device at byte offsets (the stand-in's memory round-trips for real), and the
Relay-era CUDA fixture runs there, its kernels launched by the server with TVM's grid, block
and arguments. The stand-in never computes, so the outputs are not compared: ``make
gpu-check`` runs the fixtures on a GPU. Without a driver on the server, the device does not
exist and using it fails naming the server.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from support.cuda_fixtures import CUDA_FIXTURES, cuda_fixtures
from support.fake_cuda import build
from support.rpc_server import tvmrt_rpc
from tvmrt import nd, rpc
from tvmrt.contrib import graph_executor
from tvmrt.error import DeviceUnavailableError

FIXTURE = CUDA_FIXTURES / "relay019_ptx.so"


def test_tvmrt_client_runs_cuda_on_a_server_with_a_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cuda_fixtures()
    log = tmp_path / "server-cuda.log"
    monkeypatch.setenv("TVMRT_LIBCUDA", str(build(tmp_path)))
    monkeypatch.setenv("FAKE_LIBCUDA_LOG", str(log))
    work = tmp_path / "work"
    work.mkdir()
    with tvmrt_rpc("server", "--workdir", str(work)) as (server, port):
        remote = rpc.connect("127.0.0.1", port)
        dev = remote.cuda(0)
        assert dev.exist
        assert dev.device_name == "Fake GPU sm_75"
        assert dev.compute_version == "7.5"
        x = np.arange(32, dtype="float32")
        a = nd.array(x, dev)
        view = a._create_view((8,), relative_byte_offset=40)  # floats 10..17
        np.testing.assert_array_equal(view.numpy(), x[10:18])
        view.copyfrom(np.full(8, 7.0, "float32"))
        expected = x.copy()
        expected[10:18] = 7.0
        np.testing.assert_array_equal(a.numpy(), expected)

        remote.upload(str(FIXTURE))
        lib = remote.load_module(FIXTURE.name)
        module = graph_executor.GraphModule(lib["default"](dev))
        golden = np.load(FIXTURE.with_name("relay019_golden.npz"))
        module.set_input("x", golden["x"])
        module.run()
        assert module.get_output(0).numpy().shape == golden["expected"].shape
        assert server.poll() is None, "the server exited"
    lines = log.read_text().splitlines()
    assert "cuMemcpyHtoDAsync 256 stream=0" in lines  # the input, on the server's GPU
    assert [line for line in lines if line.startswith("cuLaunchKernel")] == [
        "cuLaunchKernel tvmgen_default_fused_nn_dense_add_nn_relu_kernel grid=32,1,1 "
        "block=64,1,1 smem=0 stream=0 args= dev dev dev dev",
        "cuLaunchKernel tvmgen_default_fused_nn_softmax_kernel grid=1,1,1 block=32,1,1 smem=0 "
        "stream=0 args= dev dev",
    ]
    assert not [line for line in lines if "no current context" in line]


def test_remote_cuda_without_a_driver_on_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TVMRT_LIBCUDA", str(tmp_path / "no-driver" / "libcuda.so.1"))
    with tvmrt_rpc("server", "--workdir", str(tmp_path)) as (_, port):
        remote = rpc.connect("127.0.0.1", port)
        dev = remote.cuda(0)
        assert not dev.exist
        with pytest.raises(DeviceUnavailableError, match=r"does not exist on the RPC server.*"
                           r"\(for CUDA: the NVIDIA driver and a GPU\)"):  # fmt: skip
            nd.empty((4,), "float32", dev)
