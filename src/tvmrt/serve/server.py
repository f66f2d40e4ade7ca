"""Run an :class:`~tvmrt.serve.app.InferenceApp` under uvicorn, in the foreground or a thread.

On SIGINT/SIGTERM (or :meth:`BackgroundServer.stop`) the server stops accepting and calls
:meth:`InferenceApp.begin_drain`: running and queued requests go on until shortly before
the grace period (``ServeLimits.graceful_timeout``) ends, then the rest are answered 503,
so the process exits within it. uvicorn's own grace period is the backstop.

The HTTP protocol is uvicorn's httptools one where httptools is installed, else its h11
one, each subclassed in :mod:`tvmrt.serve.http` to enforce what uvicorn does not: a cap on
open connections, a deadline and a size cap for a request's headers.
"""

from __future__ import annotations

import ctypes
import errno
import math
import os
import signal
import socket
import threading
import time
from typing import Any

from tvmrt.error import InvalidArgumentError, TVMError
from tvmrt.serve.app import InferenceApp
from tvmrt.serve.http import protocol_class

__all__ = ["serve_forever", "BackgroundServer", "free_port"]


def _config(app: InferenceApp, host: str, port: int, http: str = "auto", **kw: Any) -> Any:
    try:
        import uvicorn
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "tvmrt serve needs uvicorn: pip install 'tvmrt[serve]' "
            "(from a checkout of tvmrt: pip install -e '.[serve]')"
        ) from exc
    limits = app.limits
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol_class(limits, http),
        lifespan="on",
        ws="none",  # no websockets: nothing to import for them
        log_config=None,  # our JSON logs, not uvicorn's access log
        access_log=False,
        timeout_graceful_shutdown=math.ceil(limits.graceful_timeout),
        timeout_keep_alive=math.ceil(limits.keep_alive_timeout),
        h11_max_incomplete_event_size=limits.max_header_bytes,
        proxy_headers=False,  # nothing reads the client's address: no middleware for it
        **kw,
    )


def _server(config: Any) -> Any:
    """A ``uvicorn.Server`` whose shutdown first starts the app's drain."""
    import uvicorn

    class DrainingServer(uvicorn.Server):
        async def shutdown(self, sockets: Any = None) -> None:
            config.app.begin_drain()
            await super().shutdown(sockets)

    return DrainingServer(config)


# glibc's mallopt parameters (malloc.h) and the environment variables that set them
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MALLOC_ENV = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES")
KEEP_FREED_BYTES = 32 << 20  # freed heap memory a serving process keeps for the next requests
HEAP_BLOCK_BYTES = 4 << 20  # blocks up to this size come from the heap, not from mmap


def keep_freed_memory() -> bool:
    """Have glibc keep freed request memory for the next request; True if it was set.

    Each request's body arrives as fresh blocks of 256 KiB and more (socket reads, the
    body, its parsed tensors). glibc hands blocks that large back to the kernel when they
    are freed, so every request touched its body's pages anew: ~350 page faults per
    MobileNet request, 0.6-0.8 ms of each on a KVM guest. Serving blocks up to
    ``HEAP_BLOCK_BYTES`` from the heap and trimming it only past ``KEEP_FREED_BYTES`` of
    free memory makes those faults a first request's cost. Left alone where the user
    tuned malloc (``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_MMAP_THRESHOLD_``,
    ``GLIBC_TUNABLES``) and on C libraries other than glibc.
    """
    if any(name in os.environ for name in _MALLOC_ENV):
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 (glibc only: musl's mallopt does nothing)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(
        mallopt(_M_MMAP_THRESHOLD, HEAP_BLOCK_BYTES)
        and mallopt(_M_TRIM_THRESHOLD, KEEP_FREED_BYTES)
    )


def serve_forever(
    app: InferenceApp, host: str = "127.0.0.1", port: int = 8000, http: str = "auto"
) -> int:
    """Serve until SIGINT/SIGTERM, then shut down gracefully; returns the signal number.

    ``http`` picks uvicorn's protocol (:func:`tvmrt.serve.http.protocol_class`).

    uvicorn re-raises the signal that stopped it once it has drained; the handlers set
    here take it, so the process ends with a normal return rather than being killed.
    The process keeps freed request memory for reuse (:func:`keep_freed_memory`).
    """
    keep_freed_memory()
    received: list[int] = []
    previous = {
        sig: signal.signal(sig, lambda num, frame: received.append(num))
        for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        _server(_config(app, host, port, http)).run()
    except SystemExit as exc:  # uvicorn's startup failure (it logged why)
        raise InvalidArgumentError(
            f"could not start serving on {host}:{port} (uvicorn exited with {exc.code})"
        ) from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return received[0] if received else 0


def check_port(host: str, port: int) -> None:
    """Refuse a port another process listens on, before anything is loaded.

    Bound as uvicorn binds it (``SO_REUSEADDR``), then released.

    Raises
    ------
    InvalidArgumentError
        If ``host``:``port`` cannot be bound, naming why.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        raise InvalidArgumentError(f"cannot serve on host {host!r}: {exc}") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(address)
        except OSError as exc:
            busy = exc.errno == errno.EADDRINUSE
            why = "is busy: another process listens there" if busy else f"cannot be bound: {exc}"
            raise InvalidArgumentError(
                f"port {port} on {host} {why}; choose another --port (0 picks a free one)"
            ) from None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class BackgroundServer:
    """A server in a daemon thread (tests, benchmarks, notebooks); use as a context manager.

    Examples
    --------
    >>> from tvmrt.serve import InferenceApp, model_from_graph
    >>> from tvmrt.testing import graphs, numpy_op_library
    >>> model = model_from_graph("add1", graphs.add_one(4), numpy_op_library())
    >>> with BackgroundServer(InferenceApp([model])) as server:
    ...     server.url.startswith("http://127.0.0.1:")
    True
    """

    def __init__(
        self,
        app: InferenceApp,
        host: str = "127.0.0.1",
        port: int | None = None,
        http: str = "auto",
        **uvicorn_options: Any,
    ) -> None:
        self.app = app
        self.host = host
        self.port = port or free_port(host)
        self._server = _server(_config(app, host, self.port, http, **uvicorn_options))
        # uvicorn installs signal handlers only in the main thread: none here
        self._thread = threading.Thread(target=self._server.run, name="tvmrt-serve", daemon=True)

    @property
    def url(self) -> str:
        """``http://host:port``."""
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 20) -> BackgroundServer:
        """Start serving; returns once the socket accepts connections."""
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise TVMError(f"the server on {self.url} did not start within {timeout} s")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 30) -> None:
        """Graceful shutdown: finish in-flight requests, then drain the executors."""
        self._server.should_exit = True
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TVMError(f"the server on {self.url} did not stop within {timeout} s")

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
