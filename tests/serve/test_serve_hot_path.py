"""The infer endpoint's fast paths: where a request's run and its parsing happen.

A model whose runs take microseconds is run on the event loop's thread when nothing else
is pending (the hop to a worker thread and back costs more than the run); a slow model,
or a request arriving while another is pending, goes to the worker threads. A request's
parse cost follows its JSON part only: binary tensors after it are taken without a copy.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

from tvmrt.serve import BackgroundServer, InferenceApp, model_from_graph
from tvmrt.serve.app import _json_bytes
from tvmrt.testing import GraphBuilder, numpy_op_library

pytest.importorskip("uvicorn")


def _model(pause: float) -> tuple[Any, list[str]]:
    """x (4,) -> x + 1; records the thread each run happens on, sleeping ``pause`` s."""
    threads: list[str] = []

    def add1(a: Any, out: Any) -> None:
        threads.append(threading.current_thread().name)
        if pause:
            time.sleep(pause)
        out.copyfrom(a.numpy() + 1)

    b = GraphBuilder()
    x = b.input("x", (4,))
    (y,) = b.op("add1", "add1", [x], [(4,)])
    b.output(y)
    return model_from_graph("m", b.to_json(), numpy_op_library(add1=add1)), threads


def _post(url: str, value: float) -> tuple[int, list[float]]:
    import http.client

    host, port = url.removeprefix("http://").split(":")
    doc = {"inputs": [{"name": "x", "shape": [4], "datatype": "FP32", "data": [value] * 4}]}
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("POST", "/v2/models/m/infer", body=json.dumps(doc).encode())
        resp = conn.getresponse()
        answer = json.loads(resp.read())
        return resp.status, answer.get("outputs", [{}])[0].get("data", [])
    finally:
        conn.close()


def test_a_fast_model_runs_on_the_event_loop_and_a_slow_one_in_workers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # "fast" is under 100 us on a quiet machine; a loaded one may take longer, so the
    # bound is raised here to keep the two models apart by far more than the noise
    monkeypatch.setattr("tvmrt.serve.model._INLINE_RUN", 0.010)
    fast, fast_threads = _model(0.0)
    slow, slow_threads = _model(0.030)
    with BackgroundServer(InferenceApp([fast])) as server:
        for k in range(10):
            assert _post(server.url, k) == (200, [k + 1.0] * 4)
    # the first run measures the model (in a worker); later ones run where the loop runs
    assert fast_threads[0].startswith("tvmrt-m")
    assert fast_threads[-5:] == ["tvmrt-serve"] * 5
    with BackgroundServer(InferenceApp([slow])) as server:
        for k in range(5):
            assert _post(server.url, k) == (200, [k + 1.0] * 4)
    assert all(name.startswith("tvmrt-m") for name in slow_threads), slow_threads
    assert fast.metrics.executions == 10
    assert fast.metrics.in_flight == 0
    assert (fast.pending, slow.pending) == (0, 0)


def test_concurrent_requests_to_a_fast_model_are_all_answered_once() -> None:
    fast, threads = _model(0.0)
    with BackgroundServer(InferenceApp([fast])) as server, ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda v: _post(server.url, v), range(64)))
    assert answers == [(200, [v + 1.0] * 4) for v in range(64)]
    assert len(threads) == 64
    assert fast.metrics.executions == 64
    assert (fast.pending, fast.metrics.in_flight, fast.metrics.queue_depth) == (0, 0, 0)


@pytest.mark.parametrize(
    ("declared", "expected"),
    [("10", 10), ("0", 0), ("999999", 100), (None, 100), ("x", 100), ("\u00b2", 100)],
)
def test_only_the_json_part_counts_for_parsing(declared: str | None, expected: int) -> None:
    headers = {} if declared is None else {"inference-header-content-length": declared}
    assert _json_bytes(headers, bytes(100)) == expected


def test_a_large_binary_request_parsed_on_the_loop_equals_numpy() -> None:
    b = GraphBuilder()
    x = b.input("x", (256, 1024))
    (y,) = b.op("add1", "add1", [x], [(256, 1024)])
    b.output(y)
    lib = numpy_op_library(add1=lambda a, out: out.copyfrom(a.numpy() + 1))
    model = model_from_graph("big", b.to_json(), lib, max_batch=1)
    arr = np.random.default_rng(3).standard_normal((256, 1024)).astype("<f4")  # 1 MiB
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "x",
                    "shape": [256, 1024],
                    "datatype": "FP32",
                    "parameters": {"binary_data_size": arr.nbytes},
                }
            ],
            "parameters": {"binary_data_output": True},
        }
    ).encode()
    import http.client

    with BackgroundServer(InferenceApp([model])) as server:
        conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
        conn.request(
            "POST",
            "/v2/models/big/infer",
            header + arr.tobytes(),
            {"Inference-Header-Content-Length": str(len(header))},
        )
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
    assert resp.status == 200
    start = int(resp.getheader("Inference-Header-Content-Length") or 0)
    got = np.frombuffer(data[start:], "<f4").reshape(256, 1024)
    assert got.tobytes() == (arr + 1).tobytes()
