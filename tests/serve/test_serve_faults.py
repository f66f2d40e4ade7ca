"""tvmrt serve under load and faults: nothing lost or duplicated, and the server keeps serving.

The load test's size scales with TVMRT_STRESS_SCALE (default 1: 2,000 requests).
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from support.models import sleepy_model
from support.serve import post_json
from tvmrt.serve import BackgroundServer, InferenceApp, model_from_graph
from tvmrt.testing import GraphBuilder, graphs, numpy_op_library

pytest.importorskip("uvicorn")

SCALE = float(os.environ.get("TVMRT_STRESS_SCALE", "1"))


def sleepy_body(seconds, second=1.0):
    return {"inputs": [{"name": "x", "shape": [2], "datatype": "FP32", "data": [seconds, second]}]}


def wait_idle(model, timeout=20.0):
    deadline = time.monotonic() + timeout
    while model.pending and time.monotonic() < deadline:
        time.sleep(0.01)
    assert model.pending == 0


def test_queue_overflow_gets_503_with_retry_after_then_serves():
    model = sleepy_model(workers=1, max_queue=1)
    with BackgroundServer(InferenceApp([model])) as server:
        with ThreadPoolExecutor(6) as pool:
            answers = list(
                pool.map(
                    lambda _: post_json(server.url, "/v2/models/sleepy/infer", sleepy_body(0.4)),
                    range(6),
                )
            )
        codes = sorted(a[0] for a in answers)
        assert set(codes) == {200, 503}
        assert codes.count(200) >= 2
        for status, headers, doc in answers:
            if status == 503:
                assert headers["retry-after"] == "1"
                assert "is at capacity: 1 running and 1 queued" in doc["error"]
            else:
                assert doc["outputs"][0]["data"] == pytest.approx([0.8, 2.0])
        assert model.metrics.rejected == codes.count(503)
        assert model.metrics.executions == codes.count(200)
        assert post_json(server.url, "/v2/models/sleepy/infer", sleepy_body(0))[0] == 200


def test_timeouts_answer_504_and_drop_queued_work():
    model = sleepy_model(workers=1, max_queue=4, timeout=0.3)
    with BackgroundServer(InferenceApp([model])) as server:
        with ThreadPoolExecutor(2) as pool:
            running = pool.submit(
                post_json, server.url, "/v2/models/sleepy/infer", sleepy_body(1.0)
            )
            time.sleep(0.05)
            queued = pool.submit(post_json, server.url, "/v2/models/sleepy/infer", sleepy_body(0.0))
            for fut in (running, queued):
                status, _, doc = fut.result(10)
                assert status == 504
                assert doc["error"] == "model 'sleepy' did not answer within 0.3 s"
        wait_idle(model)
        assert model.metrics.executions == 1  # the queued request was dropped unrun
        status, _, doc = post_json(server.url, "/v2/models/sleepy/infer", sleepy_body(0.0, 3.0))
        assert status == 200
        assert doc["outputs"][0]["data"] == [0.0, 6.0]


def test_kernel_that_raises_gets_500_and_server_keeps_serving():
    model = sleepy_model(workers=2)
    with BackgroundServer(InferenceApp([model])) as server:
        status, _, doc = post_json(server.url, "/v2/models/sleepy/infer", sleepy_body(0, -1.0))
        assert status == 500
        assert "kernel refuses negative input -1.0" in doc["error"]
        for k in range(4):
            status, _, doc = post_json(server.url, "/v2/models/sleepy/infer", sleepy_body(0, k))
            assert status == 200
            assert doc["outputs"][0]["data"] == [0, 2 * k]
        assert model.metrics.requests == {500: 1, 200: 4}


def test_client_disconnects_mid_request():
    model = sleepy_model(workers=1)
    with BackgroundServer(InferenceApp([model])) as server:
        # 1: headers and part of the body, then gone
        with socket.create_connection((server.host, server.port), timeout=5) as s:
            s.sendall(
                b"POST /v2/models/sleepy/infer HTTP/1.1\r\nHost: x\r\n"
                b'Content-Length: 1000\r\n\r\n{"inputs": ['
            )
        # 2: a whole request to a slow kernel, gone before the answer
        body = json.dumps(sleepy_body(0.3)).encode()
        with socket.create_connection((server.host, server.port), timeout=5) as s:
            s.sendall(
                b"POST /v2/models/sleepy/infer HTTP/1.1\r\nHost: x\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            deadline = time.monotonic() + 5
            while model.pending == 0 and time.monotonic() < deadline:
                time.sleep(0.005)
        wait_idle(model)
        assert model.metrics.executions == 1  # the abandoned request still ran, once
        status, _, doc = post_json(server.url, "/v2/models/sleepy/infer", sleepy_body(0, 2.0))
        assert status == 200
        assert doc["outputs"][0]["data"] == [0, 4.0]


def _rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def test_load_every_answer_correct_none_lost_or_duplicated():
    total = max(160, int(2000 * SCALE))
    threads = 16
    model = model_from_graph("add1", graphs.add_one(8), numpy_op_library(), workers=2)
    seen: dict[str, int] = {}
    lock = threading.Lock()
    rss: list[int] = []

    def client(tid, count, url):
        host, port = url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        rng = np.random.default_rng(tid)
        try:
            for k in range(count):
                rid = f"{tid}-{k}"
                x = rng.standard_normal(8).astype("float32")
                doc = {
                    "id": rid,
                    "inputs": [{"name": "x", "shape": [8], "datatype": "FP32", "data": x.tolist()}],
                }
                status, _, out = post_json(url, "/v2/models/add1/infer", doc, conn)
                assert status == 200, out
                assert out["id"] == rid
                np.testing.assert_array_equal(np.array(out["outputs"][0]["data"], "f4"), x + 1)
                with lock:
                    seen[rid] = seen.get(rid, 0) + 1
        finally:
            conn.close()

    with BackgroundServer(InferenceApp([model])) as server:
        for phase in (0.1, 0.9):  # warm-up, then the measured bulk
            per_thread = max(1, int(total * phase) // threads)
            with ThreadPoolExecutor(threads) as pool:
                futures = [
                    pool.submit(client, t + int(phase * 1000), per_thread, server.url)
                    for t in range(threads)
                ]
                for fut in futures:
                    fut.result()
            rss.append(_rss_bytes())
        sent = sum(max(1, int(total * p) // threads) * threads for p in (0.1, 0.9))
        assert len(seen) == sent
        assert set(seen.values()) == {1}
        assert model.metrics.requests == {200: sent}
        assert model.metrics.executions == sent
        assert model.metrics.queue_depth == 0
        assert model.metrics.in_flight == 0
        assert rss[1] - rss[0] < 32 << 20, f"RSS grew by {(rss[1] - rss[0]) >> 20} MiB"


def batched_model(batch_delay):
    """x (4, 3) -> x + 1, compiled batch 4; counts the kernel's calls and their inputs."""
    calls = []

    def add1(a, out):
        calls.append(a.numpy().copy())
        out.copyfrom(a.numpy() + 1)

    b = GraphBuilder()
    x = b.input("x", (4, 3))
    (y,) = b.op("add1", "add1", [x], [(4, 3)])
    b.output(y)
    lib = numpy_op_library(add1=add1)
    model = model_from_graph("b4", b.to_json(), lib, batch_delay=batch_delay)
    assert len(calls) == 3  # the load-time row check ran the model three times
    calls.clear()
    return model, calls


