"""A serving process reuses freed request memory instead of faulting its pages in again.

glibc returns blocks of 128 KiB and more to the kernel when they are freed, so each
request with a large body (read 256 KiB at a time, then copied) touched fresh pages: ~350
per MobileNet v1 request. Here ``serve_forever`` serves ``x[:1000] + 1`` of a 600 KB input
``x`` (MobileNet's input and answer sizes) over a numpy kernel, in a child process. The
count comes from the server's own ``/proc/PID/stat``, so it does not depend on timing.
"""

from __future__ import annotations

import http.client
import json
import os
import sys

import numpy as np
import pytest

from support.paths import REPO
from support.serve import served_command
from tvmrt.serve.server import _MALLOC_ENV, free_port

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="page-fault counts come from /proc"
)
pytest.importorskip("uvicorn")

N = 150528  # 1 x 3 x 224 x 224: MobileNet v1's input, 602 KB of float32
OUT = 1000  # and its answer's size
REQUESTS = 20
SERVER = f"""
import sys
from tvmrt.serve import InferenceApp, model_from_graph, serve_forever
from tvmrt.testing import GraphBuilder, numpy_op_library

def head(a, out):  # a small answer, as a classifier's
    out.copyfrom(a.numpy()[:{OUT}] + 1)

b = GraphBuilder()
x = b.input("x", ({N},))
(y,) = b.op("head", "head", [x], [({OUT},)])
b.output(y)
model = model_from_graph("m", b.to_json(), numpy_op_library(head=head))
serve_forever(InferenceApp([model]), port=int(sys.argv[1]))
"""


def _minor_faults(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[7])  # minflt: the 10th field, the 8th after the command name


def _faults_per_request(env: dict[str, str]) -> float:
    data = np.random.default_rng(0).standard_normal(N).astype("<f4")
    item = {"name": "x", "shape": [N], "datatype": "FP32"}
    item["parameters"] = {"binary_data_size": data.nbytes}
    head = json.dumps({"inputs": [item], "parameters": {"binary_data_output": True}}).encode()
    headers = {"Inference-Header-Content-Length": str(len(head))}
    port = free_port()
    command = [sys.executable, "-c", SERVER, str(port)]
    keep = {k: v for k, v in os.environ.items() if k not in _MALLOC_ENV}
    with served_command(command, port, {**keep, "PYTHONPATH": str(REPO / "src"), **env}) as served:
        pid = served.proc.pid
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

        def infer() -> None:
            conn.request("POST", "/v2/models/m/infer", head + data.tobytes(), headers)
            resp = conn.getresponse()
            body = resp.read()
            assert resp.status == 200, body[:300]
            out = np.frombuffer(body[int(resp.headers["inference-header-content-length"]) :], "<f4")
            assert np.array_equal(out, data[:OUT] + 1)

        try:
            for _ in range(3):  # the first requests grow the heap
                infer()
            before = _minor_faults(pid)
            for _ in range(REQUESTS):
                infer()
            return (_minor_faults(pid) - before) / REQUESTS
        finally:
            conn.close()


def test_request_memory_is_reused_not_faulted_in_again() -> None:
    kept = _faults_per_request({})
    # a 600 KB body is 147 pages, and each request copies it several times
    assert kept < 40, f"{kept:.0f} page faults per request"


def test_the_users_malloc_settings_are_left_alone() -> None:
    # glibc's own default trim threshold, set by the user: the server must not override it
    faulted = _faults_per_request({"MALLOC_TRIM_THRESHOLD_": "131072"})
    assert faulted > 100, f"only {faulted:.0f} page faults per request: the setting was overridden"
