"""tvmrt serve: the Open Inference Protocol against tritonclient, curl and golden outputs."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from support.models import sleepy_model
from support.paths import REPO
from tvmrt.artifact import find_artifact
from tvmrt.serve import BackgroundServer, InferenceApp, load_model, model_from_graph
from tvmrt.serve.server import free_port
from tvmrt.testing import graphs, numpy_op_library

pytest.importorskip("uvicorn")

ATOL = {"rtol": 1e-6, "atol": 1e-7}


def add_one_model(name: str = "add1", n: int = 4, **kw: object) -> object:
    return model_from_graph(name, graphs.add_one(n), numpy_op_library(), **kw)  # type: ignore[arg-type]


def request(
    url: str,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def curl(*args: str) -> tuple[int, str]:
    """(HTTP status, body) of a curl call."""
    out = subprocess.run(
        ["curl", "-s", "-m", "30", "-w", "\n%{http_code}", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    body, _, code = out.rpartition("\n")
    return int(code), body


@pytest.fixture
def add1_server():
    with BackgroundServer(InferenceApp([add_one_model()], max_body_bytes=4096)) as server:
        yield server


@pytest.fixture(scope="module")
def mobilenet(artifacts):
    golden = np.load(artifacts / "mobilenet_v1" / "golden.npz")
    model = load_model("mobilenet", find_artifact(artifacts / "mobilenet_v1"), workers=2)
    with BackgroundServer(InferenceApp([model])) as server:
        yield server, model, golden


def test_tritonclient_mobilenet_matches_golden(mobilenet):
    httpclient = pytest.importorskip("tritonclient.http")
    server, _, golden = mobilenet
    client = httpclient.InferenceServerClient(server.url.removeprefix("http://"))
    assert client.is_server_live()
    assert client.is_server_ready()
    assert client.is_model_ready("mobilenet")
    meta = client.get_model_metadata("mobilenet")
    assert meta["inputs"] == [{"name": "data", "datatype": "FP32", "shape": [1, 3, 224, 224]}]
    # the one output name of every verb (TVM's key fused_nn_softmax:0 with '_')
    assert meta["outputs"] == [
        {"name": "fused_nn_softmax_0", "datatype": "FP32", "shape": [1, 1000]}
    ]
    # the binary-tensor extension both ways; the node name served before still answers
    for binary, name in ((True, "fused_nn_softmax_0"), (False, "fused_nn_softmax")):
        inp = httpclient.InferInput("data", [1, 3, 224, 224], "FP32")
        inp.set_data_from_numpy(golden["data"], binary_data=binary)
        out = httpclient.InferRequestedOutput(name, binary_data=binary)
        result = client.infer("mobilenet", [inp], outputs=[out], request_id=f"r{binary}")
        np.testing.assert_allclose(result.as_numpy(name), golden["output_0"], **ATOL)
        assert result.get_response()["id"] == f"r{binary}"
    stats = client.get_inference_statistics("mobilenet")["model_stats"][0]
    assert stats["name"] == "mobilenet"
    assert stats["inference_count"] >= 2


def test_mobilenet_workers_share_one_copy_of_weights(mobilenet, artifacts):
    _, model, golden = mobilenet
    first, second = model.executors
    summary = json.loads(
        (artifacts / "mobilenet_v1" / "deploy_param.params.summary.json").read_text()
    )
    assert len(summary) > 80
    for name in summary:
        assert first.get_input(name).data_ptr == second.get_input(name).data_ptr, name
    assert first.get_input("data").data_ptr != second.get_input("data").data_ptr
    # both executors answer correctly when run at the same time
    results = [model.submit({"data": golden["data"]}) for _ in range(4)]
    for fut in results:
        np.testing.assert_allclose(fut.result(60)[0], golden["output_0"], **ATOL)


def test_curl_json_and_binary_tensors(add1_server):
    x = [1.5, -2.0, 3.25, 0.0]
    body = {"id": "q1", "inputs": [{"name": "x", "shape": [4], "datatype": "FP32", "data": x}]}
    code, text = curl(
        "-X", "POST", f"{add1_server.url}/v2/models/add1/infer", "-d", json.dumps(body)
    )
    assert code == 200
    doc = json.loads(text)
    assert doc["id"] == "q1"
    assert doc["model_name"] == "add1"
    assert doc["outputs"][0]["data"] == [v + 1 for v in x]
    # binary extension: JSON header then raw little-endian bytes, both ways
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "x",
                    "shape": [4],
                    "datatype": "FP32",
                    "parameters": {"binary_data_size": 16},
                }
            ],
            "parameters": {"binary_data_output": True},
        }
    ).encode()
    raw = np.array(x, "<f4").tobytes()
    status, headers, data = request(
        add1_server.url,
        "POST",
        "/v2/models/add1/infer",
        header + raw,
        {"Inference-Header-Content-Length": str(len(header))},
    )
    assert status == 200
    n = int(headers["inference-header-content-length"])
    meta = json.loads(data[:n])
    assert meta["outputs"][0]["parameters"] == {"binary_data_size": 16}
    np.testing.assert_array_equal(np.frombuffer(data[n:], "<f4"), np.array(x, "f4") + 1)


def test_metadata_health_and_metrics_routes(add1_server):
    url = add1_server.url
    code, text = curl(f"{url}/v2")
    assert code == 200
    assert json.loads(text)["name"] == "tvmrt"
    assert curl(f"{url}/v2/health/live")[0] == 200
    assert curl(f"{url}/v2/health/ready")[0] == 200
    assert curl(f"{url}/v2/models/add1/ready")[0] == 200
    assert curl(f"{url}/v2/models/add1/versions/1")[0] == 200
    code, text = curl(f"{url}/v2/models/nope")
    assert code == 404
    assert "unknown model 'nope'" in text
    assert "add1" in text
    good = {"inputs": [{"name": "x", "shape": [4], "datatype": "FP32", "data": [0, 0, 0, 0]}]}
    for _ in range(3):
        assert curl("-X", "POST", f"{url}/v2/models/add1/infer", "-d", json.dumps(good))[0] == 200
    assert curl("-X", "POST", f"{url}/v2/models/add1/infer", "-d", "{")[0] == 400
    code, text = curl(f"{url}/metrics")
    assert code == 200
    assert 'tvmrt_requests_total{model="add1",code="200"} 3' in text
    assert 'tvmrt_requests_total{model="add1",code="400"} 1' in text
    assert 'tvmrt_request_duration_seconds_count{model="add1"} 4' in text
    assert 'tvmrt_executions_total{model="add1"} 3' in text
    assert 'tvmrt_queue_depth{model="add1"} 0' in text
    busy = [ln for ln in text.splitlines() if ln.startswith("tvmrt_executor_busy_seconds_total")]
    assert len(busy) == 1
    assert float(busy[0].split()[-1]) > 0
    stats = json.loads(curl(f"{url}/v2/models/add1/stats")[1])["model_stats"][0]
    assert stats["inference_stats"]["success"]["count"] == 3
    assert stats["inference_stats"]["fail"]["count"] == 1
    assert stats["execution_count"] == 3


def _infer_body(**over: object) -> dict[str, object]:
    item: dict[str, object] = {"name": "x", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]}
    item.update(over)
    return {"inputs": [item]}


BAD_REQUESTS = [
    (_infer_body(name="y"), 400, "unknown input 'y'; the model's inputs are ['x']"),
    (_infer_body(shape=[2, 2]), 400, "input 'x' has shape [2, 2], expected [4]"),
    (_infer_body(datatype="INT32"), 400, "input 'x' has datatype 'INT32', expected 'FP32'"),
    (_infer_body(data=[1, 2, 3]), 400, "input 'x': 3 values, expected 4 for [4]"),
    (_infer_body(data=["a", "b", "c", "d"]), 400, "input 'x': \"data\" must hold FP32 numbers"),
    ({"inputs": []}, 400, "missing input(s) ['x']; the model's inputs are ['x']"),
    (_infer_body(shape=[True, 4]), 400, "input 'x': shape must be a list of sizes, got [True, 4]"),
    (
        _infer_body(parameters={"binary_data_size": True}),
        400,
        "input 'x': binary_data_size must be a byte count, got True",
    ),
    ({"inputs": [_infer_body()["inputs"][0]] * 2}, 400, "input 'x' is given twice"),
    ({"input": []}, 400, 'request JSON must be an object with an "inputs" list'),
    (
        {**_infer_body(), "outputs": [{"name": "zz"}]},
        400,
        "unknown output 'zz'; the model's outputs are ['add_0']",
    ),
    (
        _infer_body(data=[1, [2, 3], 4, 5]),
        400,
        "input 'x': \"data\" is not a regular (non-ragged) list",
    ),
    (_infer_body(data=list(range(2000))), 413, "exceeds the limit of 4096 bytes"),
]


@pytest.mark.parametrize(("body", "status", "message"), BAD_REQUESTS)
def test_bad_requests_get_4xx_naming_the_tensor(add1_server, body, status, message):
    got, _, data = request(
        add1_server.url, "POST", "/v2/models/add1/infer", json.dumps(body).encode()
    )
    assert got == status
    assert message in json.loads(data)["error"]
    # the server stays up and answers the next good request
    good, _, data = request(
        add1_server.url, "POST", "/v2/models/add1/infer", json.dumps(_infer_body()).encode()
    )
    assert good == 200
    assert json.loads(data)["outputs"][0]["data"] == [2, 3, 4, 5]


@pytest.mark.parametrize(
    ("body", "headers", "message"),
    [
        (b"not json", {}, "request body is not valid JSON"),
        (b"[" * 2000 + b"]" * 2000, {}, "request body is not valid JSON"),  # too deep to parse
        (b'{"inputs": []}', {"Inference-Header-Content-Length": "99"}, "but the body has only 14"),
        (
            json.dumps(
                {
                    "inputs": [
                        {
                            "name": "x",
                            "shape": [4],
                            "datatype": "FP32",
                            "parameters": {"binary_data_size": 8},
                        }
                    ]
                }
            ).encode()
            + b"\0" * 8,
            {"Inference-Header-Content-Length": "94"},
            "input 'x': 8 binary bytes, expected 16 (FP32 x [4])",
        ),
    ],
)
def test_malformed_bodies_get_400(add1_server, body, headers, message):
    if "94" in headers.values():  # the real header length of the JSON part
        headers = {"Inference-Header-Content-Length": str(len(body) - 8)}
    status, _, data = request(add1_server.url, "POST", "/v2/models/add1/infer", body, headers)
    assert status == 400
    assert message in json.loads(data)["error"]


def test_wrong_method_and_unknown_route(add1_server):
    assert request(add1_server.url, "GET", "/v2/models/add1/infer")[0] == 405
    assert request(add1_server.url, "GET", "/nowhere")[0] == 404
    assert request(add1_server.url, "GET", "/v2/models/add1/versions/7")[0] == 404


def test_graceful_shutdown_finishes_in_flight_requests():
    model = sleepy_model(workers=1)
    server = BackgroundServer(InferenceApp([model])).start()
    answers: list[tuple[int, bytes]] = []
    body = json.dumps(
        {"inputs": [{"name": "x", "shape": [2], "datatype": "FP32", "data": [0.8, 1]}]}
    ).encode()

    def client() -> None:
        status, _, data = request(server.url, "POST", "/v2/models/sleepy/infer", body)
        answers.append((status, data))

    thread = threading.Thread(target=client)
    thread.start()
    deadline = time.monotonic() + 10
    while model.pending == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert model.pending == 1
    server.stop()  # returns only after the in-flight request was answered
    thread.join(10)
    assert answers
    assert answers[0][0] == 200
    assert json.loads(answers[0][1])["outputs"][0]["data"] == pytest.approx([1.6, 2.0])
    with pytest.raises(ConnectionRefusedError):
        request(server.url, "GET", "/v2/health/live")


def test_cli_serve_answers_and_stops_on_sigterm(artifacts, tmp_path):
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tvmrt",
            "serve",
            str(artifacts / "mobilenet_v1"),
            "--name",
            "mb",
            "--port",
            str(port),
            "--workers",
            "2",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if request(url, "GET", "/v2/health/ready")[0] == 200:
                    break
            except OSError:
                pass
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "tvmrt serve did not become ready in 60 s"
            time.sleep(0.1)
        golden = np.load(artifacts / "mobilenet_v1" / "golden.npz")
        np.save(tmp_path / "x.npy", golden["data"])
        header = json.dumps(
            {
                "inputs": [
                    {
                        "name": "data",
                        "shape": [1, 3, 224, 224],
                        "datatype": "FP32",
                        "parameters": {"binary_data_size": golden["data"].nbytes},
                    }
                ],
                "outputs": [{"name": "fused_nn_softmax", "parameters": {"binary_data": True}}],
            }
        ).encode()
        (tmp_path / "body").write_bytes(header + golden["data"].astype("<f4").tobytes())
        out = subprocess.run(
            [
                "curl",
                "-s",
                "-m",
                "30",
                "-D",
                str(tmp_path / "h"),
                "-X",
                "POST",
                "-H",
                f"Inference-Header-Content-Length: {len(header)}",
                "--data-binary",
                f"@{tmp_path / 'body'}",
                f"{url}/v2/models/mb/infer",
            ],
            capture_output=True,
            timeout=60,
            check=True,
        ).stdout
        resp_headers = (tmp_path / "h").read_text().lower()
        n = int(resp_headers.split("inference-header-content-length:")[1].split()[0])
        np.testing.assert_allclose(
            np.frombuffer(out[n:], "<f4").reshape(1, 1000), golden["output_0"], **ATOL
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    logs = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert any(d["msg"] == "serving" and d["models"] == ["mb"] for d in logs)
    assert any(d["msg"] == "stopped" and d["signal"] == signal.SIGTERM for d in logs)
    assert any(
        d["msg"] == "request" and d["status"] == 200 and d["path"] == "/v2/models/mb/infer"
        for d in logs
    )


def test_tvmrt_imports_without_the_serve_extra():
    code = (
        "import sys; sys.modules['uvicorn'] = None; sys.modules['ray'] = None\n"
        "import tvmrt, tvmrt.serve, tvmrt.serve.ray\n"
        "from tvmrt.cli import main\n"
        "sys.exit(main(['serve', 'x']))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert "tvmrt serve needs the serve extra: pip install 'tvmrt[serve]'" in proc.stderr


def test_kserve_manifest_runs_the_same_entry_point():
    yaml = pytest.importorskip("yaml")
    from tvmrt.cli import build_parser

    docs = list(yaml.safe_load_all((REPO / "examples/serving/kserve.yaml").read_text()))
    runtime = next(d for d in docs if d["kind"] == "ServingRuntime")
    service = next(d for d in docs if d["kind"] == "InferenceService")
    assert runtime["spec"]["protocolVersions"] == ["v2"]
    assert service["spec"]["predictor"]["model"]["runtime"] == runtime["metadata"]["name"]
    container = runtime["spec"]["containers"][0]
    assert container["command"] == ["tvmrt", "serve"]
    args = [a.replace("{{.Name}}", service["metadata"]["name"]) for a in container["args"]]
    parsed = build_parser().parse_args(["serve", *args])
    assert parsed.handler.__module__ == "tvmrt.cli.serve"
    assert (parsed.artifact, parsed.name, parsed.port) == (["/mnt/models"], ["mobilenet"], 8080)
    assert container["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    dockerfile = (REPO / "examples/serving/Dockerfile").read_text()
    assert 'ENTRYPOINT ["tvmrt", "serve"]' in dockerfile


def test_factory_library_served_by_two_executors_sharing_params(artifacts):
    golden = np.load(artifacts / "iris-factory" / "golden.npz")
    model = load_model("iris", find_artifact(artifacts / "iris-factory" / "deploy_lib.tar"), 2)
    first, second = model.executors
    data_index = first.get_input_index("float_input")
    params = [i for i in range(first.get_num_inputs()) if i != data_index]
    assert len(params) == 4
    for i in params:  # the factory's weights, held once
        assert first.get_input(i).data_ptr == second.get_input(i).data_ptr
    assert first.get_input(data_index).data_ptr != second.get_input(data_index).data_ptr
    assert [s.metadata() for s in model.inputs] == [
        {"name": "float_input", "datatype": "FP32", "shape": [1, 4]}
    ]
    with BackgroundServer(InferenceApp([model])) as server:
        for sample, expected in zip(golden["float_input"], golden["output_0"], strict=True):
            doc = {
                "inputs": [
                    {
                        "name": "float_input",
                        "shape": [1, 4],
                        "datatype": "FP32",
                        "data": sample.tolist(),
                    }
                ]
            }
            status, _, body = request(
                server.url, "POST", "/v2/models/iris/infer", json.dumps(doc).encode()
            )
            assert status == 200
            out = json.loads(body)["outputs"][0]
            np.testing.assert_allclose(np.array(out["data"], "f4"), expected, **ATOL)
