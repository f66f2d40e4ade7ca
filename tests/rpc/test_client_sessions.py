"""tvmrt's RPC client drives TVM 0.16's own RPC server and tracker (hhb-tvm, peer venv),
and tvmrt's server and tracker: every test runs against both servers.

The session is the one TVM's own client runs in the ``rpc/trace16.jsonl`` recording beside $TVMRT_ARTIFACTS: upload,
``load_module``, ``graph_executor.create`` + ``load_params`` + ``set_input`` / ``run`` /
``get_output``, the remote time evaluator, then the factory path ``lib["default"](dev)``;
outputs must equal the goldens TVM computed.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from support.rpc_server import tvmrt_rpc
from support.tvm016_rpc import HOST, tvm016_rpc_server, tvm016_rpc_tracker
from tvmrt import nd, rpc
from tvmrt.contrib import graph_executor
from tvmrt.error import (
    ArgumentTypeError,
    FunctionNotFoundError,
    InvalidArgumentError,
    RPCError,
    RPCSessionTimeoutError,
)
from tvmrt.runtime import BenchmarkResult, cpu


@pytest.fixture(scope="module", params=["tvm016", "tvmrt"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[int]:
    """The port of TVM 0.16's own RPC server, or of ``tvmrt rpc server``."""
    if request.param == "tvm016":
        with tvm016_rpc_server(tmp_path_factory.mktemp("tvm016")) as peer:
            yield peer.port
    else:
        with tvmrt_rpc("server") as (_, port):
            yield port


@pytest.fixture
def remote(server: int) -> Iterator[rpc.RPCSession]:
    with rpc.connect(HOST, server, session_timeout=120) as session:
        yield session


def _close(a: np.ndarray, b: np.ndarray) -> None:
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_graph_session_on_mobilenet(remote: rpc.RPCSession, artifacts: Path) -> None:
    folder = artifacts / "mobilenet_v1"
    golden = np.load(folder / "golden.npz")
    remote.upload(str(folder / "deploy_lib.so"))
    rlib = remote.load_module("deploy_lib.so")
    assert rlib.type_key == "rpc"
    dev = remote.cpu()
    module = graph_executor.create((folder / "deploy_graph.json").read_text(), rlib, dev)
    module.load_params((folder / "deploy_param.params").read_bytes())
    module.set_input("data", golden["data"])  # host data, copied into the remote input
    module.run()
    out = module.get_output(0)
    assert out.device == dev
    assert out.shape == (1, 1000)
    _close(out.numpy(), golden["output_0"])
    timed = module.module.time_evaluator("run", dev, number=1, repeat=2)()
    assert isinstance(timed, BenchmarkResult)
    assert len(timed.results) == 2
    assert all(0 < t < 10 for t in timed.results)
    assert len(module.benchmark(dev, repeat=2, number=1).results) == 2


def test_factory_path_and_remote_arrays(remote: rpc.RPCSession, artifacts: Path) -> None:
    folder = artifacts / "relay016" / "linkparams-so"
    golden = np.load(folder / "golden.npz")
    remote.upload(str(folder / "deploy.so"), "factory.so")
    dev = remote.cpu()
    module = graph_executor.GraphModule(remote.load_module("factory.so")["default"](dev))
    data = nd.array(golden["data"], dev)  # a remote array, passed as a DLTensor
    assert data.device == dev
    module.set_input("data", data)
    module.run()
    _close(module.get_output(0).numpy(), golden["output_0"])
    # the output alias copies into a local array and into another remote one
    local = module.get_output(0).copyto(cpu())
    _close(local.numpy(), golden["output_0"])
    again = nd.empty((1, 10), "float32", dev)
    module.get_output(0, again)
    _close(again.numpy(), golden["output_0"])
    assert module.get_num_outputs() == 1
    assert module.get_input_index("data") == 0


