"""Run an :class:`~tvmrt.serve.app.InferenceApp` under uvicorn, in the foreground or a thread.

uvicorn gives the graceful shutdown the protocol needs: on SIGINT/SIGTERM (or
:meth:`BackgroundServer.stop`) it stops accepting, lets in-flight requests finish (up to
``graceful_timeout``), then runs the app's lifespan shutdown, which drains the executors.
"""

from __future__ import annotations

import signal
import socket
import threading
import time
from typing import Any

from tvmrt.error import TVMError
from tvmrt.serve.app import InferenceApp

__all__ = ["serve_forever", "BackgroundServer", "free_port"]


def _config(app: InferenceApp, host: str, port: int, graceful_timeout: float, **kw: Any) -> Any:
    try:
        import uvicorn
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("tvmrt serve needs uvicorn: pip install 'tvmrt[serve]'") from exc
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        lifespan="on",
        ws="none",  # no websockets: nothing to import for them
        log_config=None,  # our JSON logs, not uvicorn's access log
        access_log=False,
        timeout_graceful_shutdown=int(graceful_timeout),
        **kw,
    )


def serve_forever(
    app: InferenceApp, host: str = "127.0.0.1", port: int = 8000, graceful_timeout: float = 30
) -> int:
    """Serve until SIGINT/SIGTERM, then shut down gracefully; returns the signal number.

    uvicorn re-raises the signal that stopped it once it has drained; the handlers set
    here take it, so the process ends with a normal return rather than being killed.
    """
    import uvicorn

    received: list[int] = []
    previous = {
        sig: signal.signal(sig, lambda num, frame: received.append(num))
        for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        uvicorn.Server(_config(app, host, port, graceful_timeout)).run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return received[0] if received else 0


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
        graceful_timeout: float = 10,
        **uvicorn_options: Any,
    ) -> None:
        import uvicorn

        self.app = app
        self.host = host
        self.port = port or free_port(host)
        config = _config(app, host, self.port, graceful_timeout, **uvicorn_options)
        self._server = uvicorn.Server(config)
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
