"""Reading a request body within the limits of :class:`tvmrt.serve.limits.ServeLimits`.

uvicorn hands the body over in pieces and stops reading the socket while the application
has not taken the last piece, so a body the application does not read costs little; what
it does read is capped (413), timed (408) and counted against the bytes all requests may
hold at once (503 + ``Retry-After``). Each refusal closes the connection, whose body was
not read to its end.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from tvmrt.serve.jsondata import short
from tvmrt.serve.limits import BodyBudget, ServeLimits

__all__ = ["Reply", "refuse", "read_body", "request_headers"]

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]


@dataclass
class Reply:
    """An HTTP answer: status, body and headers; ``close`` ends the connection after it."""

    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=lambda: {"content-type": "application/json"})
    close: bool = False


def request_headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """A request's headers as the app reads them: lower-case names, Latin-1 text."""
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in raw}


def refuse(status: int, message: str, retry_after: int | None = None) -> Reply:
    """A JSON error answer that also closes the connection."""
    reply = Reply(status, json.dumps({"error": message}, separators=(",", ":")).encode())
    reply.close = True
    if retry_after is not None:
        reply.headers["retry-after"] = str(retry_after)
    return reply


async def read_body(
    headers: Mapping[str, str],
    receive: Receive,
    limits: ServeLimits,
    budget: BodyBudget,
    stopping: asyncio.Future[None],
    held: list[int],
) -> bytearray | Reply | None:
    """The body, the error answer, or None if the client left.

    ``held[0]`` is set to the bytes reserved from ``budget``; the caller gives them back
    once the request is answered. ``stopping`` done (the server draining) answers 503.
    """
    declared = headers.get("content-length")
    if declared is not None and not declared.isdigit():
        return refuse(400, f"Content-Length must be a byte count, got {short(declared)}")
    size = int(declared) if declared is not None else 0
    if size > limits.max_body_bytes:
        return refuse(
            413,
            f"request body of {size} bytes exceeds the limit of {limits.max_body_bytes} bytes",
        )
    busy = (
        f"the server holds {limits.max_inflight_body_bytes} bytes of request bodies "
        "at most and is full; retry later"
    )
    if not budget.take(size):
        return refuse(503, busy, retry_after=1)
    held[0] = size
    # One timer and one callback for the whole body, not a task and a wait per piece: each
    # cancels this task, and the reason says which answer that means.
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None  # called from the ASGI coroutine
    reason: list[str] = []

    def stop(why: str) -> None:
        if not reason:
            reason.append(why)
            task.cancel()

    timer = loop.call_later(limits.body_timeout, stop, "timeout")
    on_stop = lambda _: stop("stopping")  # noqa: E731
    stopping.add_done_callback(on_stop)
    body = bytearray()
    try:
        if stopping.done():
            reason.append("stopping")
            raise asyncio.CancelledError
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            if len(body) + len(chunk) > limits.max_body_bytes:
                limit = limits.max_body_bytes
                return refuse(413, f"request body exceeds the limit of {limit} bytes")
            extra = len(body) + len(chunk) - held[0]
            if extra > 0:  # no (or a short) Content-Length: reserve as the bytes come
                if not budget.take(extra):
                    return refuse(503, busy, retry_after=1)
                held[0] += extra
            body += chunk
            if not message.get("more_body", False):
                return body
    except asyncio.CancelledError:
        if not reason:
            raise  # cancelled from outside: not ours to answer
        if hasattr(task, "uncancel"):  # Python 3.11+: count our cancel as handled
            task.uncancel()
        if reason[0] == "stopping":
            return refuse(503, "the server is shutting down; retry elsewhere", retry_after=1)
        return refuse(408, f"the request body did not arrive within {limits.body_timeout:g} s")
    finally:
        timer.cancel()
        stopping.remove_done_callback(on_stop)
