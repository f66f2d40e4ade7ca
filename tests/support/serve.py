"""Helpers for the hostile-client tests: a real ``tvmrt serve`` on 127.0.0.1, raw sockets."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from support.paths import REPO
from tvmrt.serve.server import free_port

HOST = "127.0.0.1"  # these tests never talk to any other address


@dataclass
class Served:
    """A running ``tvmrt serve``: its port and process; ``stderr`` once it has stopped."""

    port: int
    proc: subprocess.Popen[str]
    stderr: str = ""
    stopped_in: float = 0.0
    logs: list[dict[str, object]] = field(default_factory=list)

    def vm_hwm(self) -> int:
        """Peak resident memory of the server process, bytes (``VmHWM``)."""
        return _status_kb(self.proc.pid, "VmHWM") * 1024

    def vm_rss(self) -> int:
        return _status_kb(self.proc.pid, "VmRSS") * 1024

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 30,
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def connect(self, timeout: float = 10) -> socket.socket:
        return socket.create_connection((HOST, self.port), timeout=timeout)

    def stop(self) -> None:
        """SIGTERM; waits (60 s at most) and records ``stopped_in``, ``stderr`` and ``logs``."""
        if self.proc.poll() is not None:
            return
        start = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            _, self.stderr = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, self.stderr = self.proc.communicate()
        self.stopped_in = time.monotonic() - start
        self.logs = [json.loads(ln) for ln in self.stderr.splitlines() if ln.startswith("{")]


def _status_kb(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {key} in /proc/{pid}/status")


def post_json(
    url: str,
    path: str,
    doc: object,
    conn: http.client.HTTPConnection | None = None,
    parse: Callable[[bytes], Any] = json.loads,
) -> tuple[int, dict[str, str], Any]:
    """(status, headers, parsed body) of a JSON POST to the server at ``url``
    (``http://host:port``); reuses ``conn`` when given."""
    own = conn is None
    if conn is None:
        host, port = url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("POST", path, body=json.dumps(doc).encode())
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), parse(resp.read())
    finally:
        if own:
            conn.close()


def read_reply(sock: socket.socket, limit: float = 10) -> bytes:
    """Everything the server sends until it closes the connection (or ``limit`` s pass)."""
    sock.settimeout(limit)
    data = b""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except (TimeoutError, ConnectionResetError):
            break
        if not chunk:
            break
        data += chunk
    return data


def split_answers(raw: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """The answers in ``raw`` (one connection's bytes, each with a ``Content-Length``):
    status, headers in lower case without ``date``, body."""
    out = []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = dict(ln.lower().split(": ", 1) for ln in lines[1:])
        size = int(headers["content-length"])
        headers.pop("date")
        out.append((int(lines[0].split(" ")[1]), headers, rest[:size]))
        raw = rest[size:]
    return out


def status_of(raw: bytes) -> int:
    return int(raw.split(b" ", 2)[1]) if raw.startswith(b"HTTP/") else 0


def error_of(raw: bytes) -> str:
    return str(json.loads(raw.split(b"\r\n\r\n", 1)[1])["error"])


@contextmanager
def tvmrt_serve(
    *args: str, ready_seconds: float = 60, env: dict[str, str] | None = None
) -> Iterator[Served]:
    """``tvmrt serve ARGS --port P`` on 127.0.0.1; SIGTERM on exit, recording how long it took.

    ``env`` adds to (or overrides) the server's environment, e.g. ``TVMRT_CACHE_DIR``.
    """
    port = free_port(HOST)
    command = [sys.executable, "-m", "tvmrt", "serve", *args, "--host", HOST, "--port", str(port)]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), **(env or {})}
    with served_command(command, port, env, ready_seconds) as served:
        yield served


@contextmanager
def served_command(
    command: list[str], port: int, env: dict[str, str], ready_seconds: float = 60
) -> Iterator[Served]:
    """A server process started by ``command`` (its whole environment ``env``) that serves
    on 127.0.0.1:``port``, once it answers ``/v2/health/ready``; stopped as
    :meth:`Served.stop` does on exit."""
    proc = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    served = Served(port, proc)
    try:
        deadline = time.monotonic() + ready_seconds
        while True:
            try:
                if served.request("GET", "/v2/health/ready", timeout=5)[0] == 200:
                    break
            except OSError:
                pass
            if proc.poll() is not None:
                pytest.fail(f"the server exited with {proc.returncode}: {proc.stderr.read()}")  # type: ignore[union-attr]
            assert time.monotonic() < deadline, f"the server was not ready in {ready_seconds} s"
            time.sleep(0.1)
        yield served
    finally:
        served.stop()
