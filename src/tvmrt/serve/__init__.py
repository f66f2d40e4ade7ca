"""Serve artifacts over the Open Inference Protocol (KServe v2): ``tvmrt serve``.

The protocol, models and metrics need only numpy; running the HTTP server needs uvicorn
and the Ray Serve deployment needs ray (``pip install 'tvmrt[serve]'``). Both are imported
only when used.
"""

from __future__ import annotations

from tvmrt.serve.app import InferenceApp, Reply
from tvmrt.serve.model import ServedModel, load_model, model_from_graph
from tvmrt.serve.protocol import (
    BadRequestError,
    DeadlineError,
    NotFoundError,
    OverloadedError,
    ServeError,
    TensorSpec,
)
from tvmrt.serve.server import BackgroundServer, serve_forever

__all__ = [
    "InferenceApp",
    "Reply",
    "ServedModel",
    "load_model",
    "model_from_graph",
    "TensorSpec",
    "ServeError",
    "BadRequestError",
    "NotFoundError",
    "OverloadedError",
    "DeadlineError",
    "BackgroundServer",
    "serve_forever",
]
