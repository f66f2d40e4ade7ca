"""TVM's RPC client (``tvm.rpc.connect``, ``connect_tracker``, ``RPCSession``) without TVM.

Typical use, unchanged from TVM apart from the import::

    from tvmrt import rpc, nd
    from tvmrt.contrib import graph_executor

    remote = rpc.connect_tracker("tracker-host", 9190).request("rasp4")
    remote.upload("deploy_lib.so")
    rlib = remote.load_module("deploy_lib.so")
    dev = remote.cpu()
    module = graph_executor.GraphModule(rlib["default"](dev))
    module.set_input("data", nd.array(x, dev))
    module.run()
    y = module.get_output(0).numpy()

The client talks to TVM's own RPC server (any version speaking protocol 0.8.0) and to
``tvmrt rpc server``.
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
import weakref
from collections.abc import Sequence

from tvmrt.error import InvalidArgumentError, RPCError
from tvmrt.rpc.client_endpoint import ClientEndpoint, open_endpoint
from tvmrt.rpc.remote import RemoteFunc, RPCModule, SessionFiles
from tvmrt.rpc.tracker_session import TrackerSession
from tvmrt.runtime.device import Device
from tvmrt.runtime.module import Module

__all__ = ["RPCSession", "connect", "connect_tracker", "TrackerSession"]

# Table indices of live sessions: a remote device's type carries its session's index.
_table_lock = threading.Lock()
_live: weakref.WeakValueDictionary[int, RPCSession] = weakref.WeakValueDictionary()
_counter = itertools.count()


def _next_index() -> int:
    with _table_lock:
        for index in _counter:
            if index not in _live:
                return index
    raise AssertionError("unreachable")


class NamedDevices:
    """TVM's per-kind device methods of a session (``cpu()``, ``cuda(1)``, ...), each
    ``self.device(type, id)``; shared by :class:`RPCSession` and ``LocalSession``."""

    def device(self, dev_type: int | str, dev_id: int = 0) -> Device:
        raise NotImplementedError

    def cpu(self, dev_id: int = 0) -> Device:
        """The session's CPU."""
        return self.device(1, dev_id)

    def cuda(self, dev_id: int = 0) -> Device:
        """The session's CUDA GPU ``dev_id``."""
        return self.device(2, dev_id)

    def cl(self, dev_id: int = 0) -> Device:
        """The session's OpenCL device ``dev_id``."""
        return self.device(4, dev_id)

    opencl = cl

    def vulkan(self, dev_id: int = 0) -> Device:
        """The session's Vulkan device ``dev_id``."""
        return self.device(7, dev_id)

    def metal(self, dev_id: int = 0) -> Device:
        """The session's Metal device ``dev_id``."""
        return self.device(8, dev_id)

    def rocm(self, dev_id: int = 0) -> Device:
        """The session's ROCm device ``dev_id``."""
        return self.device(10, dev_id)

    def ext_dev(self, dev_id: int = 0) -> Device:
        """The session's extension device ``dev_id``."""
        return self.device(12, dev_id)

    def hexagon(self, dev_id: int = 0) -> Device:
        """The session's Hexagon device ``dev_id``."""
        return self.device(16, dev_id)

    def webgpu(self, dev_id: int = 0) -> Device:
        """The session's WebGPU device ``dev_id``."""
        return self.device(15, dev_id)