def test_dynamic_batching_pads_splits_and_answers_each_request():
    model, calls = batched_model(batch_delay=0.5)
    assert model.metadata()["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 3]}]
    rows = [1, 2, 1, 1, 3, 1]
    xs = [np.arange(n * 3, dtype="f4").reshape(n, 3) + 10 * k for k, n in enumerate(rows)]
    with BackgroundServer(InferenceApp([model])) as server:
        with ThreadPoolExecutor(len(rows)) as pool:
            bodies = [
                {
                    "inputs": [
                        {
                            "name": "x",
                            "shape": list(x.shape),
                            "datatype": "FP32",
                            "data": x.ravel().tolist(),
                        }
                    ]
                }
                for x in xs
            ]
            answers = list(
                pool.map(lambda d: post_json(server.url, "/v2/models/b4/infer", d), bodies)
            )
        for x, (status, _, doc) in zip(xs, answers, strict=True):
            assert status == 200, doc
            out = doc["outputs"][0]
            assert out["shape"] == list(x.shape)
            np.testing.assert_array_equal(np.array(out["data"], "f4").reshape(x.shape), x + 1)
        # 9 rows in batches of at most 4: at least 3 runs, fewer than one per request
        assert 3 <= len(calls) < len(rows)
        assert model.metrics.executions == len(calls)
        fed = np.concatenate(calls)
        for x in xs:  # every row reached the kernel exactly once; the rest is zero padding
            for r in x:
                assert int((fed == r).all(axis=1).sum()) == 1
        assert int((fed == 0).all(axis=1).sum()) == 4 * len(calls) - sum(rows)
        too_big = {"inputs": [{"name": "x", "shape": [5, 3], "datatype": "FP32", "data": [0] * 15}]}
        status, _, doc = post_json(server.url, "/v2/models/b4/infer", too_big)
        assert status == 400
        assert doc["error"] == "input 'x' has batch 5, expected 1 to 4"


def test_dynamic_batching_needs_a_batch_dimension():
    b = GraphBuilder()
    x = b.input("x", (1, 4))
    (y,) = b.op("add", "myadd", [x], [(1, 4)], flatten_data=True)
    b.output(y)
    with pytest.raises(
        ValueError,
        match=r"model 'm' cannot batch dynamically: every input and output needs the same "
        r"leading \(batch\) dimension > 1, got \{'x': 1, 'add_0': 1\}",
    ):
        model_from_graph("m", b.to_json(), numpy_op_library(), batch_delay=0.01)
