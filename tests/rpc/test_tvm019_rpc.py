"""RPC as TVM 0.19's own tests use it (issue 47, item 3): a numpy scalar a server function
returns arrives as a number, ``debug_executor.create`` over a remote factory, TVM's
``rpc.LocalSession`` and ``rpc.base``'s random keys."""

from __future__ import annotations

import random
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import tvmrt
from support.paths import REPO
from tvmrt import rpc, runtime
from tvmrt.contrib import graph_executor
from tvmrt.contrib.debugger import debug_executor
from tvmrt.rpc import base
from tvmrt.rpc.server import RPCServer, ServerConfig


@pytest.fixture(scope="module")
def server() -> Iterator[RPCServer]:
    tvmrt.register_func("rpc.test.numpy_float", lambda: np.float32(1.5), override=True)
    tvmrt.register_func("rpc.test.numpy_int", lambda: np.int64(7), override=True)
    served = RPCServer(ServerConfig(port=0))
    thread = threading.Thread(target=served.serve_forever, daemon=True)
    thread.start()
    yield served
    served.close()
    thread.join(10)


def test_a_numpy_scalar_result_arrives_as_a_number(server: RPCServer) -> None:
    # it was left on the server and came back as a RemoteObject
    remote = rpc.connect("127.0.0.1", server.port)
    value = remote.get_function("rpc.test.numpy_float")()
    assert type(value) is float
    assert value == 1.5
    number = remote.get_function("rpc.test.numpy_int")()
    assert type(number) is int
    assert number == 7
    remote.close()


def test_debug_executor_over_a_remote_factory_profiles(server: RPCServer, artifacts: Path) -> None:
    # TVM's test_rpc_graph: the factory's params came back as a remote Map and
    # set_input(**params) raised TypeError; as TVM, they are not set over RPC
    factory = artifacts / "relay016" / "linkparams-so" / "deploy.so"
    graph = runtime.load_module(str(factory))["get_graph_json"]()
    remote = rpc.connect("127.0.0.1", server.port)
    remote.upload(str(factory))
    remote_factory = remote.load_module("deploy.so")
    module = debug_executor.create(
        graph, remote_factory, remote.cpu(), dump_root=tempfile.mkdtemp()
    )
    with np.load(factory.parent / "golden.npz") as npz:
        report = module.profile(data=npz["data"])
    assert len(report.calls) > 0
    remote.close()


def test_a_local_session_runs_remote_code_here(tmp_path: Path) -> None:
    # TVM's test_runtime_module_based_interface: upload, load_module(the full path), cpu()
    folder = REPO / "examples" / "digits" / "model"
    session = rpc.LocalSession()
    session.upload(str(folder / "standalone.so"))
    assert "standalone.so" in session.listdir(".")
    lib = session.load_module(str(folder / "standalone.so"))
    dev = session.cpu()
    assert dev == runtime.cpu()
    module = graph_executor.GraphModule(lib["default"](dev))
    image = np.load(folder / "heldout.npz")["image"]
    module.set_input("image", image)
    module.run()
    by_name = graph_executor.GraphModule(session.load_module("standalone.so")["default"](dev))
    by_name.set_input("image", image)
    by_name.run()
    assert module.get_output(0).numpy().tobytes() == by_name.get_output(0).numpy().tobytes()
    assert session.get_function("runtime.NumThreads")() >= 1
    session.close()


@pytest.mark.parametrize("device_key", ["16e995b6", "127.0.0.1:5555"])
def test_random_keys_split_back_and_avoid_a_conflict_map(device_key: str) -> None:
    random.seed(0)
    key = base.random_key(device_key)
    assert key.startswith(device_key)
    assert base.split_random_key(key)[0] == device_key
    random.seed(0)
    other = base.random_key(device_key, cmap={key})
    assert other != key
    assert base.split_random_key(other)[0] == device_key
    assert base.RPC_SESS_MASK == 128
    assert base.TrackerCode.REQUEST == 4
