"""tvmrt's RPC server: TVM's ``python -m tvm.exec.rpc_server`` without TVM.

The server listens on one port of ``[port, port_end)``, checks each client's handshake
key, and serves the client in a forked child process with a private work folder, so a
kernel that crashes, hangs or exhausts memory ends that session only. A session longer
than the client's ``-timeout=N`` (or the server's ``timeout``) is killed and the client
gets TVM's ``RPCSessionTimeoutError``. With a tracker, the server registers under its key
and registers again, with a fresh match key, after each session (TVM's ``_listen_loop``).

A server runs whatever code its clients upload, as TVM's does: it listens on 127.0.0.1
unless told otherwise; a tracker key (``--key``) selects which clients reach it.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import random
import select
import shutil
import signal
import socket
import struct
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tvmrt.error import InvalidArgumentError, RPCError
from tvmrt.rpc import wire
from tvmrt.rpc.codec import Dialect, encode_args
from tvmrt.rpc.session import serve_connection
from tvmrt.rpc.tracker_client import TrackerConnection

__all__ = ["ServerConfig", "RPCServer", "bind_port"]

log = logging.getLogger("tvmrt.rpc.server")
_PING_PERIOD_S = 2.0
_UNMATCH_TIMEOUT_S = 4.0


@dataclass
class ServerConfig:
    """Options of ``tvmrt rpc server`` (TVM's flag names in brackets)."""

    host: str = "127.0.0.1"
    port: int = 9090
    port_end: int = 9199
    key: str = ""
    tracker: tuple[str, int] | None = None
    custom_addr: str | None = None
    timeout: float | None = None  # the longest session, whatever the client asks
    workdir: Path | None = None
    limits: wire.Limits = field(default_factory=wire.Limits)


def bind_port(host: str, port: int, port_end: int) -> tuple[socket.socket, int]:
    """A listening socket on the first free port of ``[port, port_end)``."""
    if port_end <= port:
        port_end = port + 1
    last: OSError | None = None
    for p in range(port, port_end):
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        try:
            sock.bind((host, p))
        except OSError as exc:
            sock.close()
            last = exc
            continue
        sock.listen(8)
        return sock, sock.getsockname()[1]
    raise InvalidArgumentError(
        f"no free port in [{port}, {port_end}) on {host}: {last.strerror if last else ''}"
    )


def _die_with_parent() -> None:
    """Linux: the session process is killed when the server process goes away."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _session_timeout(opts: list[str]) -> float | None:
    for opt in opts:
        if opt.startswith("-timeout="):
            with contextlib.suppress(ValueError):
                value = float(opt[len("-timeout=") :])
                return value if value > 0 else None
    return None


class RPCServer:
    """Listening socket + the accept loop (``serve_forever``), one child per session."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.sock, self.port = bind_port(config.host, config.port, config.port_end)
        self._stop = False

    def close(self) -> None:
        self._stop = True
        self.sock.close()

    # -- accept -----------------------------------------------------------------------
    def _handshake(self, conn: socket.socket, matchkey: str) -> list[str] | None:
        """Check a client's key; the options after it, or None if refused."""
        conn.settimeout(10)
        try:
            magic, key = wire.recv_handshake(conn, self.config.limits)
        except (RPCError, OSError) as exc:
            log.warning("bad handshake: %s", exc)
            return None
        words = key.split()
        if magic != wire.RPC_MAGIC or not words or words[0] != "client:" + matchkey:
            with contextlib.suppress(OSError):
                conn.sendall(struct.pack("<i", wire.RPC_CODE_MISMATCH))
            log.warning("refused a client with key %r", key[:80])
            return None
        reply = "server:" + self.config.key
        conn.sendall(wire.handshake_bytes(wire.RPC_MAGIC, reply))
        conn.settimeout(None)
        return words[1:]

    def serve_forever(self) -> None:
        tracker: TrackerConnection | None = None
        while not self._stop:
            try:
                if self.config.tracker is not None and tracker is None:
                    tracker = TrackerConnection(self.config.tracker)
                    tracker.update_info(self.config.key, self.config.custom_addr, self.port)
                accepted = self._accept(tracker)
            except (OSError, RPCError) as exc:
                if self._stop:
                    return
                log.warning("tracker connection lost (%s); reconnecting", exc)
                if tracker is not None:
                    tracker.close()
                    tracker = None
                time.sleep(0.5)
                continue
            if accepted is not None:
                conn, opts = accepted
                self._serve_session(conn, opts)

    def _accept(self, tracker: TrackerConnection | None) -> tuple[socket.socket, list[str]] | None:
        key = self.config.key
        if tracker is not None:
            matchkey = f"{key}:{random.random()}"
            tracker.put(key, self.port, matchkey, self.config.custom_addr)
        else:
            matchkey = key
        unmatched = 0
        while not self._stop:
            ready, _, _ = select.select([self.sock], [], [], _PING_PERIOD_S)
            if not ready:
                if tracker is not None:
                    pending = tracker.pending_matchkeys()
                    unmatched = 0 if matchkey in pending else unmatched + 1
                    if unmatched * _PING_PERIOD_S > _UNMATCH_TIMEOUT_S + _PING_PERIOD_S:
                        matchkey = f"{key}:{random.random()}"  # given out but never used
                        tracker.put(key, self.port, matchkey, self.config.custom_addr)
                        unmatched = 0
                continue
            conn, addr = self.sock.accept()
            opts = self._handshake(conn, matchkey)
            if opts is None:
                conn.close()
                continue
            log.info("session from %s:%s", *addr[:2])
            return conn, opts
        return None

    # -- serve ------------------------------------------------------------------------
    def _serve_session(self, conn: socket.socket, opts: list[str]) -> None:
        timeout = _session_timeout(opts)
        if self.config.timeout is not None:
            timeout = min(timeout or self.config.timeout, self.config.timeout)
        workdir = Path(tempfile.mkdtemp(prefix="tvmrt-rpc-", dir=self.config.workdir))
        try:
            read_end, write_end = os.pipe()
            pid = os.fork()
            if pid == 0:  # the session
                code = 0
                try:
                    _die_with_parent()
                    self.sock.close()
                    os.close(read_end)

                    def report(dialect: Dialect) -> None:
                        os.write(write_end, b"F" if dialect is Dialect.FFI else b"L")

                    serve_connection(conn, workdir, self.config.limits, report)
                except (RPCError, OSError) as exc:
                    log.warning("session ended: %s", exc)
                    code = 1
                finally:
                    with contextlib.suppress(OSError):
                        conn.close()
                    os._exit(code)
            os.close(write_end)
            try:
                self._wait(pid, conn, timeout, read_end)
            finally:
                os.close(read_end)
        finally:
            conn.close()
            shutil.rmtree(workdir, ignore_errors=True)

    def _wait(self, pid: int, conn: socket.socket, timeout: float | None, dialect_fd: int) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                if os.WIFSIGNALED(status):
                    log.warning("session process died of signal %d", os.WTERMSIG(status))
                return
            if deadline is not None and time.monotonic() >= deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                os.set_blocking(dialect_fd, False)
                ffi = False
                with contextlib.suppress(OSError):
                    ffi = os.read(dialect_fd, 1) == b"F"
                self._timeout_reply(conn, timeout, Dialect.FFI if ffi else Dialect.LEGACY)
                return
            time.sleep(0.01)

    @staticmethod
    def _timeout_reply(conn: socket.socket, timeout: float | None, dialect: Dialect) -> None:
        """TVM's server tells the client why: ``RPCSessionTimeoutError: ...``."""
        message = f"RPCSessionTimeoutError: timeout in RPC session after {timeout} seconds"
        payload = encode_args([message], dialect)
        with contextlib.suppress(OSError):
            conn.sendall(wire.packet_bytes(wire.RPCCode.kException, payload))
