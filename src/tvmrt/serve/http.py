"""uvicorn's HTTP protocols with the limits uvicorn does not enforce itself.

Two protocol classes serve the same limits (:class:`~tvmrt.serve.limits.ServeLimits`):

* ``httptools`` (the default where the package is installed, as it is with the ``serve``
  extra): uvicorn's protocol on httptools' C parser (llhttp). It costs about 0.1 ms less
  per request than h11 (bench/README.md, "serve").
* ``h11``: uvicorn's pure-Python protocol, for platforms without an httptools wheel.

Both add, by one mixin:

* a cap on open connections: one more is answered 503 and closed;
* a deadline for a request's headers, from the connection's opening or the end of the
  previous answer (uvicorn's keep-alive timer restarts on every byte, so a client sending
  a byte a second was never closed);
* a cap on the request line plus headers, answered 400 with JSON like every other error.
  h11 caps a head that is still incomplete (``max_incomplete_event_size``); httptools has
  no cap, so there the whole of every read that leaves a request's headers incomplete is
  counted. Under both, a head's parsed request line and headers are measured once it is
  complete (a head that arrives whole in one read). An httptools connection holds at
  most the cap plus one read (256 KiB) of header bytes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import cache
from typing import Any

from tvmrt.error import InvalidArgumentError
from tvmrt.serve.http_direct import Direct, raw_reply
from tvmrt.serve.limits import ServeLimits

__all__ = ["HTTP_CHOICES", "protocol_class", "resolve_http"]

HTTP_CHOICES = ("auto", "httptools", "h11")


def resolve_http(http: str) -> str:
    """``http`` ("auto", "httptools" or "h11") as the protocol that will serve.

    Raises
    ------
    InvalidArgumentError
        For another name, or "httptools" where the package is not installed.
    """
    if http not in HTTP_CHOICES:
        raise InvalidArgumentError(
            f"unknown HTTP protocol {http!r}; expected one of {', '.join(HTTP_CHOICES)}"
        )
    if http == "h11":
        return http
    try:
        import httptools  # noqa: F401
    except ImportError:
        if http == "httptools":
            raise InvalidArgumentError(
                "the httptools HTTP protocol needs the httptools package: "
                "pip install 'tvmrt[serve]' (or choose --http h11)"
            ) from None
        return "h11"
    return "httptools"


class _OneWritePerAnswer:
    """The connection's transport, holding an answer's status line and headers until its
    body is written in the same step of the event loop, so a small answer leaves in one
    ``send`` (uvicorn writes the two separately: two syscalls, two TCP segments, and a
    client that wakes twice). Held bytes go out at the latest when the loop next runs its
    ready callbacks, or before the connection closes.
    """

    __slots__ = ("_held", "_loop", "_transport")

    _JOIN_BELOW = 64 << 10  # a larger body is written after the head, not copied onto it

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        held = self._held
        if held is not None:
            self._held = None
            if len(data) < self._JOIN_BELOW:
                self._transport.write(held + data)
                return
            self._transport.write(held)
        elif data[:7] == b"HTTP/1." and data[-4:] == b"\r\n\r\n":
            self._held = bytes(data)
            self._loop.call_soon(self.flush)
            return
        self._transport.write(data)

    def flush(self) -> None:
        if self._held is not None:
            held, self._held = self._held, None
            self._transport.write(held)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:  # everything else is the transport's
        return getattr(self._transport, name)


@cache
def _guarded_flow_class() -> type[Any]:
    from uvicorn.protocols.http.flow_control import FlowControl

    class GuardedFlow(FlowControl):
        """uvicorn's flow control, except that reading does not resume while whole requests
        already read wait their turn (``backlog()``), or while answers wait for a client
        that does not read them. uvicorn resumes reading after every answer and whenever
        the app asks for a body, so a client pipelining requests without reading the
        answers had the server read, parse and hold everything it sent."""

        def __init__(self, transport: asyncio.Transport, backlog: Callable[[], bool]) -> None:
            super().__init__(transport)
            self._backlog = backlog

        def resume_reading(self) -> None:
            if not self.write_paused and not self._backlog():
                super().resume_reading()

        def pause_writing(self) -> None:
            super().pause_writing()
            self.pause_reading()

        def resume_writing(self) -> None:
            super().resume_writing()
            self.resume_reading()

    return GuardedFlow


class _Limited:
    """The connection cap, header deadline and JSON 400 answer, for either protocol.

    The deadline is armed when a connection opens and after each complete answer when
    no further request is already under way, and it holds while ``self.cycle`` (the
    request-response cycle uvicorn makes once a request's headers are parsed) stays
    the one it was armed with.
    """

    limits: ServeLimits  # set on each concrete class
    _header_timer: asyncio.TimerHandle | None = None
    _armed_cycle: object = None
    # given by uvicorn's protocol classes
    connections: set[Any]
    cycle: Any
    flow: Any
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self.transport = _OneWritePerAnswer(transport, self.loop)  # type: ignore[assignment]
        self.flow = _guarded_flow_class()(transport, self._backlog)
        cap = self.limits.max_connections
        if len(self.connections) > cap:
            self.connections.discard(self)
            message = f"the server holds {cap} connections at most"
            transport.write(raw_reply(503, "Service Unavailable", message))
            transport.close()
            return
        self._arm_header_timer()

    def _arm_header_timer(self) -> None:
        self._disarm_header_timer()
        self._armed_cycle = self.cycle
        timeout = self.limits.header_timeout
        self._header_timer = self.loop.call_later(timeout, self._header_timed_out)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_timed_out(self) -> None:
        self._header_timer = None
        if self.cycle is self._armed_cycle and not self.transport.is_closing():
            timeout = self.limits.header_timeout
            message = f"the request headers did not arrive within {timeout:g} s"
            self.transport.write(raw_reply(408, "Request Timeout", message))
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)  # type: ignore[misc]
        if self._header_timer is not None and self.cycle is not self._armed_cycle:
            self._disarm_header_timer()  # a request's headers are in

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
            self._arm_header_timer()  # the next request's headers, on keep-alive

    def _backlog(self) -> bool:
        """Whether whole requests already read wait for their turn."""
        raise NotImplementedError

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)  # type: ignore[misc]

    def send_400_response(self, msg: str) -> None:
        limit = self.limits.max_header_bytes
        message = f"invalid HTTP request: malformed, or headers over {limit} bytes"
        self.transport.write(raw_reply(400, "Bad Request", message))
        self.transport.close()


# a head's size as both protocols measure it once parsed: the target plus the method,
# version, spaces and CRLF of the request line; each header plus ": " and CRLF
def _request_line_bytes(target: bytes) -> int:
    return len(target) + 16


def _header_bytes(name: bytes, value: bytes) -> int:
    return len(name) + len(value) + 4


class _HeadersTooLarge(Exception):
    """Raised from an httptools callback: the parser stops and uvicorn answers 400."""


def _httptools_class(limits: ServeLimits) -> type[Any]:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class LimitedHttpToolsProtocol(_Limited, Direct, HttpToolsProtocol):
        _in_head = False  # between a request's first byte and the end of its headers
        _head_bytes = 0  # bytes of whole reads that left the headers incomplete
        _head_size = 0  # the parsed request line and headers of the current request

        def data_received(self, data: bytes) -> None:
            was_in_head = self._in_head
            super().data_received(data)
            if self._in_head and not self.transport.is_closing():
                # a read that began inside the headers and ended inside them is all header
                # bytes; one in which a request began is not counted (at most one read)
                self._head_bytes = self._head_bytes + len(data) if was_in_head else 0
                if self._head_bytes > limits.max_header_bytes:
                    self.send_400_response("headers too large")

        def on_message_begin(self) -> None:
            self._in_head = True
            self._head_bytes = 0
            self._head_size = 0
            super().on_message_begin()

        def on_url(self, url: bytes) -> None:  # called per piece of a URL that spans reads
            self._grow_head(_request_line_bytes(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._grow_head(_header_bytes(name, value))
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            self._in_head = False
            super().on_headers_complete()

        def _backlog(self) -> bool:
            return bool(self.pipeline)

        def _grow_head(self, size: int) -> None:
            self._head_size += size
            if self._head_size > limits.max_header_bytes:
                raise _HeadersTooLarge

    LimitedHttpToolsProtocol.limits = limits
    return LimitedHttpToolsProtocol


def _h11_class(limits: ServeLimits) -> type[Any]:
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class LimitedH11Protocol(_Limited, H11Protocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # h11 caps a head only while it is incomplete: one that arrives whole in a
            # read is measured as uvicorn takes it, and refused like a malformed one
            next_event = self.conn.next_event

            def checked_event() -> Any:
                event = next_event()
                if isinstance(event, h11.Request):
                    size = _request_line_bytes(event.target)
                    size += sum(_header_bytes(k, v) for k, v in event.headers)
                    if size > limits.max_header_bytes:
                        raise h11.RemoteProtocolError("headers too large")
                return event

            self.conn.next_event = checked_event  # type: ignore[method-assign]

        def _backlog(self) -> bool:
            # the client's request is whole and not answered yet: bytes past it are the
            # next request, which waits (its body is not what a resume would be for)
            return bool(self.conn.their_state is h11.DONE and self.conn.our_state is not h11.DONE)

    LimitedH11Protocol.limits = limits
    return LimitedH11Protocol


@cache
def protocol_class(limits: ServeLimits, http: str = "auto") -> type[Any]:
    """uvicorn's ``http`` protocol class ("auto": httptools if installed, else h11)
    with ``limits``' connection cap, header deadline and header size cap."""
    if resolve_http(http) == "httptools":
        return _httptools_class(limits)
    return _h11_class(limits)
