"""``tvmrt serve`` in its own process serves every form ``tvmrt run`` runs: an AOT build with
1 and 2 workers, and a CPU+OpenCL graph with ``--device opencl`` and 2 workers; the
answers equal TVM's (relay016/README.md: CPU bitwise, OpenCL within 1e-5).
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from support.paths import REPO
from tvmrt.serve.server import free_port

pytest.importorskip("uvicorn")

READY_SECONDS = 60


def _request(port: int, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


@contextmanager
def serving(*args: str, cache: Path) -> Iterator[int]:
    """``tvmrt serve ARGS`` on 127.0.0.1; yields its port once ready, then stops it."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "TVMRT_CACHE_DIR": str(cache)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tvmrt", "serve", *args, "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + READY_SECONDS
        while True:
            try:
                if _request(port, "GET", "/v2/health/ready")[0] == 200:
                    break
            except OSError:
                pass
            if proc.poll() is not None:
                pytest.fail(f"tvmrt serve exited with {proc.returncode}: {proc.stderr.read()}")  # type: ignore[union-attr]
            assert time.monotonic() < deadline, f"tvmrt serve not ready in {READY_SECONDS} s"
            time.sleep(0.1)
        yield port
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    assert proc.returncode == 0, err


def _infer(port: int, model: str, data: np.ndarray) -> np.ndarray:
    doc = {
        "inputs": [
            {
                "name": "data",
                "shape": list(data.shape),
                "datatype": "FP32",
                "data": data.reshape(-1).tolist(),
            }
        ]
    }
    status, body = _request(port, "POST", f"/v2/models/{model}/infer", json.dumps(doc).encode())
    assert status == 200, body
    (out,) = json.loads(body)["outputs"]
    return np.asarray(out["data"], dtype="float32").reshape(out["shape"])


def _golden(folder: Path) -> dict[str, np.ndarray]:
    with np.load(folder / "golden.npz") as data:
        return {k: data[k] for k in data.files}


def _answers(port: int, model: str, data: np.ndarray, count: int) -> list[np.ndarray]:
    """``count`` requests at once, so that every worker runs some."""
    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(lambda _: _infer(port, model, data), range(count)))


@pytest.mark.parametrize("workers", [1, 2])
def test_serves_an_aot_build(artifacts, tmp_path, workers):
    folder = artifacts / "relay016" / "aot-so"
    golden = _golden(folder)
    args = (str(folder / "deploy.so"), "--name", "aot", "--workers", str(workers))
    with serving(*args, cache=tmp_path) as port:
        status, body = _request(port, "GET", "/v2/models/aot")
        assert status == 200
        meta = json.loads(body)
        assert meta["inputs"] == [{"name": "data", "datatype": "FP32", "shape": [1, 3, 16, 16]}]
        assert [o["shape"] for o in meta["outputs"]] == [[1, 10]]
        for out in _answers(port, "aot", golden["data"], 4):
            np.testing.assert_allclose(out, golden["output_0"], rtol=1e-6, atol=1e-7)


def test_serves_a_cpu_and_opencl_graph_on_two_workers(artifacts, tmp_path):
    pytest.importorskip("pyopencl")
    from tvmrt import runtime

    if not runtime.opencl(0).exist:
        pytest.skip("no OpenCL device (install pocl-binary-distribution)")
    folder = artifacts / "relay016" / "hetero-opencl-cpu"
    golden = _golden(folder)
    args = (str(folder), "--name", "hetero", "--device", "opencl", "--workers", "2")
    with serving(*args, cache=tmp_path) as port:
        for out in _answers(port, "hetero", golden["data"], 4):
            np.testing.assert_allclose(out, golden["output_0"], rtol=1e-5, atol=1e-5)
