"""Infer requests read and answered straight from the httptools protocol, without ASGI.

uvicorn's ASGI route costs a request more than a fast model's run, and a large body more
than it needs: its request-response cycle and task, the ``receive``/``send`` messages and
the header checks of its ``send``, and a pause of the socket each time 64 KiB of body wait
for the app, which then wakes to take them. A ``POST .../infer`` with a ``Content-Length``
of at most ``max_body_bytes``, on a connection with nothing in flight, is therefore read
here: its bytes are reserved from the in-flight budget when its headers are in (as the
ASGI route reserves them), so the body is read on without pauses, for at most
``body_timeout`` seconds (then 408, as on the ASGI route). Once the body is in:

* :meth:`InferenceApp.answer_now <tvmrt.serve.app.InferenceApp.answer_now>` answers it in
  the same step of the event loop when it can (small JSON, a model whose runs are done on
  the loop and that has nothing pending);
* else :meth:`InferenceApp.handle <tvmrt.serve.app.InferenceApp.handle>` answers it in a
  task. Until its answer is written, ``self.cycle`` is an :class:`_Answering`, a request
  under way as uvicorn sees it, so a request pipelined behind it waits in uvicorn's
  pipeline and starts once the answer is out, as behind an ASGI answer.

Each answer goes out in one write. Any other request (another path, a chunked body,
``Expect``, a body over ``max_body_bytes`` or the budget) takes uvicorn's ASGI route
untouched, and gets its answer there (413, 503).
"""

from __future__ import annotations

import asyncio
import json
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from tvmrt.serve.app import InferenceApp
from tvmrt.serve.body import Reply, refuse, request_headers

__all__ = ["Direct", "raw_reply"]

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
    """A request read for a direct answer: what the app needs, its body, its bytes held."""

    __slots__ = ("body", "headers", "held", "keep_alive", "path")

    def __init__(self, path: str, headers: dict[str, str], keep_alive: bool, held: int) -> None:
        self.path = path
        self.headers = headers
        self.keep_alive = keep_alive
        self.held = held  # bytes reserved from the app's in-flight budget
        self.body = bytearray()


class _Answering:
    """``self.cycle`` while a direct answer is being computed: what uvicorn's protocol reads
    of a request-response cycle (a pipelined request queues behind an unfinished one; a
    graceful shutdown clears ``keep_alive``; a lost connection sets ``disconnected``)."""

    __slots__ = ("disconnected", "keep_alive", "message_event", "response_complete")

    def __init__(self) -> None:
        self.response_complete = False
        self.disconnected = False
        self.keep_alive = True
        self.message_event = asyncio.Event()


class Direct:
    """A mixin for uvicorn's ``HttpToolsProtocol`` (after the limits' mixin in the MRO)."""

    _pending: _Pending | None = None
    _body_timer: asyncio.TimerHandle | None = None
    _app: InferenceApp | None = None

    if TYPE_CHECKING:  # given by uvicorn's protocol and the limits' mixin
        config: Any
        cycle: Any
        flow: Any
        headers: list[tuple[bytes, bytes]]
        loop: asyncio.AbstractEventLoop
        parser: Any
        pipeline: Any
        server_state: Any
        tasks: set[asyncio.Task[None]]
        transport: asyncio.Transport
        url: bytes
        limits: Any

        def _disarm_header_timer(self) -> None: ...
        def on_response_complete(self) -> None: ...

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        app = self.config.app
        self._app = app if isinstance(app, InferenceApp) else None

    def on_headers_complete(self) -> None:
        pending = self._direct_request() if self._app is not None else None
        if pending is None:
            super().on_headers_complete()  # type: ignore[misc]
            return
        self._disarm_header_timer()  # the headers are in
        self._pending = pending

    def _direct_request(self) -> _Pending | None:
        """The request to read here, its bytes reserved; or None for the ASGI route."""
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
        if not url.startswith(b"/"):  # the absolute form (a proxy's): its path, as uvicorn
            import httptools  # this protocol runs only where uvicorn found it

            try:
                url = httptools.parse_url(url).path or b""
            except httptools.HttpParserInvalidURLError:
                return None
            if not url.endswith(b"/infer"):
                return None
        headers = request_headers(self.headers)
        declared = headers.get("content-length")
        app = self._app
        assert app is not None
        if (
            declared is None
            or not (declared.isascii() and declared.isdigit())
            or "transfer-encoding" in headers
            or "expect" in headers
        ):
            return None
        size = int(declared)
        if size > app.max_body_bytes or not app.budget.take(size):
            return None  # the ASGI route answers 413 or 503
        keep_alive = version == "1.1" and bool(self.parser.should_keep_alive())
        return _Pending(url.decode("ascii"), headers, keep_alive, size)

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
            self.transport.close()  # connection_lost gives the bytes back

    def _cancel_body_timer(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _drop_pending(self) -> None:
        """Forget a body still coming, giving its bytes back."""
        pending, self._pending = self._pending, None
        self._cancel_body_timer()
        if pending is not None and self._app is not None:
            self._app.budget.give(pending.held)

    def on_message_complete(self) -> None:
        pending = self._pending
        if pending is None:
            super().on_message_complete()  # type: ignore[misc]
            return
        self._pending = None
        self._cancel_body_timer()
        app = self._app
        assert app is not None
        reply = app.answer_now("POST", pending.path, pending.headers, pending.body)
        if reply is not None:
            app.budget.give(pending.held)
            self._write(reply, pending.keep_alive)
            return
        self.cycle = cycle = _Answering()
        task = self.loop.create_task(self._answer(app, pending, cycle))
        task.add_done_callback(self.tasks.discard)
        self.tasks.add(task)  # uvicorn's shutdown waits for it, as for an ASGI task

    async def _answer(self, app: InferenceApp, pending: _Pending, cycle: _Answering) -> None:
        """Answer a request whose answer awaits a worker thread (or parsing in one)."""
        try:
            reply = await app.handle("POST", pending.path, pending.headers, pending.body)
        finally:
            app.budget.give(pending.held)
            pending.body = bytearray()
            cycle.response_complete = True
        if not cycle.disconnected and not self.transport.is_closing():
            self._write(reply, pending.keep_alive and cycle.keep_alive)

    def _write(self, reply: Reply, keep: bool) -> None:
        """Answer in one write; then close, or go on as after an ASGI answer (uvicorn's
        ``on_response_complete``: the next pipelined request, or the keep-alive wait)."""
        keep = keep and not reply.close
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
        if not keep:
            self.transport.close()
        self.on_response_complete()

    def shutdown(self) -> None:
        """The server stops: a body still coming is answered 503, as on the ASGI route."""
        if self._pending is not None and not self.transport.is_closing():
            self._drop_pending()
            message = "the server is shutting down; retry elsewhere"
            self._write(refuse(503, message, retry_after=1), keep=False)
            return
        super().shutdown()  # type: ignore[misc]

    def connection_lost(self, exc: Exception | None) -> None:
        self._drop_pending()
        super().connection_lost(exc)  # type: ignore[misc]
