"""docs/serving.md's walkthrough: examples/serving/client.py against a real ``tvmrt serve``.

The served model is the committed example (``examples/digits/model``), so this runs in a
fresh clone; the client compares the served probabilities with a local run of the same
folder and the held-out digits' labels.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from support.paths import REPO
from support.serve import tvmrt_serve

MODEL = REPO / "examples" / "digits" / "model"


def test_example_client_against_tvmrt_serve():
    pytest.importorskip("tritonclient.http")
    pytest.importorskip("uvicorn")
    with tvmrt_serve(str(MODEL), "--name", "digits", "--workers", "2") as served:
        status, _, body = served.request("GET", "/v2/models/digits")
        assert status == 200
        meta = json.loads(body)
        # the one output name every verb uses (tvmrt inspect/run print the same)
        assert [o["name"] for o in meta["outputs"]] == ["probabilities_0"]
        # compiled for 360 digits, rows independent: batched by default, 1..360 per request
        assert meta["inputs"] == [{"name": "image", "datatype": "FP32", "shape": [-1, 64]}]
        env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
        done = subprocess.run(
            [
                sys.executable,
                str(REPO / "examples" / "serving" / "client.py"),
                str(MODEL),
                "digits",
                f"127.0.0.1:{served.port}",
            ],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    assert "probabilities_0: (360, 10), equal to a local run" in done.stdout
