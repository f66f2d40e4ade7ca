"""``tvmrt serve`` serves an MLF AOT package (issue 33 item 1): two workers share its
compiled library; every answer is bitwise TVM's host-driven AOT output."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from support.mlf_aot_cases import golden, package_path
from support.serve import tvmrt_serve

pytest.importorskip("uvicorn")


def test_serves_an_mlf_aot_folder_on_two_workers(mlf_root: Path, tmp_path: Path) -> None:
    inputs, want = golden(mlf_root, "int8_packed_linked")
    path = package_path(mlf_root, "int8_packed_linked", "folder")
    x = inputs["x"]
    doc = {
        "inputs": [
            {"name": "x", "shape": list(x.shape), "datatype": "INT8", "data": x.ravel().tolist()}
        ]
    }
    args = (str(path), "--name", "mlf", "--workers", "2")
    with tvmrt_serve(*args, env={"TVMRT_CACHE_DIR": str(tmp_path)}) as served:
        status, _, body = served.request("GET", "/v2/models/mlf")
        assert status == 200, body
        assert json.loads(body)["inputs"] == [{"name": "x", "datatype": "INT8", "shape": [1, 16]}]

        def infer(_: int) -> np.ndarray:
            code, _, out = served.request(
                "POST",
                "/v2/models/mlf/infer",
                json.dumps(doc).encode(),
                {"Content-Type": "application/json"},
            )
            assert code == 200, out
            (result,) = json.loads(out)["outputs"]
            return np.asarray(result["data"], dtype="int8").reshape(result["shape"])

        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(infer, range(8)))
    assert served.proc.returncode == 0, served.stderr
    for answer in answers:
        assert answer.tobytes() == want[0].tobytes()
        assert answer.shape == want[0].shape
