"""``GET /v2/models/{name}/config`` answers Triton's model configuration (issue 22, item 12),
read here by Triton's own client (``tritonclient``), and the one output name of issue 22,
item 5, in the served metadata."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tvmrt.artifact import find_artifact
from tvmrt.serve import BackgroundServer, InferenceApp, load_model, model_from_graph
from tvmrt.testing import numpy_op_library
from tvmrt.testing.graphs import GraphBuilder

httpclient = pytest.importorskip("tritonclient.http")


def _client(server: BackgroundServer) -> object:
    return httpclient.InferenceServerClient(server.url.removeprefix("http://"))


def test_mobilenet_config(artifacts: Path) -> None:
    model = load_model("mobilenet", find_artifact(artifacts / "mobilenet_v1"), workers=2)
    with BackgroundServer(InferenceApp([model])) as server:
        config = _client(server).get_model_config("mobilenet")  # type: ignore[attr-defined]
    assert config["name"] == "mobilenet"
    assert config["max_batch_size"] == 0  # compiled for batch 1: dims are the full shape
    assert [(t["name"], t["data_type"], t["dims"]) for t in config["input"]] == [
        ("data", "TYPE_FP32", [1, 3, 224, 224])
    ]
    assert [(t["name"], t["data_type"], t["dims"]) for t in config["output"]] == [
        ("fused_nn_softmax_0", "TYPE_FP32", [1, 1000])
    ]
    assert [(g["kind"], g["count"]) for g in config["instance_group"]] == [("KIND_CPU", 2)]
    assert "dynamic_batching" not in config


def test_a_batched_model_leaves_the_batch_out_of_its_dims() -> None:
    b = GraphBuilder()
    x = b.input("x", (4, 3))
    (y,) = b.op("add1", "add1", [x], [(4, 3)])
    b.output(y)
    lib = numpy_op_library(add1=lambda a, out: out.copyfrom(a.numpy() + 1))
    model = model_from_graph("b4", b.to_json(), lib, batch_delay=0.002)
    with BackgroundServer(InferenceApp([model])) as server:
        client = _client(server)
        config = client.get_model_config("b4")  # type: ignore[attr-defined]
        inp = httpclient.InferInput("x", [2, 3], "FP32")
        inp.set_data_from_numpy(np.ones((2, 3), np.float32))
        result = client.infer("b4", [inp])  # type: ignore[attr-defined]
    assert config["max_batch_size"] == 4
    assert [t["dims"] for t in config["input"] + config["output"]] == [[3], [3]]
    assert config["dynamic_batching"]["max_queue_delay_microseconds"] == 2000
    # the config's output name is the one the response carries
    name = config["output"][0]["name"]
    np.testing.assert_array_equal(result.as_numpy(name), np.full((2, 3), 2, np.float32))


def test_an_unknown_model_has_no_config(artifacts: Path) -> None:
    model = load_model("mobilenet", find_artifact(artifacts / "mobilenet_v1"))
    errors = pytest.importorskip("tritonclient.utils")
    with (
        BackgroundServer(InferenceApp([model])) as server,
        pytest.raises(errors.InferenceServerException, match="unknown model 'resnet'"),
    ):
        _client(server).get_model_config("resnet")  # type: ignore[attr-defined]
