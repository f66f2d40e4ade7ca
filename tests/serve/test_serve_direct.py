"""Small infer requests answered straight from the httptools protocol (serve/http_direct.py).

A server in this process (``BackgroundServer``) serves TVM's add-one graph over numpy
kernels, whose runs are done on the event loop. Each answer is compared with the ASGI
route's answer to the same bytes (the h11 protocol, which has no direct route), and
``InferenceApp.answer_now`` is counted to prove which route answered.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import numpy as np
import pytest

from support.serve import error_of, read_reply, split_answers, status_of
from tvmrt.serve import InferenceApp, model_from_graph
from tvmrt.serve.limits import ServeLimits
from tvmrt.serve.server import BackgroundServer
from tvmrt.testing import graphs, numpy_op_library

pytest.importorskip("uvicorn")
pytest.importorskip("httptools")

INFER = b"/v2/models/add1/infer"


class Counted(InferenceApp):
    """The app, counting the answers its direct route gave."""

    direct = 0

    def answer_now(self, *args):  # type: ignore[no-untyped-def]
        reply = super().answer_now(*args)
        self.direct += reply is not None
        return reply


def _serve(http: str) -> BackgroundServer:
    model = model_from_graph("add1", graphs.add_one(4), numpy_op_library())
    return BackgroundServer(Counted([model], limits=ServeLimits(body_timeout=1)), http=http)


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, BackgroundServer]]:
    with _serve("httptools") as direct, _serve("h11") as asgi:
        yield {"httptools": direct, "h11": asgi}


def _request(body: bytes, extra: bytes = b"", version: bytes = b"1.1") -> bytes:
    return (
        b"POST " + INFER + b" HTTP/" + version + b"\r\nHost: a\r\n" + extra
        + b"Content-Length: %d\r\n\r\n" % len(body) + body
    )  # fmt: skip


def _json_body(x: list[float], outputs: str = "") -> bytes:
    doc: dict[str, object] = {
        "inputs": [{"name": "x", "shape": [4], "datatype": "FP32", "data": x}]
    }
    if outputs:
        doc["outputs"] = [{"name": outputs}]
    return json.dumps(doc).encode()


def _exchange(server: BackgroundServer, data: bytes, answers: int, close: bool = True) -> bytes:
    """Send ``data``; read until ``answers`` answers (or the server closes)."""
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(data)
        if close:
            return read_reply(sock, 5)
        got = b""
        deadline = time.monotonic() + 5
        while got.count(b"HTTP/1.") < answers or not _complete(got):
            assert time.monotonic() < deadline, got
            got += sock.recv(65536)
        return got


def _complete(raw: bytes) -> bool:
    head, _, body = raw.rpartition(b"HTTP/1.")[2].partition(b"\r\n\r\n")
    length = [ln for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length:")]
    return bool(length) and len(body) >= int(length[0].split(b":")[1])


def _warm(server: BackgroundServer) -> None:
    """Until the model's runs are done on the event loop (its first ones take the ASGI
    route: no runs are timed yet, and a cold run can take over 100 us)."""
    model = server.app.models["add1"]
    for _ in range(50):
        if model.runs_inline():
            return
        _exchange(server, _request(_json_body([0, 0, 0, 0]), b"Connection: close\r\n"), 1)
    pytest.fail("the add-one model's runs never became short enough to run on the loop")


@pytest.mark.parametrize(
    "body",
    [
        _json_body([1.5, -2.0, 3.25, 0.0]),  # an answer
        _json_body([1.0, 2.0, 3.0, 4.0], outputs="nope"),  # an unknown output: 400
        b'{"inputs": [{"name": "x", "shape": [5], "datatype": "FP32", "data": [1,2,3,4,5]}]}',
        b"{not json",
    ],
    ids=["answer", "unknown-output", "bad-shape", "bad-json"],
)
def test_a_direct_answer_equals_the_asgi_answer(servers, body: bytes) -> None:
    for server in servers.values():
        _warm(server)
    app = servers["httptools"].app
    before = app.direct  # type: ignore[attr-defined]
    request = _request(body, b"Connection: close\r\n")
    direct = split_answers(_exchange(servers["httptools"], request, 1))
    asgi = split_answers(_exchange(servers["h11"], request, 1))
    assert app.direct == before + 1  # type: ignore[attr-defined]
    assert [(s, b) for s, _, b in direct] == [(s, b) for s, _, b in asgi]
    assert direct[0][1] == asgi[0][1]  # the same headers, "server" and "connection" included
    if body.startswith(b'{"inputs": [{"name": "x", "shape": [4]') and b"nope" not in body:
        out = json.loads(direct[0][2])["outputs"][0]["data"]
        assert out == (np.array([1.5, -2.0, 3.25, 0.0], "float32") + 1).tolist()


def test_an_absolute_form_target_is_answered_as_on_the_asgi_route(servers) -> None:
    # "POST http://host/v2/.../infer" (RFC 9112's absolute form, what a proxy sends): the
    # ASGI route of the same server (a chunked body takes it) serves the URL's path; the
    # direct route answered 404 for the whole URL
    server = servers["httptools"]
    _warm(server)
    before = server.app.direct  # type: ignore[attr-defined]
    body = _json_body([1.0, 2.0, 3.0, 4.0])
    target = b"POST http://a" + INFER + b" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n"
    direct = target + b"Content-Length: %d\r\n\r\n" % len(body) + body
    chunked = target + b"Transfer-Encoding: chunked\r\n\r\n%x\r\n" % len(body) + body
    chunked += b"\r\n0\r\n\r\n"
    ((status, _, answer),) = split_answers(_exchange(server, direct, 1))
    assert server.app.direct == before + 1  # type: ignore[attr-defined]
    ((asgi_status, _, asgi_answer),) = split_answers(_exchange(server, chunked, 1))
    assert server.app.direct == before + 1  # type: ignore[attr-defined]
    assert (status, answer) == (asgi_status, asgi_answer)
    assert status == 200
    assert json.loads(answer)["outputs"][0]["data"] == [2.0, 3.0, 4.0, 5.0]


def test_kept_alive_and_pipelined_requests_are_answered_in_order(servers) -> None:
    server = servers["httptools"]
    _warm(server)
    before = server.app.direct  # type: ignore[attr-defined]
    bodies = [_json_body([float(i)] * 4) for i in range(5)]
    live = b"GET /v2/health/live HTTP/1.1\r\nHost: a\r\n\r\n"
    data = _request(bodies[0]) + _request(bodies[1]) + live + _request(bodies[2])
    data += _request(bodies[3]) + _request(bodies[4], b"Connection: close\r\n")
    answers = split_answers(_exchange(server, data, 6))
    assert [s for s, _, _ in answers] == [200] * 6
    outs = [json.loads(b) for _, _, b in answers]
    assert outs[2] == {"live": True}
    got = [o["outputs"][0]["data"] for i, o in enumerate(outs) if i != 2]
    assert got == [[float(i + 1)] * 4 for i in range(5)]
    # the two before the GET at least; those after it wait behind its ASGI answer
    assert server.app.direct >= before + 2  # type: ignore[attr-defined]
    assert answers[-1][1]["connection"] == "close"


def test_http_1_0_is_answered_and_closed(servers) -> None:
    server = servers["httptools"]
    _warm(server)
    raw = _exchange(server, _request(_json_body([1, 1, 1, 1]), version=b"1.0"), 1)
    ((status, headers, body),) = split_answers(raw)
    assert status == 200
    assert headers["connection"] == "close"
    assert json.loads(body)["outputs"][0]["data"] == [2.0] * 4


def test_a_body_that_stalls_gets_408(servers) -> None:
    server = servers["httptools"]
    _warm(server)
    body = _json_body([1, 2, 3, 4])
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        start = time.monotonic()
        sock.sendall(_request(body)[:-10])  # the last 10 bytes never come
        raw = read_reply(sock, 4)
    assert status_of(raw) == 408
    assert error_of(raw) == "the request body did not arrive within 1 s"
    assert time.monotonic() - start < 3


def test_a_client_leaving_mid_body_costs_nothing(servers) -> None:
    server = servers["httptools"]
    _warm(server)
    request = _request(_json_body([1, 2, 3, 4]))
    for cut in (len(request) - 1, len(request) - 40, request.index(b"\r\n\r\n") + 4):
        with socket.create_connection((server.host, server.port), timeout=10) as sock:
            sock.sendall(request[:cut])  # then the connection closes, the body unfinished
    time.sleep(0.2)
    raw = _exchange(server, _request(_json_body([5, 5, 5, 5]), b"Connection: close\r\n"), 1)
    ((status, _, body),) = split_answers(raw)
    assert status == 200
    assert json.loads(body)["outputs"][0]["data"] == [6.0] * 4
    model = server.app.models["add1"]  # type: ignore[attr-defined]
    assert model.runs_inline()  # nothing left pending or held
