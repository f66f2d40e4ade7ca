"""Issue 23 items 1 and 8: JSON values that do not fit are refused, never wrapped; answers are
strict JSON (non-finite outputs as strings) with a Content-Length, HTTP/1.0 included."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from support.serve import error_of, post_json, read_reply, status_of
from tvmrt.serve import BackgroundServer, InferenceApp, model_from_graph
from tvmrt.testing import GraphBuilder, graphs, numpy_op_library

pytest.importorskip("uvicorn")


def _strict(text: bytes) -> object:
    """RFC 8259 JSON only: the bare NaN / Infinity tokens Python accepts raise."""

    def refuse(token: str) -> object:
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


def _post(server: BackgroundServer, name: str, datatype: str, data: object, n: int = 4):
    body = {"inputs": [{"name": "x", "shape": [n], "datatype": datatype, "data": data}]}
    # json.dumps writes NaN/Infinity tokens, as a hostile client would
    status, _, answer = post_json(server.url, f"/v2/models/{name}/infer", body, parse=_strict)
    return status, answer


@pytest.fixture(scope="module")
def typed_server():
    lib = numpy_op_library()
    models = [
        model_from_graph(dt, graphs.add_one(4, dt), lib)
        for dt in ("int32", "uint8", "int8", "bool", "float32", "float16", "int64", "uint64")
    ]
    with BackgroundServer(InferenceApp(models)) as server:
        yield server


REFUSED = [
    ("int32", "INT32", [2**32 + 5, 0, 0, 0], "value 4294967301 at index 0 is out of range"),
    ("int32", "INT32", [0, 0, 0, 2**31], "[-2147483648, 2147483647]"),
    (
        "uint8",
        "UINT8",
        [0, -1, 0, 0],
        "input 'x' (UINT8): value -1 at index 1 is out of range [0, 255]",
    ),
    ("uint8", "UINT8", [0, 0, 300, 0], "value 300 at index 2 is out of range [0, 255]"),
    ("int8", "INT8", [1000, 0, 0, 0], "value 1000 at index 0 is out of range [-128, 127]"),
    ("bool", "BOOL", [True, 2, False, 0], "value 2 at index 1 is not a boolean"),
    ("int32", "INT32", [1, 2.5, 3, 4], "value 2.5 at index 1 is not an integer"),
    ("int64", "INT64", [2**63, 0, 0, 0], "value 9223372036854775808 at index 0 is out of range"),
    ("uint64", "UINT64", [2**64, 0, 0, 0], "value 18446744073709551616 at index 0 is out of range"),
    ("float32", "FP32", [1.0, math.nan, 0, 0], "value nan at index 1 is not finite"),
    ("float32", "FP32", [math.inf, 0, 0, 0], "value inf at index 0 is not finite"),
    ("float32", "FP32", [0, 0, 0, -math.inf], "value -inf at index 3 is not finite"),
    ("float32", "FP32", [1e39, 0, 0, 0], "value 1e+39 at index 0 is out of range"),
    ("float16", "FP16", [70000, 0, 0, 0], "value 70000 at index 0 is out of range [-65504, 65504]"),
    ("float32", "FP32", [True, False, True, False], "value True at index 0 is not a number"),
]


@pytest.mark.parametrize(("model", "datatype", "data", "message"), REFUSED)
def test_values_that_do_not_fit_are_refused_not_wrapped(
    typed_server, model, datatype, data, message
):
    status, doc = _post(typed_server, model, datatype, data)
    assert status == 400, doc
    assert message in doc["error"]
    assert doc["error"].startswith("input 'x'")


def test_json_number_past_double_range_is_refused(typed_server):
    import http.client

    raw = b'{"inputs":[{"name":"x","shape":[4],"datatype":"FP32","data":[1e309,0,0,0]}]}'
    conn = http.client.HTTPConnection(typed_server.host, typed_server.port, timeout=30)
    conn.request("POST", "/v2/models/float32/infer", body=raw)
    resp = conn.getresponse()
    assert resp.status == 400
    assert "value inf at index 0 is not finite" in _strict(resp.read())["error"]
    conn.close()


@pytest.mark.parametrize(
    ("model", "datatype", "data", "expected"),
    [
        ("uint8", "UINT8", [0, 254, 1, 2], [1, 255, 2, 3]),
        ("int8", "INT8", [-128, 126, 0, 1], [-127, 127, 1, 2]),
        ("int32", "INT32", [-(2**31), 2**31 - 2, 0, 1], [-(2**31) + 1, 2**31 - 1, 1, 2]),
        ("bool", "BOOL", [True, False, 1, 0], None),
        ("float16", "FP16", [65504, -1, 0.5, 0], [65504, 0, 1.5, 1]),
    ],
)
def test_values_in_range_are_served(typed_server, model, datatype, data, expected):
    status, doc = _post(typed_server, model, datatype, data)
    assert status == 200, doc
    if expected is not None:
        assert doc["outputs"][0]["data"] == expected


def test_non_finite_outputs_are_strings_in_strict_json():
    def spread(a, out):  # x -> [x/0 for x] : NaN, inf, -inf and a finite value
        with np.errstate(divide="ignore", invalid="ignore"):
            out.copyfrom(a.numpy() / np.array([0, 0, 0, 1], "f4"))

    b = GraphBuilder()
    x = b.input("x", (4,))
    (y,) = b.op("spread", "spread", [x], [(4,)])
    b.output(y)
    model = model_from_graph("nf", b.to_json(), numpy_op_library(spread=spread))
    with BackgroundServer(InferenceApp([model])) as server:
        status, doc = _post(server, "nf", "FP32", [0, 1, -1, 2.5])
    assert status == 200
    assert doc["outputs"][0]["data"] == ["NaN", "Infinity", "-Infinity", 2.5]


def test_real_server_refuses_nan_input_and_answers_http10_with_content_length(mobilenet_server):
    with mobilenet_server() as served:
        body = (
            b'{"inputs":[{"name":"data","shape":[1,3,224,224],"datatype":"FP32","data":[NaN'
            + b",0" * (3 * 224 * 224 - 1)
            + b"]}]}"
        )
        status, _, raw = served.request("POST", "/v2/models/mb/infer", body)
        assert status == 400
        assert _strict(raw) == {
            "error": "input 'data' (FP32): value nan at index 0 is not finite; JSON has no NaN "
            "or Infinity (send non-finite values as binary data)"
        }
        for path in ("/v2/health/live", "/v2/models/mb", "/metrics", "/v2/nope"):
            with served.connect() as sock:
                sock.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
                raw = read_reply(sock)
            head, _, payload = raw.partition(b"\r\n\r\n")
            assert status_of(raw) in (200, 404), raw[:200]
            lines = head.lower().split(b"\r\n")
            assert b"transfer-encoding: chunked" not in lines
            assert f"content-length: {len(payload)}".encode() in lines
        with served.connect() as sock:  # one error path written by the app, also HTTP/1.0
            sock.sendall(b"POST /v2/models/mb/infer HTTP/1.0\r\nContent-Length: 3\r\n\r\n{x}")
            raw = read_reply(sock)
        assert status_of(raw) == 400
        assert "not valid JSON" in error_of(raw)
        assert b"content-length:" in raw.lower()
