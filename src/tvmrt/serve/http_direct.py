"""Answering small infer requests straight from the httptools protocol, without ASGI.

For a model whose runs are done on the event loop (``ServedModel.runs_inline``), the ASGI
layers cost more than the run: uvicorn's request-response cycle, its task, the
``receive``/``send`` messages and the header checks of its ``send``. A ``POST .../infer``
with a ``Content-Length`` of at most 64 KiB, on a connection with nothing in flight, is
therefore read here, and answered by :meth:`InferenceApp.answer_now
<tvmrt.serve.app.InferenceApp.answer_now>` in the same step of the event loop, in one
write. Whatever ``answer_now`` declines (another model, a queue, a draining server) goes
on to uvicorn's ASGI route as if it had never been looked at, with its body already read.

The body of such a request is held here, at most 64 KiB per connection (so at most
``max_connections`` x 64 KiB in all), for at most ``body_timeout`` seconds: then 408, as
on the ASGI route.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from tvmrt.serve.body import Reply, refuse, request_headers

__all__ = ["DIRECT_BODY_BYTES", "Direct", "raw_reply"]

DIRECT_BODY_BYTES = 64 << 10  # larger bodies take the ASGI route (read with its budget)

_STATUS_LINES: dict[int, bytes] = {}


def _status_line(status: int) -> bytes:
    line = _STATUS_LINES.get(status)
    if line is None:
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = ""
        line = _STATUS_LINES[status] = f"HTTP/1.1 {status} {phrase}\r\n".encode()
    return line


def raw_reply(status: int, reason: str, message: str) -> bytes:
    """A whole HTTP/1.1 answer with a JSON error body that closes the connection."""
    body = json.dumps({"error": message}).encode()
    return (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode() + body


class _Pending:
    """A request read for a direct answer: what ``answer_now`` needs, and its body."""

    __slots__ = ("body", "headers", "keep_alive", "path")

    def __init__(self, path: str, headers: dict[str, str], keep_alive: bool) -> None:
        self.path = path
        self.headers = headers
        self.keep_alive = keep_alive
        self.body = bytearray()


class Direct:
    """A mixin for uvicorn's ``HttpToolsProtocol`` (after the limits' mixin in the MRO)."""

    _pending: _Pending | None = None
    _body_timer: asyncio.TimerHandle | None = None
    _answer_now: Callable[..., Any] | None = None

    if TYPE_CHECKING:  # given by uvicorn's protocol and the limits' mixin
        config: Any
        cycle: Any
        flow: Any
        headers: list[tuple[bytes, bytes]]
        loop: asyncio.AbstractEventLoop
        parser: Any
        pipeline: Any
        server_state: Any
        timeout_keep_alive: int
        timeout_keep_alive_task: asyncio.TimerHandle | None
        transport: asyncio.Transport
        url: bytes
        limits: Any

        def _arm_header_timer(self) -> None: ...
        def _disarm_header_timer(self) -> None: ...
        def timeout_keep_alive_handler(self) -> None: ...

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._answer_now = getattr(self.config.app, "answer_now", None)

    def on_headers_complete(self) -> None:
        pending = self._direct_request() if self._answer_now is not None else None
        if pending is None:
            super().on_headers_complete()  # type: ignore[misc]
            return
        self._disarm_header_timer()  # the headers are in
        self._pending = pending

    def _direct_request(self) -> _Pending | None:
        """The request to read here, or None for the ASGI route."""
        url = self.url
        if (
            # answers the client has not read (the write buffer over its high-water mark;
            # nothing is written here until this request's answer): the ASGI route waits
            self.flow.write_paused
            or not url.endswith(b"/infer")
            or self.parser.get_method() != b"POST"
            or self.parser.should_upgrade()
            or self.pipeline
            or not (self.cycle is None or self.cycle.response_complete)
        ):
            return None
        version = self.parser.get_http_version()
        if version not in ("1.1", "1.0") or b"%" in url:  # no query (it would end the url)
            return None
        headers = request_headers(self.headers)
        declared = headers.get("content-length")
        if (
            declared is None
            or not (declared.isascii() and declared.isdigit())
            or int(declared) > DIRECT_BODY_BYTES
            or "transfer-encoding" in headers
            or "expect" in headers
        ):
            return None
        keep_alive = version == "1.1" and bool(self.parser.should_keep_alive())
        return _Pending(url.decode("ascii"), headers, keep_alive)

    def on_body(self, body: bytes) -> None:
        if self._pending is None:
            super().on_body(body)  # type: ignore[misc]
        else:
            self._pending.body += body  # llhttp stops at the Content-Length

    def data_received(self, data: bytes) -> None:
        super().data_received(data)  # type: ignore[misc]
        if self._pending is not None and self._body_timer is None:  # a body still coming
            timeout = self.limits.body_timeout
            self._body_timer = self.loop.call_later(timeout, self._body_timed_out)

    def _body_timed_out(self) -> None:
        self._body_timer = None
        if self._pending is not None and not self.transport.is_closing():
            timeout = self.limits.body_timeout
            message = f"the request body did not arrive within {timeout:g} s"
            self.transport.write(raw_reply(408, "Request Timeout", message))
            self.transport.close()

    def _cancel_body_timer(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def on_message_complete(self) -> None:
        pending = self._pending
        if pending is None:
            super().on_message_complete()  # type: ignore[misc]
            return
        self._pending = None
        self._cancel_body_timer()
        assert self._answer_now is not None
        reply = self._answer_now("POST", pending.path, pending.headers, pending.body)
        if reply is None:  # the ASGI route, as if the headers had only now been parsed
            super().on_headers_complete()  # type: ignore[misc]
            self.cycle.body = bytes(pending.body)
            super().on_message_complete()  # type: ignore[misc]
            return
        self._write(reply, pending.keep_alive and not reply.close)

    def _write(self, reply: Reply, keep: bool) -> None:
        """Answer in one write; then close, or wait for the connection's next request."""
        out = [_status_line(reply.status)]
        for name, value in self.server_state.default_headers:  # date and server
            out += [name, b": ", value, b"\r\n"]
        for key, text in reply.headers.items():
            out.append(f"{key}: {text}\r\n".encode("latin-1"))
        out.append(b"content-length: %d\r\n" % len(reply.body))
        if not keep:
            out.append(b"connection: close\r\n")
        out += [b"\r\n", reply.body]
        self.transport.write(b"".join(out))
        self.server_state.total_requests += 1
        if not keep:
            self.transport.close()
            return
        self._arm_header_timer()  # the next request's, as after an ASGI answer
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler
        )

    def shutdown(self) -> None:
        """The server stops: a body still coming is answered 503, as on the ASGI route."""
        if self._pending is not None and not self.transport.is_closing():
            self._pending = None
            self._cancel_body_timer()
            message = "the server is shutting down; retry elsewhere"
            self._write(refuse(503, message, retry_after=1), keep=False)
            return
        super().shutdown()  # type: ignore[misc]

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_body_timer()
        super().connection_lost(exc)  # type: ignore[misc]
