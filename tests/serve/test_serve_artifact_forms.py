"""``tvmrt serve`` in its own process serves every form ``tvmrt run`` runs: an AOT build with
1 and 2 workers, and a CPU+OpenCL graph with ``--device opencl`` and 2 workers; the
answers equal TVM's (relay016/README.md: CPU bitwise, OpenCL within 1e-5).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from support.opencl import opencl_unusable
from support.serve import Served, tvmrt_serve

pytest.importorskip("uvicorn")


def _request(served: Served, method: str, path: str, body: bytes | None = None):
    status, _, out = served.request(method, path, body, {"Content-Type": "application/json"})
    return status, out


@contextmanager
def serving(*args: str, cache: Path) -> Iterator[Served]:
    """``tvmrt serve ARGS`` (support.serve) with its own cache folder; it must exit 0."""
    with tvmrt_serve(*args, env={"TVMRT_CACHE_DIR": str(cache)}) as served:
        yield served
    assert served.proc.returncode == 0, served.stderr


def _infer(served: Served, model: str, data: np.ndarray) -> np.ndarray:
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
    status, body = _request(served, "POST", f"/v2/models/{model}/infer", json.dumps(doc).encode())
    assert status == 200, body
    (out,) = json.loads(body)["outputs"]
    return np.asarray(out["data"], dtype="float32").reshape(out["shape"])


def _golden(folder: Path) -> dict[str, np.ndarray]:
    with np.load(folder / "golden.npz") as data:
        return {k: data[k] for k in data.files}


def _answers(served: Served, model: str, data: np.ndarray, count: int) -> list[np.ndarray]:
    """``count`` requests at once, so that every worker runs some."""
    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(lambda _: _infer(served, model, data), range(count)))


@pytest.mark.parametrize("workers", [1, 2])
def test_serves_an_aot_build(artifacts, tmp_path, workers):
    folder = artifacts / "relay016" / "aot-so"
    golden = _golden(folder)
    args = (str(folder / "deploy.so"), "--name", "aot", "--workers", str(workers))
    with serving(*args, cache=tmp_path) as served:
        status, body = _request(served, "GET", "/v2/models/aot")
        assert status == 200
        meta = json.loads(body)
        assert meta["inputs"] == [{"name": "data", "datatype": "FP32", "shape": [1, 3, 16, 16]}]
        assert [o["shape"] for o in meta["outputs"]] == [[1, 10]]
        for out in _answers(served, "aot", golden["data"], 4):
            np.testing.assert_allclose(out, golden["output_0"], rtol=1e-6, atol=1e-7)


def test_serves_a_cpu_and_opencl_graph_on_two_workers(artifacts, tmp_path):
    if opencl_unusable():
        pytest.skip(str(opencl_unusable()))
    folder = artifacts / "relay016" / "hetero-opencl-cpu"
    golden = _golden(folder)
    args = (str(folder), "--name", "hetero", "--device", "opencl", "--workers", "2")
    with serving(*args, cache=tmp_path) as served:
        for out in _answers(served, "hetero", golden["data"], 4):
            np.testing.assert_allclose(out, golden["output_0"], rtol=1e-5, atol=1e-5)
