"""The HTTP side of the Open Inference Protocol, as a plain ASGI application.

:meth:`InferenceApp.handle` maps ``(method, path, headers, body)`` to a :class:`Reply`; the
ASGI callable wraps it for uvicorn, and :mod:`tvmrt.serve.ray` calls the same method from
a Ray Serve replica, so every deployment answers identically. No web framework: routing
is nine fixed paths, and the ASGI layer is the only thing a framework would add.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tvmrt.error import InvalidArgumentError
from tvmrt.serve.metrics import render_prometheus
from tvmrt.serve.model import ServedModel
from tvmrt.serve.protocol import (
    BadRequestError,
    NotFoundError,
    ServeError,
    encode_infer_response,
    parse_infer_request,
)

__all__ = ["InferenceApp", "Reply", "JsonLogFormatter"]

log = logging.getLogger("tvmrt.serve")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_MODEL_PATH = re.compile(r"^/v2/models/([^/]+)(?:/versions/([^/]+))?(/ready|/infer|/stats)?$")


@dataclass
class Reply:
    """An HTTP answer: status, body and headers."""

    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=lambda: {"content-type": "application/json"})


def _json(status: int, doc: object) -> Reply:
    return Reply(status, json.dumps(doc, separators=(",", ":")).encode())


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line: time, level, message and the record's ``fields``."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": round(record.created, 6),
            "level": record.levelname.lower(),
            "msg": record.getMessage(),
        }
        doc.update(getattr(record, "fields", {}))
        if record.exc_info and record.exc_info[1] is not None:
            doc["error"] = repr(record.exc_info[1])
        return json.dumps(doc, separators=(",", ":"))


class InferenceApp:
    """The server's models and routes; an ASGI application.

    Parameters
    ----------
    models
        The served models, by their names.
    max_body_bytes
        Larger request bodies get 413 (checked on ``Content-Length`` and while reading).
    """

    def __init__(self, models: Sequence[ServedModel], max_body_bytes: int = 64 << 20) -> None:
        self.models = {m.name: m for m in models}
        if len(self.models) != len(models):
            raise InvalidArgumentError(
                "two served models have the same name; give each its own --name"
            )
        self.max_body_bytes = max_body_bytes
        self.ready = True
        self.worker_id = f"{os.getpid()}"

    # -- framework-free core -------------------------------------------------------------
    async def handle(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes
    ) -> Reply:
        """Answer one request; never raises."""
        start = time.perf_counter()
        model_name: str | None = None
        try:
            if len(body) > self.max_body_bytes:
                raise BadRequestError(
                    f"request body of {len(body)} bytes exceeds the limit of "
                    f"{self.max_body_bytes} bytes",
                    status=413,
                )
            match = _MODEL_PATH.match(path)
            if match is not None:
                model_name = match.group(1)
            reply = await self._route(method, path, match, headers, body)
        except ServeError as exc:
            reply = _json(exc.status, {"error": str(exc)})
            if exc.retry_after is not None:
                reply.headers["retry-after"] = str(max(1, round(exc.retry_after)))
        except Exception as exc:  # a kernel that raised: the server keeps serving
            log.error("request failed", exc_info=exc, extra={"fields": {"path": path}})
            reply = _json(500, {"error": f"{type(exc).__name__}: {exc}"})
        reply.headers["x-tvmrt-worker"] = self.worker_id
        elapsed = time.perf_counter() - start
        if match_infer(path) and model_name in self.models:
            self.models[model_name].metrics.observe_request(reply.status, elapsed)
        if log.isEnabledFor(logging.INFO) and path != "/metrics" and "/health/" not in path:
            log.info(
                "request",
                extra={
                    "fields": {
                        "method": method,
                        "path": path,
                        "status": reply.status,
                        "ms": round(elapsed * 1e3, 3),
                        "request_id": headers.get("x-request-id") or uuid.uuid4().hex[:12],
                    }
                },
            )
        return reply

    async def _route(
        self,
        method: str,
        path: str,
        match: re.Match[str] | None,
        headers: Mapping[str, str],
        body: bytes,
    ) -> Reply:
        if path in ("/v2/health/live", "/v2/health/ready"):
            ok = path.endswith("live") or self.ready
            return _json(200 if ok else 503, {"live" if path.endswith("live") else "ready": ok})
        if path == "/v2" and method == "GET":
            from tvmrt._version import __version__

            return _json(
                200,
                {
                    "name": "tvmrt",
                    "version": __version__,
                    "extensions": ["binary_tensor_data", "statistics"],
                },
            )
        if path == "/metrics" and method == "GET":
            text = render_prometheus(m.metrics for m in self.models.values())
            return Reply(200, text.encode(), {"content-type": "text/plain; version=0.0.4"})
        if path == "/v2/models/stats" and method == "GET":
            return _json(200, {"model_stats": [m.metrics.stats() for m in self.models.values()]})
        if match is None:
            raise NotFoundError(f"no route {method} {path}")
        name, version, action = match.groups()
        model = self.models.get(name)
        if model is None:
            raise NotFoundError(f"unknown model {name!r}; served models are {sorted(self.models)}")
        if version not in (None, "1"):
            raise NotFoundError(f"model {name!r} has no version {version!r}; it has version '1'")
        if action == "/infer":
            if method != "POST":
                raise BadRequestError(f"infer takes POST, got {method}", status=405)
            return await self._infer(model, headers, body)
        if method != "GET":
            raise BadRequestError(f"{path} takes GET, got {method}", status=405)
        if action == "/ready":
            return _json(200 if self.ready else 503, {"name": name, "ready": self.ready})
        if action == "/stats":
            return _json(200, {"model_stats": [model.metrics.stats()]})
        return _json(200, model.metadata())

    async def _infer(self, model: ServedModel, headers: Mapping[str, str], body: bytes) -> Reply:
        request = parse_infer_request(body, headers, model.inputs, [s.name for s in model.outputs])
        arrays = await model.infer(request.inputs)
        wanted = request.outputs
        pairs = [
            (spec, arr)
            for spec, arr in zip(model.outputs, arrays, strict=True)
            if wanted is None or spec.name in wanted
        ]
        data, extra = encode_infer_response(model.name, request, pairs)
        return Reply(200, data, extra)

    # -- ASGI ----------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        body = await self._read_body(headers, receive)
        if body is None:  # the client went away before sending its body: nobody to answer
            return
        if isinstance(body, Reply):
            reply = body
        else:
            reply = await self.handle(scope["method"], scope["path"], headers, body)
        await send(
            {
                "type": "http.response.start",
                "status": reply.status,
                "headers": [(k.encode(), v.encode()) for k, v in reply.headers.items()],
            }
        )
        await send({"type": "http.response.body", "body": reply.body})

    async def _read_body(
        self, headers: Mapping[str, str], receive: Receive
    ) -> bytes | Reply | None:
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            return _json(
                413,
                {
                    "error": f"request body of {declared} bytes exceeds the limit of "
                    f"{self.max_body_bytes} bytes"
                },
            )
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                return _json(
                    413, {"error": f"request body exceeds the limit of {self.max_body_bytes} bytes"}
                )
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self.ready = False
                for model in self.models.values():  # in-flight requests were answered
                    model.close(wait=True)
                await send({"type": "lifespan.shutdown.complete"})
                return


def match_infer(path: str) -> bool:
    """Whether ``path`` is an infer endpoint."""
    return path.endswith("/infer")
