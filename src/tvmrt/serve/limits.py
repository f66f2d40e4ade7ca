"""What one ``tvmrt serve`` process lets clients hold: connections, bytes and seconds.

:class:`ServeLimits` gathers every bound with its default (docs/serving.md, "Limits",
lists them with their ``tvmrt serve`` flags). Who enforces what:

* connections, header bytes, header time: the HTTP protocol classes of
  :mod:`tvmrt.serve.http` (uvicorn's httptools and h11 protocols, subclassed);
* body bytes, body time, bytes in flight, the JSON size and the parse workers:
  :class:`tvmrt.serve.app.InferenceApp`;
* the number of JSON values a request may hold: :mod:`tvmrt.serve.jsondata`;
* the grace period: :class:`tvmrt.serve.app.InferenceApp` and the server's shutdown.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvmrt.error import InvalidArgumentError

__all__ = ["ServeLimits", "BodyBudget", "MIB"]

MIB = 1 << 20


@dataclass(frozen=True)
class ServeLimits:
    """The server's bounds; every field has a ``tvmrt serve`` flag.

    Attributes
    ----------
    max_connections
        Open TCP connections; one more is answered 503 and closed at once.
    max_header_bytes
        Request line plus headers; more is answered 400 and the connection closed.
    header_timeout
        Seconds a request's headers may take, from the connection's opening or the end of
        the previous response; then the connection is closed (a byte a second does not
        keep it open).
    max_body_bytes
        One request body; more is answered 413.
    max_json_bytes
        The JSON part of a body (all of it without the binary extension); more: 413.
    body_timeout
        Seconds the whole body may take once the headers are in; then 408 and close.
    max_inflight_body_bytes
        Bytes of all bodies being read or processed at once (a declared
        ``Content-Length`` is reserved up front); past it 503 + ``Retry-After`` and close.
    parse_workers
        Threads that parse requests and encode answers, off the event loop.
    graceful_timeout
        Seconds from SIGTERM to exit: queued work that has not finished by then is
        answered 503.
    keep_alive_timeout
        Seconds an idle keep-alive connection stays open.
    """

    max_connections: int = 512
    max_header_bytes: int = 16 << 10
    header_timeout: float = 10.0
    max_body_bytes: int = 64 * MIB
    max_json_bytes: int = 8 * MIB
    body_timeout: float = 30.0
    max_inflight_body_bytes: int = 256 * MIB
    parse_workers: int = 2
    graceful_timeout: float = 10.0
    keep_alive_timeout: float = 5.0

    def __post_init__(self) -> None:
        for name in ("max_connections", "max_header_bytes", "max_body_bytes", "parse_workers"):
            if getattr(self, name) < 1:
                raise InvalidArgumentError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("header_timeout", "body_timeout", "graceful_timeout", "keep_alive_timeout"):
            if not getattr(self, name) > 0:
                raise InvalidArgumentError(f"{name} must be > 0 seconds, got {getattr(self, name)}")
        if not 1 <= self.max_json_bytes <= self.max_body_bytes:
            raise InvalidArgumentError(
                f"max_json_bytes must be in 1..max_body_bytes ({self.max_body_bytes}), "
                f"got {self.max_json_bytes}"
            )
        if self.max_inflight_body_bytes < self.max_body_bytes:
            raise InvalidArgumentError(
                f"max_inflight_body_bytes ({self.max_inflight_body_bytes}) must be at least "
                f"max_body_bytes ({self.max_body_bytes}), or no large body could ever be read"
            )

    @property
    def drain_margin(self) -> float:
        """Seconds before the end of the grace period at which queued work is answered 503."""
        return min(1.0, self.graceful_timeout / 4)


class BodyBudget:
    """Bytes of request bodies held at once, across all connections (event-loop only)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0

    def take(self, size: int) -> bool:
        """Reserve ``size`` bytes; False (nothing reserved) if that would pass the limit."""
        if self.held + size > self.limit:
            return False
        self.held += size
        return True

    def give(self, size: int) -> None:
        """Return bytes reserved with :meth:`take`."""
        self.held -= size
