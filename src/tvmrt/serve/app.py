"""The HTTP side of the Open Inference Protocol, as a plain ASGI application.

:meth:`InferenceApp.handle` maps ``(method, path, headers, body)`` to a :class:`Reply`; the
ASGI callable wraps it for uvicorn, and :mod:`tvmrt.serve.ray` calls the same method from
a Ray Serve replica, so every deployment answers identically. No web framework: routing
is nine fixed paths, and the ASGI layer is the only thing a framework would add.

The ASGI layer enforces the body limits of :class:`tvmrt.serve.limits.ServeLimits`: a
body is read with a byte cap and a deadline (413, 408), within a budget of bytes held by
all requests at once (503), and requests with large JSON are parsed and answered in worker
threads, so the event loop keeps answering health probes. Every answer has a
``Content-Length`` (no chunked encoding, which HTTP/1.0 clients cannot read).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from typing import Any, TypeVar

from tvmrt.error import InvalidArgumentError
from tvmrt.serve.body import Reply, read_body, refuse, request_headers
from tvmrt.serve.infer import output_pairs, parse_request
from tvmrt.serve.jsondata import short
from tvmrt.serve.limits import BodyBudget, ServeLimits
from tvmrt.serve.metrics import JsonLogFormatter, render_prometheus
from tvmrt.serve.model import ServedModel
from tvmrt.serve.protocol import (
    BadRequestError,
    NotFoundError,
    ServeError,
    encode_infer_response,
)

__all__ = ["InferenceApp", "Reply", "JsonLogFormatter"]

log = logging.getLogger("tvmrt.serve")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
T = TypeVar("T")

_MODEL_PATH = re.compile(
    r"^/v2/models/([^/]+)(?:/versions/([^/]+))?(/ready|/infer|/stats|/config)?$"
)
_INLINE_BYTES = 64 << 10  # JSON this small is parsed on the loop: a thread hop costs more
_INLINE_VALUES = 16 << 10  # outputs with fewer elements are encoded on the loop
_MAX_ERROR = 1000  # characters of an error message; longer ones are cut


def _json(status: int, doc: object) -> Reply:
    return Reply(status, json.dumps(doc, separators=(",", ":")).encode())


class InferenceApp:
    """The server's models and routes; an ASGI application.

    Parameters
    ----------
    models
        The served models, by their names.
    max_body_bytes
        Shorthand for ``limits.max_body_bytes`` (the JSON cap and the in-flight budget
        follow it where they would otherwise be out of order).
    limits
        Body, parse and shutdown bounds (:class:`tvmrt.serve.limits.ServeLimits`).
    """

    def __init__(
        self,
        models: Sequence[ServedModel],
        max_body_bytes: int | None = None,
        limits: ServeLimits | None = None,
    ) -> None:
        self.models = {m.name: m for m in models}
        if len(self.models) != len(models):
            names = [m.name for m in models]
            twice = sorted({n for n in names if names.count(n) > 1})
            raise InvalidArgumentError(
                f"two served models have the same name {twice[0]!r}; give each its own --name"
            )
        limits = limits or ServeLimits()
        if max_body_bytes is not None:
            limits = replace(
                limits,
                max_body_bytes=max_body_bytes,
                max_json_bytes=min(limits.max_json_bytes, max_body_bytes),
                max_inflight_body_bytes=max(limits.max_inflight_body_bytes, max_body_bytes),
            )
        self.limits = limits
        self.budget = BodyBudget(limits.max_inflight_body_bytes)
        for model in models:  # a Relay VM request's memory: --max-inflight-mb over the workers
            model.set_memory_budget(limits.max_inflight_body_bytes)
        self.ready = True
        self.worker_id = f"{os.getpid()}"
        self._pool: ThreadPoolExecutor | None = None
        self._signals: tuple[asyncio.AbstractEventLoop, asyncio.Future[None], asyncio.Future[None]]
        self._signals = None  # type: ignore[assignment]
        self._drain_deadline: float | None = None

    @property
    def max_body_bytes(self) -> int:
        """The largest request body (``limits.max_body_bytes``)."""
        return self.limits.max_body_bytes

    # -- shutdown ------------------------------------------------------------------------
    def _stop_signals(self) -> tuple[asyncio.Future[None], asyncio.Future[None]]:
        """(stopping, abort) for the running loop: done once the drain starts / ends."""
        loop = asyncio.get_running_loop()
        if self._signals is None or self._signals[0] is not loop:
            self._signals = (loop, loop.create_future(), loop.create_future())
        return self._signals[1], self._signals[2]

    def begin_drain(self) -> None:
        """Start the graceful shutdown (on the event loop; :mod:`tvmrt.serve.server` calls it).

        New requests and bodies still being read get 503; queued and running requests go
        on until ``graceful_timeout - drain_margin`` seconds from now, when those still
        waiting are answered 503 and the queued ones dropped unrun.
        """
        stopping, _ = self._stop_signals()
        if stopping.done():
            return
        stopping.set_result(None)
        self.ready = False
        for model in self.models.values():
            model.stop_admitting()
        loop = asyncio.get_running_loop()
        self._drain_deadline = loop.time() + self.limits.graceful_timeout
        delay = max(0.0, self.limits.graceful_timeout - self.limits.drain_margin)
        loop.call_later(delay, self._abort_waiting)

    def _abort_waiting(self) -> None:
        _, abort = self._stop_signals()
        if not abort.done():
            abort.set_result(None)
        for model in self.models.values():
            model.cancel_queued()

    async def _offload(self, small: bool, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the loop when ``small``, else in a parse worker thread."""
        if small:
            return fn(*args)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.limits.parse_workers, "tvmrt-parse")
        return await asyncio.get_running_loop().run_in_executor(self._pool, partial(fn, *args))

    # -- framework-free core -------------------------------------------------------------
    async def handle(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes | bytearray
    ) -> Reply:
        """Answer one request; never raises (error messages are cut to 1,000 characters)."""
        start = time.perf_counter()
        match = _MODEL_PATH.match(path)
        try:
            self._check_size(body)
            reply = await self._route(method, path, match, headers, body)
        except Exception as exc:
            reply = self._error_reply(exc, path)
        return self._finish(reply, method, path, match, headers, start)

    def answer_now(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes | bytearray
    ) -> Reply | None:
        """:meth:`handle`'s answer without awaiting anything, for an infer request that is
        parsed, run and answered on the event loop (small JSON; a model whose runs are
        done inline and that has nothing pending); None for any other request, which
        takes :meth:`handle`. The HTTP protocol calls it once a whole body is in."""
        match = _MODEL_PATH.match(path)
        if method != "POST" or match is None or match.group(3) != "/infer":
            return None
        model = self.models.get(match.group(1))
        if (
            model is None
            or match.group(2) not in (None, "1")
            or not model.runs_inline()
            or _json_bytes(headers, body) > _INLINE_BYTES
            or self._draining()
        ):
            return None
        start = time.perf_counter()
        try:
            self._check_size(body)
            request = parse_request(model, headers, body, self.limits)
            arrays = model.infer_inline(request.inputs)
            if arrays is None:  # not expected: nothing ran in between; handle() re-parses
                return None
            pairs = output_pairs(model, request, arrays)
            data, extra = encode_infer_response(model.name, request, pairs)
            reply = Reply(200, data, extra)
        except Exception as exc:
            reply = self._error_reply(exc, path)
        return self._finish(reply, method, path, match, headers, start)

    def _draining(self) -> bool:
        return self._signals is not None and self._signals[1].done()

    def _check_size(self, body: bytes | bytearray) -> None:
        if len(body) > self.max_body_bytes:
            raise BadRequestError(
                f"request body of {len(body)} bytes exceeds the limit of "
                f"{self.max_body_bytes} bytes",
                status=413,
            )

    def _error_reply(self, exc: Exception, path: str) -> Reply:
        if isinstance(exc, ServeError):
            reply = _json(exc.status, {"error": short_text(str(exc))})
            if exc.retry_after is not None:
                reply.headers["retry-after"] = str(max(1, round(exc.retry_after)))
            return reply
        # a kernel that raised: the server keeps serving
        log.error("request failed", exc_info=exc, extra={"fields": {"path": short_text(path, 200)}})
        return _json(500, {"error": short_text(f"{type(exc).__name__}: {exc}")})

    def _finish(
        self,
        reply: Reply,
        method: str,
        path: str,
        match: re.Match[str] | None,
        headers: Mapping[str, str],
        start: float,
    ) -> Reply:
        """Stamp, count and log an answer."""
        reply.headers["x-tvmrt-worker"] = self.worker_id
        elapsed = time.perf_counter() - start
        model = self.models.get(match.group(1)) if match is not None else None
        if model is not None and match_infer(path):
            model.metrics.observe_request(reply.status, elapsed)
        if log.isEnabledFor(logging.INFO) and path != "/metrics" and "/health/" not in path:
            log.info(
                "request",
                extra={
                    "fields": {
                        "method": method,
                        "path": short_text(path, 200),
                        "status": reply.status,
                        "ms": round(elapsed * 1e3, 3),
                        "request_id": short_text(headers.get("x-request-id") or "", 64)
                        or uuid.uuid4().hex[:12],
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
        body: bytes | bytearray,
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
        if path == "/v2/repository/index":  # Triton's (tritonclient's get_model_repository_index)
            if method != "POST":
                raise BadRequestError(f"repository index takes POST, got {method}", status=405)
            state = "READY" if self.ready else "UNAVAILABLE"
            index = [{"name": n, "version": "1", "state": state} for n in sorted(self.models)]
            return _json(200, index)
        if match is None:
            raise NotFoundError(f"no route {method} {short(path)}")
        name, version, action = match.groups()
        model = self.models.get(name)
        if model is None:
            raise NotFoundError(
                f"unknown model {short(name)}; served models are {sorted(self.models)}"
            )
        if version not in (None, "1"):
            raise NotFoundError(
                f"model {name!r} has no version {short(version)}; it has version '1'"
            )
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
        if action == "/config":  # Triton's model configuration (serve/triton_config.py)
            from tvmrt.serve.triton_config import model_config

            return _json(200, model_config(model))
        return _json(200, model.metadata())

    async def _infer(
        self, model: ServedModel, headers: Mapping[str, str], body: bytes | bytearray
    ) -> Reply:
        small = _json_bytes(headers, body) <= _INLINE_BYTES
        request = await self._offload(small, parse_request, model, headers, body, self.limits)
        _, abort = self._stop_signals()
        arrays = await model.infer(request.inputs, abort)
        pairs = output_pairs(model, request, arrays)
        small = sum(a.size for _, a in pairs) <= _INLINE_VALUES
        data, extra = await self._offload(small, encode_infer_response, model.name, request, pairs)
        return Reply(200, data, extra)

    # -- ASGI ----------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        headers = request_headers(scope["headers"])
        held = [0]  # body bytes reserved from the budget, given back once answered
        try:
            stopping, _ = self._stop_signals()
            if "transfer-encoding" in headers and "content-length" in headers:
                # RFC 9112 6.1: framed two ways (request smuggling behind a proxy): answer
                # and close, so no byte after it is read as another request
                body: bytearray | Reply | None = refuse(
                    400, "a request with both Transfer-Encoding and Content-Length is refused"
                )
            else:
                body = await read_body(headers, receive, self.limits, self.budget, stopping, held)
            if body is None:  # the client went away before sending its body: nobody to answer
                return
            if isinstance(body, Reply):
                reply = body
            else:
                reply = await self.handle(scope["method"], scope["path"], headers, body)
                del body
            out = [(k.encode(), v.encode()) for k, v in reply.headers.items()]
            out.append((b"content-length", str(len(reply.body)).encode()))
            if reply.close:
                out.append((b"connection", b"close"))
            await send({"type": "http.response.start", "status": reply.status, "headers": out})
            await send({"type": "http.response.body", "body": reply.body})
        finally:
            self.budget.give(held[0])

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self._close_models()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _close_models(self) -> None:
        """Drop queued work and wait for running kernels, until the grace period ends."""
        self.ready = False
        for model in self.models.values():
            model.close(wait=False)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        loop = asyncio.get_running_loop()
        end = self._drain_deadline or loop.time() + self.limits.graceful_timeout
        joining = [loop.run_in_executor(None, m.close, True) for m in self.models.values()]
        try:
            await asyncio.wait_for(asyncio.gather(*joining), max(0.0, end - loop.time()))
        except asyncio.TimeoutError:  # a kernel still runs: it cannot be interrupted
            log.warning("a kernel was still running at the end of the grace period")


def _json_bytes(headers: Mapping[str, str], body: bytes | bytearray) -> int:
    """The bytes of a request's JSON part: what parsing costs time in proportion to (binary
    tensors after it are taken as they are, without a copy)."""
    declared = headers.get("inference-header-content-length", "")
    ok = declared.isascii() and declared.isdigit()
    return min(len(body), int(declared)) if ok else len(body)


def short_text(text: str, limit: int = _MAX_ERROR) -> str:
    """``text`` cut to ``limit`` characters."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def match_infer(path: str) -> bool:
    """Whether ``path`` is an infer endpoint."""
    return path.endswith("/infer")
