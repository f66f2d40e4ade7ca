"""Dynamic batching: on by default where the rows are independent, bitwise equal to unbatched.

``batched/cnn-b4`` and ``batched/cnn-b1`` are one small CNN (conv, relu, pool, dense,
softmax) compiled by TVM 0.16 for batch 4 and batch 1 (tests/fixtures/build_batched.py);
the golden holds each image run ALONE by TVM's own graph executor on the batch-1 build.
Served batch-4 answers, however the requests were stacked and padded, must equal those bit
for bit. Models whose rows mix (made here from numpy kernels) must not be batched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from support.paths import REPO
from support.serve import post_json, tvmrt_serve
from tvmrt.artifact import find_artifact
from tvmrt.error import InvalidArgumentError
from tvmrt.serve import BackgroundServer, InferenceApp, load_model, model_from_graph
from tvmrt.testing import GraphBuilder, numpy_op_library

pytest.importorskip("uvicorn")


@pytest.fixture(scope="module")
def batched(artifacts: Path) -> Path:
    return artifacts / "batched"


def _post(server: BackgroundServer, x: np.ndarray[Any, Any]) -> tuple[int, dict[str, Any]]:
    doc = {"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32"}]}
    doc["inputs"][0]["data"] = x.ravel().tolist()
    status, _, answer = post_json(server.url, "/v2/models/cnn/infer", doc)
    return status, answer


def _rows(doc: dict[str, Any]) -> np.ndarray[Any, Any]:
    out = doc["outputs"][0]
    return np.array(out["data"], "float32").reshape(out["shape"])


def test_batched_answers_equal_tvm_unbatched_runs_bitwise(batched: Path) -> None:
    golden = np.load(batched / "golden.npz")
    xs, ys = golden["x"], golden["y"]
    model = load_model("cnn", find_artifact(str(batched / "cnn-b4")), batch_delay=0.3)
    assert model.batch == 4
    # four 1-row requests and one 2-row request, sent at once: they share runs
    parts = [xs[0:1], xs[1:2], xs[2:4], xs[4:5], xs[5:6]]
    with BackgroundServer(InferenceApp([model])) as server, ThreadPoolExecutor(5) as pool:
        answers = list(pool.map(lambda x: _post(server, x), parts))
    start = 0
    for x, (status, doc) in zip(parts, answers, strict=True):
        assert status == 200, doc
        got = _rows(doc)
        want = ys[start : start + len(x)]
        assert got.shape == want.shape
        assert got.tobytes() == want.tobytes(), f"rows {start}.. differ from TVM's lone runs"
        start += len(x)
    assert model.metrics.executions < len(parts)  # 6 rows took fewer runs than requests


def test_batching_is_on_by_default_only_where_the_model_has_a_batch(batched: Path) -> None:
    golden = np.load(batched / "golden.npz")
    b4 = load_model("cnn", find_artifact(str(batched / "cnn-b4")))
    assert b4.batch == 4
    assert b4.metadata()["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 1, 8, 8]}]
    b1 = load_model("cnn", find_artifact(str(batched / "cnn-b1")))
    assert b1.batch == 0
    assert b1.metadata()["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [1, 1, 8, 8]}]
    off = load_model("cnn", find_artifact(str(batched / "cnn-b4")), max_batch=1)
    assert off.batch == 0
    assert off.metadata()["inputs"][0]["shape"] == [4, 1, 8, 8]
    two = load_model("cnn", find_artifact(str(batched / "cnn-b4")), max_batch=2)
    assert two.batch == 2
    with pytest.raises(InvalidArgumentError, match="max_batch 5 exceeds the compiled batch 4"):
        load_model("cnn", find_artifact(str(batched / "cnn-b4")), max_batch=5)
    with BackgroundServer(InferenceApp([two])) as server:
        status, doc = _post(server, golden["x"][:2])
        assert status == 200, doc
        assert _rows(doc).tobytes() == golden["y"][:2].tobytes()
        status, doc = _post(server, golden["x"][:3])
        assert status == 400
        assert doc["error"] == "input 'x' has batch 3, expected 1 to 2"
    for model in (b4, b1, off, two):
        model.close()


def _mixing_model(kernel: Any, max_batch: int | None) -> Any:
    b = GraphBuilder()
    x = b.input("x", (4, 3))
    (y,) = b.op("mix", "mix", [x], [(4, 3)])
    b.output(y)
    lib = numpy_op_library(mix=lambda a, out: out.copyfrom(kernel(a.numpy())))
    return model_from_graph("m", b.to_json(), lib, max_batch=max_batch)


@pytest.mark.parametrize(
    ("kernel", "why"),
    [
        # max over the batch is order-free: the rotated run agrees, the lone row does not
        (lambda a: a - a.max(axis=0), "of a row changes with the other rows' values"),
        (lambda a: a + np.arange(4, dtype="f4")[:, None], "changes when the rows are reordered"),
        (lambda a: a[::-1].copy(), "changes when the rows are reordered"),
    ],
    ids=["batch-max", "position", "reversed"],
)
def test_a_model_whose_rows_mix_is_not_batched(kernel: Any, why: str) -> None:
    model = _mixing_model(kernel, None)  # the default: served unbatched, compiled shape
    assert model.batch == 0
    assert model.metadata()["inputs"][0]["shape"] == [4, 3]
    with pytest.raises(InvalidArgumentError, match=f"model 'm' cannot batch dynamically: .*{why}"):
        _mixing_model(kernel, 4)


def test_a_model_that_fails_on_random_rows_is_not_batched() -> None:
    def refuse(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        raise ValueError("only zeros are valid here")

    assert _mixing_model(refuse, None).batch == 0
    with pytest.raises(InvalidArgumentError, match="a check run on random rows failed"):
        _mixing_model(refuse, 2)


def test_tvmrt_serve_batches_by_default_and_refuses_bad_batch_flags(batched: Path) -> None:
    b4 = str(batched / "cnn-b4")
    with tvmrt_serve(b4, "--name", "cnn") as served:
        status, _, body = served.request("GET", "/v2/models/cnn")
        assert status == 200
        assert json.loads(body)["inputs"][0]["shape"] == [-1, 1, 8, 8]
    with tvmrt_serve(b4, "--name", "cnn", "--max-batch", "1") as served:
        status, _, body = served.request("GET", "/v2/models/cnn")
        assert json.loads(body)["inputs"][0]["shape"] == [4, 1, 8, 8]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    for flags, message in [
        (["--max-batch", "0"], "--max-batch must be >= 1 (1: no batching), got 0"),
        (["--batch-wait-us", "-5"], "--batch-wait-us must be >= 0, got -5.0"),
        (
            ["--batch-wait-us", "5", "--batch-delay-ms", "1"],
            "give --batch-wait-us or --batch-delay-ms, not both",
        ),
        (["--max-batch", "8"], "model 'cnn' cannot batch dynamically: max_batch 8 exceeds"),
    ]:
        done = subprocess.run(
            [sys.executable, "-m", "tvmrt", "serve", b4, "--name", "cnn", *flags],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        assert message in done.stderr
