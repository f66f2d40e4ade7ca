"""A Relay VM request's memory counts against ``--max-inflight-mb`` (issue 31, item 12).

``control-flow``'s loop count comes with the request: 2,000 iterations over a 256 KiB
tensor would hold about 1 GB. Under a 64 MiB budget the request is answered 400, the
server holds what it held, and the next honest request is answered.
"""

from __future__ import annotations

import http.client
import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from tvmrt.artifact import find_artifact
from tvmrt.serve import BackgroundServer, InferenceApp, load_model
from tvmrt.serve.limits import ServeLimits
from tvmrt.serve.protocol import BadRequestError, TensorSpec

pytest.importorskip("uvicorn")

MIB = 1 << 20


def _doc(x: np.ndarray, n: int) -> bytes:
    return json.dumps(
        {
            "inputs": [
                {"name": "x", "shape": list(x.shape), "datatype": "FP32", "data": x.tolist()},
                {"name": "n", "shape": [], "datatype": "INT32", "data": [n]},
            ]
        }
    ).encode()


def test_a_looping_vm_request_is_refused_within_the_inflight_budget(artifacts: Path) -> None:
    signature = [TensorSpec("x", (-1,), "FP32"), TensorSpec("n", (), "INT32")]
    folder = find_artifact(artifacts / "relayvm" / "control-flow")
    model = load_model("cf", folder, workers=2, signature=signature)
    limits = ServeLimits(max_body_bytes=16 * MIB, max_inflight_body_bytes=64 * MIB)
    app = InferenceApp([model], limits=limits)
    x = np.ones(65536, "float32")
    tracemalloc.start()
    try:
        with pytest.raises(BadRequestError, match="needs more memory than model 'cf'"):
            model.infer_sync({"x": x, "n": np.array(2000, "int32")})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 48 * MIB, f"one request held {peak / MIB:.0f} MiB (budget 32 MiB a worker)"
    with BackgroundServer(app) as server:
        conn = http.client.HTTPConnection(server.host, server.port, timeout=60)
        try:
            conn.request("POST", "/v2/models/cf/infer", body=_doc(x, 2000))
            resp = conn.getresponse()
            answer = json.loads(resp.read())
            assert resp.status == 400, answer
            assert "needs more memory" in answer["error"]
            conn.request("POST", "/v2/models/cf/infer", body=_doc(np.ones(5, "float32"), 2))
            resp = conn.getresponse()
            answer = json.loads(resp.read())
            assert resp.status == 200, answer
            assert answer["outputs"][0]["data"] == [2.0] * 5
        finally:
            conn.close()
    model.close()
