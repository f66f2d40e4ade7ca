"""tvmrt.serve.ray: two Ray Serve replicas on a local multi-process Ray cluster (loopback)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from support.paths import REPO
from tvmrt.serve.server import free_port


@pytest.mark.slow
def test_ray_serve_two_replicas_answer_like_golden(artifacts):
    ray = pytest.importorskip("ray")
    serve = pytest.importorskip("ray.serve")
    httpclient = pytest.importorskip("tritonclient.http")
    from tvmrt.serve.ray import deployment

    golden = np.load(artifacts / "mobilenet_v1" / "golden.npz")
    port = free_port()
    # a local cluster: GCS, raylet and worker processes, all on 127.0.0.1
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(REPO / "src")}},
    )
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        app = deployment(num_replicas=2, num_cpus=0.5).bind(
            {"mobilenet": str(artifacts / "mobilenet_v1")}
        )
        serve.run(app, name="tvmrt", route_prefix="/")
        client = httpclient.InferenceServerClient(f"127.0.0.1:{port}", concurrency=4)
        assert client.is_model_ready("mobilenet")
        assert client.get_model_metadata("mobilenet")["inputs"][0]["shape"] == [1, 3, 224, 224]

        inp = httpclient.InferInput("data", [1, 3, 224, 224], "FP32")
        inp.set_data_from_numpy(golden["data"])
        pending = [client.async_infer("mobilenet", [inp]) for _ in range(16)]  # 4 at a time
        outputs = [p.get_result().as_numpy("fused_nn_softmax_0") for p in pending]
        for out in outputs:
            np.testing.assert_allclose(out, golden["output_0"], rtol=1e-6, atol=1e-7)
        # both replicas (separate worker processes) served, and between them ran each
        # request exactly once
        counts: dict[str, int] = {}
        for _ in range(60):
            status, headers, body = _get(port, "/v2/models/mobilenet/stats")
            assert status == 200
            counts[headers["x-tvmrt-worker"]] = body["model_stats"][0]["inference_count"]
            if len(counts) == 2:
                break
        assert len(counts) == 2
        assert str(os.getpid()) not in counts
        assert sum(counts.values()) == 16
    finally:
        serve.shutdown()
        ray.shutdown()


def _get(port, path):
    import http.client
    import json

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, json.loads(resp.read())
    finally:
        conn.close()


def test_app_builder_parses_serve_run_arguments(artifacts):
    pytest.importorskip("ray.serve")
    from tvmrt.serve.ray import app_builder

    path = str(artifacts / "mobilenet_v1")
    app = app_builder({"models": f"mobilenet={path}", "replicas": "2", "workers": "2"})
    assert type(app).__name__ == "Application"
    with pytest.raises(ValueError, match=r"models entry 'mobilenet' is not NAME=PATH"):
        app_builder({"models": "mobilenet"})
    with pytest.raises(ValueError, match=r"app_builder needs models=NAME=PATH\[,NAME=PATH\.\.\.\]"):
        app_builder({})