class RPCSession(NamedDevices):
    """A session with one RPC server (TVM's ``RPCSession``); made by :func:`connect`.

    Functions, modules and arrays of the session stay valid while the session is open;
    ``close()`` (or leaving a ``with`` block) ends it.
    """

    def __init__(self, endpoint: ClientEndpoint) -> None:
        self._endpoint = endpoint
        self._tbl_index = endpoint.table_index
        # open while this session or any of its functions, modules or arrays is alive
        self._lifeline = endpoint.lifeline()
        self._files = SessionFiles(endpoint)

    def __enter__(self) -> RPCSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the session (kShutdown); its remote devices stop working."""
        self._endpoint.close()

    def __repr__(self) -> str:
        state = "closed" if self._endpoint.closed else "open"
        return f"RPCSession({self._endpoint.peer}, table_index={self._tbl_index}, {state})"

    # -- functions ---------------------------------------------------------------------
    def get_function(self, name: str) -> RemoteFunc:
        """The server's global function ``name``.

        Raises
        ------
        GlobalFunctionNotFoundError
            If the server has no such function.
        """
        return self._files.global_func(name)

    def system_lib(self) -> Module:
        """The server's system library (``runtime.SystemLib``)."""
        return self._module(self.get_function("runtime.SystemLib")(), "runtime.SystemLib")

    # -- devices -------------------------------------------------------------------------
    def device(self, dev_type: int | str, dev_id: int = 0) -> Device:
        """Device ``dev_type``/``dev_id`` of the server, encoded with this session."""
        return self._files.device(dev_type, dev_id)

    # -- files ---------------------------------------------------------------------------
    def upload(
        self, data: str | os.PathLike[str] | bytes | bytearray, target: str | None = None
    ) -> None:
        """Write a local file, or bytes named by ``target``, into the server's work folder."""
        self._files.upload(data, target)

    def download(self, path: str) -> bytes:
        """The bytes of ``path`` in the server's work folder."""
        blob = self.get_function("tvm.rpc.server.download")(path)
        if not isinstance(blob, bytes | bytearray):
            raise RPCError(f"download({path!r}) returned {type(blob).__name__}, not bytes")
        return bytes(blob)

    def remove(self, path: str) -> None:
        """Delete ``path`` from the server's work folder."""
        self.get_function("tvm.rpc.server.remove")(path)

    def listdir(self, path: str) -> str:
        """The entries of ``path`` in the work folder, joined by ``","`` (TVM's format)."""
        return str(self.get_function("tvm.rpc.server.listdir")(path))

    def load_module(self, path: str, options: str = "", cc: str = "g++") -> RPCModule:
        """Load ``path`` (uploaded before) on the server; returns the remote module.

        ``options`` and ``cc`` are accepted for TVM compatibility and not sent (TVM's
        servers take the path only).
        """
        return self._files.load_module(path)

    def download_linked_module(self, path: str) -> bytes:
        """Link an uploaded ``.tar``/``.o`` on the server and return the shared library."""
        blob = self.get_function("tvm.rpc.server.download_linked_module")(path)
        if not isinstance(blob, bytes | bytearray):
            raise RPCError(f"download_linked_module({path!r}) returned {type(blob).__name__}")
        return bytes(blob)

    def _module(self, value: object, what: str) -> RPCModule:
        return self._files.module(value, what)


def connect(
    url: str,
    port: int,
    key: str = "",
    session_timeout: float = 0,
    session_constructor_args: Sequence[object] | None = None,
    enable_logging: bool = False,
    connect_timeout: float | None = 60.0,
) -> RPCSession:
    """Connect to the RPC server at ``url:port`` (TVM's ``tvm.rpc.connect``).

    Parameters
    ----------
    url, port
        The server's address.
    key
        The server's match key (a tracker hands one out).
    session_timeout
        Seconds after which the server ends the session (0: never).
    session_constructor_args
        Not supported (proxies); must be empty.
    enable_logging
        Accepted for TVM compatibility; tvmrt does not log packets.
    connect_timeout
        tvmrt's: seconds the TCP connect, the handshake and the session's init may take
        in all (``None``: no limit); past it an ``RPCSessionTimeoutError`` names the step.

    Raises
    ------
    RPCError
        If the server cannot be reached or refuses the key.
    """
    if session_constructor_args:
        raise InvalidArgumentError(
            "session_constructor_args (sessions through a proxy) are not supported by tvmrt"
        )
    if session_timeout:
        key += f" -timeout={session_timeout}"
    index = _next_index()
    session = RPCSession(
        open_endpoint(
            url, port, key, index, connect_timeout, session_timeout=float(session_timeout or 0)
        )
    )
    with _table_lock:
        _live[index] = session
    return session


def connect_tracker(url: str, port: int, timeout: float | None = 30) -> TrackerSession[RPCSession]:
    """Connect to an RPC tracker (TVM's ``tvm.rpc.connect_tracker``).

    ``timeout`` (tvmrt's) bounds connecting, the handshake and each answer but a request's
    wait in the queue, and the sessions it opens connect within it too.
    """
    return TrackerSession(
        (url, int(port)), functools.partial(connect, connect_timeout=timeout), timeout
    )
