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
HANDSHAKE_S = 10.0  # a client's whole handshake, from connect to its last key byte
MAX_HANDSHAKES = 64  # handshakes read side by side; a new one drops the oldest past this


@dataclass(eq=False)
class _Handshake:
    addr: tuple[str, int]
    deadline: float
    buf: bytearray = field(default_factory=bytearray)


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
        # a restart gets its port back while old connections linger in TIME_WAIT
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, p))
        except OSError as exc:
            sock.close()
            last = exc
            continue
        sock.listen(128)
        return sock, sock.getsockname()[1]
    raise InvalidArgumentError(
        f"no free port in [{port}, {port_end}) on {host}: {last.strerror if last else ''}"
    )


def _die_with_parent() -> None:
    """Linux: the session process is killed when the server process goes away."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _kill_group(pid: int) -> None:
    """Kill session ``pid`` and every process of its group (a compiler it runs), and reap it."""
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


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
        self.sock.setblocking(False)
        self._handshakes: dict[socket.socket, _Handshake] = {}
        self._stop = False

    def request_stop(self) -> None:
        """Have :meth:`serve_forever` return at its next wake-up (within 2 s, after a running
        session); safe to call from a signal handler or another thread."""
        self._stop = True

    def close(self) -> None:
        self.request_stop()
        self.sock.close()
        for conn in self._handshakes:
            conn.close()
        self._handshakes.clear()

    # -- accept -----------------------------------------------------------------------
    def _check_key(
        self, conn: socket.socket, magic: int, key: str, matchkey: str
    ) -> list[str] | None:
        """Answer a whole handshake; the options after the key, or None if refused."""
        words = key.split()
        if magic != wire.RPC_MAGIC or not words or words[0] != "client:" + matchkey:
            with contextlib.suppress(OSError):
                conn.sendall(struct.pack("<i", wire.RPC_CODE_MISMATCH))
            log.warning("refused a client with key %r", key[:80])
            return None
        try:
            conn.sendall(wire.handshake_bytes(wire.RPC_MAGIC, "server:" + self.config.key))
        except OSError:
            return None
        conn.settimeout(None)
        return words[1:]

    def _drop_handshake(self, conn: socket.socket) -> None:
        self._handshakes.pop(conn, None)
        conn.close()

    def _take_connections(self) -> None:
        """Accept what waits; past :data:`MAX_HANDSHAKES` the oldest handshake is dropped."""
        for _ in range(MAX_HANDSHAKES):
            try:
                conn, addr = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of descriptors: the oldest handshakes make room
                log.warning("cannot accept (%s)", exc)
                for old in list(self._handshakes)[: MAX_HANDSHAKES // 4]:
                    self._drop_handshake(old)
                return
            if len(self._handshakes) >= MAX_HANDSHAKES:
                oldest = min(self._handshakes, key=lambda s: self._handshakes[s].deadline)
                self._drop_handshake(oldest)
            conn.settimeout(HANDSHAKE_S)  # the reply is small; a peer must take it in time
            deadline = time.monotonic() + HANDSHAKE_S
            self._handshakes[conn] = _Handshake((addr[0], addr[1]), deadline)

    def _step(self, conn: socket.socket, matchkey: str) -> list[str] | None:
        """Read what a handshaking peer sent; its options once whole and accepted."""
        state = self._handshakes[conn]
        try:
            data = conn.recv(8 + self.config.limits.max_key - len(state.buf))
        except OSError:
            data = b""
        if not data:
            self._drop_handshake(conn)
            return None
        state.buf += data
        if len(state.buf) < 8:
            return None
        magic, length = struct.unpack_from("<ii", state.buf)
        known = (wire.RPC_MAGIC, wire.RPC_CODE_DUPLICATE, wire.RPC_CODE_MISMATCH)
        if magic not in known or not 0 <= length <= self.config.limits.max_key:
            log.warning(
                "bad handshake from %s: magic %#x, key of %d bytes", state.addr, magic, length
            )
            self._drop_handshake(conn)
            return None
        if magic == wire.RPC_MAGIC and len(state.buf) < 8 + length:
            return None
        del self._handshakes[conn]
        key = bytes(state.buf[8 : 8 + length]).decode(errors="replace")
        opts = self._check_key(conn, magic, key if magic == wire.RPC_MAGIC else "", matchkey)
        if opts is None:
            conn.close()
        else:
            log.info("session from %s:%s", *state.addr)
        return opts

    def serve_forever(self) -> None:
        tracker: list[TrackerConnection | None] = [None]
        try:
            self._serve_loop(tracker)
        finally:  # stopping closes the tracker connection too
            if tracker[0] is not None:
                tracker[0].close()

    def _serve_loop(self, held: list[TrackerConnection | None]) -> None:
        tracker = held[0]
        while not self._stop:
            try:
                if self.config.tracker is not None and tracker is None:
                    tracker = held[0] = TrackerConnection(self.config.tracker)
                    tracker.update_info(self.config.key, self.config.custom_addr, self.port)
                accepted = self._accept(tracker)
            except (OSError, RPCError) as exc:
                if self._stop:
                    return
                log.warning("tracker connection lost (%s); reconnecting", exc)
                if tracker is not None:
                    tracker.close()
                    tracker = held[0] = None
                time.sleep(0.5)
                continue
            if accepted is not None:
                conn, opts = accepted
                self._serve_session(conn, opts)
                now = time.monotonic()  # who waited through the session gets a fresh deadline
                for state in self._handshakes.values():
                    state.deadline = now + HANDSHAKE_S

    def _accept(self, tracker: TrackerConnection | None) -> tuple[socket.socket, list[str]] | None:
        """The next client whose whole handshake came in time, key checked.

        Handshakes are read side by side, each bounded in total (:data:`HANDSHAKE_S`), so
        a peer that sends a byte now and then holds no one up.
        """
        key = self.config.key
        if tracker is not None:
            matchkey = f"{key}:{random.random()}"
            tracker.put(key, self.port, matchkey, self.config.custom_addr)
        else:
            matchkey = key
        unmatched = 0
        next_ping = time.monotonic() + _PING_PERIOD_S
        while not self._stop:
            now = time.monotonic()
            for conn in [c for c, st in self._handshakes.items() if st.deadline <= now]:
                log.warning(
                    "handshake from %s not done in %g s", self._handshakes[conn].addr, HANDSHAKE_S
                )
                self._drop_handshake(conn)
            wait = min([next_ping] + [st.deadline for st in self._handshakes.values()]) - now
            ready, _, _ = select.select([self.sock, *self._handshakes], [], [], max(wait, 0))
            for conn in ready:  # before accepting more, which may drop the oldest
                if conn is not self.sock and conn in self._handshakes:
                    opts = self._step(conn, matchkey)
                    if opts is not None:
                        return conn, opts
            if self.sock in ready:
                self._take_connections()
            if time.monotonic() >= next_ping:
                next_ping = time.monotonic() + _PING_PERIOD_S
                if tracker is not None:
                    pending = tracker.pending_matchkeys()
                    unmatched = 0 if matchkey in pending else unmatched + 1
                    if unmatched * _PING_PERIOD_S > _UNMATCH_TIMEOUT_S + _PING_PERIOD_S:
                        matchkey = f"{key}:{random.random()}"  # given out but never used
                        tracker.put(key, self.port, matchkey, self.config.custom_addr)
                        unmatched = 0
        return None

    # -- serve ------------------------------------------------------------------------
    def _serve_session(self, conn: socket.socket, opts: list[str]) -> None:
        """Serve ``conn`` in a child process (its own process group) until it ends.

        The session's folder (its uploads, and the libraries linked from them: the
        child's ``$TVMRT_CACHE_DIR`` is inside it) is removed when the session ends, is
        killed at its timeout, or the server is stopped (SIGTERM, Ctrl-C); the child and
        any compiler it started are killed first.
        """
        timeout = _session_timeout(opts)
        if self.config.timeout is not None:
            timeout = min(timeout or self.config.timeout, self.config.timeout)
        workdir = Path(tempfile.mkdtemp(prefix="tvmrt-rpc-", dir=self.config.workdir))
        pid = 0
        try:
            read_end, write_end = os.pipe()
            pid = os.fork()
            if pid == 0:  # the session
                code = 0
                try:
                    os.setpgid(0, 0)
                    _die_with_parent()
                    self.sock.close()
                    for other in self._handshakes:
                        other.close()
                    os.close(read_end)
                    os.environ["TVMRT_CACHE_DIR"] = str(workdir / ".cache")

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
            with contextlib.suppress(OSError):  # the child may have done it already
                os.setpgid(pid, pid)
            os.close(write_end)
            try:
                self._wait(pid, conn, timeout, read_end)
                pid = 0
            finally:
                os.close(read_end)
        finally:
            if pid:  # interrupted (SIGTERM): the session and its children go first
                _kill_group(pid)
            conn.close()
            shutil.rmtree(workdir, ignore_errors=True)

    def _wait(self, pid: int, conn: socket.socket, timeout: float | None, dialect_fd: int) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                with contextlib.suppress(OSError):  # a compiler it left behind (pid not reaped)
                    os.killpg(pid, signal.SIGKILL)
                _, status = os.waitpid(pid, 0)
                if os.WIFSIGNALED(status):
                    log.warning("session process died of signal %d", os.WTERMSIG(status))
                return
            if deadline is not None and time.monotonic() >= deadline:
                _kill_group(pid)
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
