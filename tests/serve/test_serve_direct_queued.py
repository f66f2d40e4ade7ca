"""Infer requests read by the httptools protocol and answered from a worker thread
(serve/http_direct.py): a model whose runs are not done on the event loop, large bodies.

A server in this process serves ``x (N,) -> x + 1`` over a numpy kernel that sleeps, so
every run goes to a worker thread. The ASGI route is counted (``InferenceApp.__call__``)
to prove which route answered, and answers are compared with the h11 protocol's, which
has no direct route.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from support.serve import read_reply, split_answers, status_of
from tvmrt.serve import InferenceApp, model_from_graph
from tvmrt.serve.limits import ServeLimits
from tvmrt.serve.server import BackgroundServer
from tvmrt.testing import GraphBuilder, numpy_op_library

pytest.importorskip("uvicorn")
pytest.importorskip("httptools")

N = 1 << 16  # 256 KiB of float32: four times what the direct route used to take
PAUSE = 0.05  # seconds a run sleeps: the answer is computed while the client waits


class Counted(InferenceApp):
    """The app, counting the requests its ASGI route was called for."""

    asgi = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.asgi += scope["type"] == "http"
        await super().__call__(scope, receive, send)


def _slow_model(pause: float = PAUSE) -> Any:
    def add1(a: Any, out: Any) -> None:
        time.sleep(pause)
        out.copyfrom(a.numpy() + 1)

    b = GraphBuilder()
    x = b.input("x", (N,))
    (y,) = b.op("add1", "add1", [x], [(N,)])
    b.output(y)
    return model_from_graph("m", b.to_json(), numpy_op_library(add1=add1), workers=2)


def _serve(http: str, limits: ServeLimits | None = None, pause: float = PAUSE) -> BackgroundServer:
    return BackgroundServer(Counted([_slow_model(pause)], limits=limits), http=http)


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, BackgroundServer]]:
    with _serve("httptools") as direct, _serve("h11") as asgi:
        yield {"httptools": direct, "h11": asgi}


def _body(value: float) -> tuple[bytes, int]:
    x = np.full(N, value, "float32")
    doc = {
        "inputs": [
            {
                "name": "x",
                "shape": [N],
                "datatype": "FP32",
                "parameters": {"binary_data_size": x.nbytes},
            }
        ],
        "parameters": {"binary_data_output": True},
    }
    head = json.dumps(doc).encode()
    return head + x.tobytes(), len(head)


def _request(value: float, extra: bytes = b"") -> bytes:
    body, head = _body(value)
    return (
        b"POST /v2/models/m/infer HTTP/1.1\r\nHost: a\r\n" + extra
        + b"Inference-Header-Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (head, len(body))
        + body
    )  # fmt: skip


def _output(answer: tuple[int, dict[str, str], bytes]) -> np.ndarray[Any, Any]:
    status, headers, body = answer
    assert status == 200, body[:300]
    head = int(headers["inference-header-content-length"])
    return np.frombuffer(body[head:], "float32")


def _exchange(server: BackgroundServer, data: bytes) -> bytes:
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(data)
        return read_reply(sock, 10)


def test_a_large_body_for_a_worker_thread_skips_asgi_and_equals_its_answer(servers) -> None:
    app = servers["httptools"].app
    before = app.asgi  # type: ignore[attr-defined]
    request = _request(2.5, b"Connection: close\r\n")
    direct = split_answers(_exchange(servers["httptools"], request))
    asgi = split_answers(_exchange(servers["h11"], request))
    assert app.asgi == before  # type: ignore[attr-defined]
    assert np.array_equal(_output(direct[0]), np.full(N, 3.5, "float32"))
    assert [(s, b) for s, _, b in direct] == [(s, b) for s, _, b in asgi]
    assert direct[0][1] == asgi[0][1]
    assert app.budget.held == 0


def test_requests_pipelined_behind_a_running_answer_wait_their_turn(servers) -> None:
    server = servers["httptools"]
    live = b"GET /v2/health/live HTTP/1.1\r\nHost: a\r\n\r\n"
    data = _request(0) + _request(1) + live + _request(2, b"Connection: close\r\n")
    answers = split_answers(_exchange(server, data))
    assert [s for s, _, _ in answers] == [200] * 4
    assert json.loads(answers[2][2]) == {"live": True}
    for k, answer in zip((0, 1, 3), answers[:2] + answers[3:], strict=True):
        assert np.array_equal(_output(answer), np.full(N, [0, 1, 0, 2][k] + 1, "float32"))
    assert answers[-1][1]["connection"] == "close"
    assert server.app.budget.held == 0


def test_a_client_gone_while_its_answer_runs_costs_nothing(servers) -> None:
    server = servers["httptools"]
    model = server.app.models["m"]
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(_request(7))
        time.sleep(PAUSE / 5)  # the run has started
    time.sleep(3 * PAUSE)
    answers = split_answers(_exchange(server, _request(8, b"Connection: close\r\n")))
    assert np.array_equal(_output(answers[0]), np.full(N, 9, "float32"))
    assert (model.pending, server.app.budget.held) == (0, 0)


def test_direct_bodies_are_held_within_the_budget() -> None:
    body, _ = _body(1)
    size = len(body)
    limits = ServeLimits(max_body_bytes=size, max_json_bytes=size, max_inflight_body_bytes=size)
    with _serve("httptools", limits) as server:
        request = _request(1, b"Connection: close\r\n")
        with socket.create_connection((server.host, server.port), timeout=10) as holder:
            holder.sendall(request[:-100])  # the whole budget, held by a body still coming
            deadline = time.monotonic() + 5
            while server.app.budget.held == 0:
                assert time.monotonic() < deadline, "the body was never reserved"
                time.sleep(0.01)
            assert status_of(_exchange(server, request)) == 503
            holder.sendall(request[-100:])
            ((status, _, _),) = split_answers(read_reply(holder, 10))
        assert status == 200
        assert server.app.budget.held == 0
        assert status_of(_exchange(server, request)) == 200


def test_a_graceful_stop_finishes_a_running_answer_and_closes() -> None:
    server = _serve("httptools", pause=1.0).start()  # the stop comes within 0.1 s
    got: list[bytes] = []
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(_request(4))  # keep-alive asked
        time.sleep(0.1)
        stopper = threading.Thread(target=server.stop)
        stopper.start()
        got.append(read_reply(sock, 10))  # until the server closes the connection
        stopper.join(30)
    ((status, headers, _),) = split_answers(got[0])
    assert status == 200
    assert headers["connection"] == "close"