def test_files(remote: rpc.RPCSession, server: int) -> None:
    blob = bytes(range(256)) * 41
    remote.upload(bytearray(blob), "blob.bin")
    assert remote.download("blob.bin") == blob
    try:
        listing = remote.listdir(".")
    except FunctionNotFoundError:  # hhb-tvm's server has no tvm.rpc.server.listdir
        pass
    else:
        assert "blob.bin" in listing.split(",")
    remote.remove("blob.bin")
    with pytest.raises(RPCError, match=r"blob\.bin"):
        remote.download("blob.bin")
    with pytest.raises(InvalidArgumentError, match="target"):
        remote.upload(b"abc")


def test_errors_are_clear(remote: rpc.RPCSession, artifacts: Path) -> None:
    folder = artifacts / "relay016" / "linkparams-so"
    remote.upload(str(folder / "deploy.so"), "f.so")
    rlib = remote.load_module("f.so")
    with pytest.raises(FunctionNotFoundError, match="no_such"):
        rlib["no_such"]
    with pytest.raises(RPCError, match="no_such_file"):
        remote.load_module("no_such_file.so")
    local = nd.array(np.zeros(4, "float32"))
    with pytest.raises(InvalidArgumentError, match="remote_dev"):
        rlib["default"](local)
    with pytest.raises(ArgumentTypeError, match="object"):
        rlib["default"](object())
    # the session still works after each refusal
    module = graph_executor.GraphModule(rlib["default"](remote.cpu()))
    assert module.get_num_outputs() == 1


def test_session_timeout(server: int) -> None:
    with rpc.connect(HOST, server, session_timeout=1) as session:
        time.sleep(2.5)  # the server ends the session; the next request says so
        with pytest.raises(RPCSessionTimeoutError, match="RPCSessionTimeoutError"):
            session.upload(b"x", "x.bin")
    # and the server serves the next client
    with rpc.connect(HOST, server) as session:
        session.upload(b"y", "y.bin")
        assert session.download("y.bin") == b"y"


@contextmanager
def _tracked(kind: str, tmp_path: Path) -> Iterator[int]:
    """A tracker with one server registered under key ``board``; yields the tracker port."""
    if kind == "tvm016":
        with (
            tvm016_rpc_tracker(tmp_path) as tracker,
            tvm016_rpc_server(tmp_path, tracker=tracker.port, key="board"),
        ):
            yield tracker.port
    else:
        with (
            tvmrt_rpc("tracker") as (_, port),
            tvmrt_rpc("server", "--tracker", f"{HOST}:{port}", "--key", "board"),
        ):
            yield port


@pytest.mark.parametrize("kind", ["tvm016", "tvmrt"])
def test_tracker_request(kind: str, tmp_path: Path, artifacts: Path) -> None:
    with _tracked(kind, tmp_path) as port:
        client = rpc.connect_tracker(HOST, port)
        deadline = time.monotonic() + 30
        while "board" not in client.summary()["queue_info"]:
            assert time.monotonic() < deadline, client.summary()
            time.sleep(0.2)
        assert "board" in client.text_summary()
        folder = artifacts / "relay016" / "linkparams-so"
        golden = np.load(folder / "golden.npz")
        for _ in range(2):  # the server registers again after each session
            with client.request("board", session_timeout=60) as remote:
                remote.upload(str(folder / "deploy.so"))
                dev = remote.cpu()
                module = graph_executor.GraphModule(remote.load_module("deploy.so")["default"](dev))
                module.run(data=golden["data"])
                _close(module.get_output(0).numpy(), golden["output_0"])
        client.close()


def test_remote_objects_keep_the_session_open(server: int, artifacts: Path) -> None:
    folder = artifacts / "relay016" / "linkparams-so"
    golden = np.load(folder / "golden.npz")

    def load() -> tuple[object, object]:
        session = rpc.connect(HOST, server)  # dropped on return, as in TVM
        session.upload(str(folder / "deploy.so"), "kept.so")
        return session.load_module("kept.so"), session.cpu()

    rlib, dev = load()
    gc.collect()
    module = graph_executor.GraphModule(rlib["default"](dev))  # type: ignore[index]
    module.run(data=golden["data"])
    out = module.get_output(0)
    _close(out.numpy(), golden["output_0"])
    endpoint = rlib._endpoint  # type: ignore[attr-defined]
    assert not endpoint.closed
    del rlib, module, out
    gc.collect()
    assert endpoint.closed  # the last remote object took the session with it
