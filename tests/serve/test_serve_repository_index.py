"""Triton's model repository index (``POST /v2/repository/index``): tritonclient's
``get_model_repository_index`` lists the served models (it was a 404)."""

from __future__ import annotations

import pytest

from support.paths import REPO
from support.serve import post_json
from tvmrt.artifact import find_artifact
from tvmrt.serve import BackgroundServer, InferenceApp, load_model

pytest.importorskip("uvicorn")

MODEL = REPO / "examples" / "digits" / "model"


def test_the_repository_index_lists_every_served_model(request: pytest.FixtureRequest) -> None:
    httpclient = pytest.importorskip("tritonclient.http")
    models = [load_model(name, find_artifact(MODEL)) for name in ("digits", "another")]
    with BackgroundServer(InferenceApp(models)) as server:
        client = httpclient.InferenceServerClient(server.url.removeprefix("http://"))
        request.addfinalizer(client.close)
        assert client.get_model_repository_index() == [
            {"name": "another", "version": "1", "state": "READY"},
            {"name": "digits", "version": "1", "state": "READY"},
        ]
        status, _, answer = post_json(server.url, "/v2/repository/index", {"ready": True})
        assert status == 200
        assert [m["name"] for m in answer] == ["another", "digits"]  # type: ignore[index]
    for model in models:
        model.close()
