"""The connection and header limits under each of uvicorn's HTTP protocols (``--http``).

One real ``tvmrt serve`` per protocol (the repository's digits model) on 127.0.0.1, with
a cap of 40 connections, a 1 s header deadline and the default 16 KiB header cap. Every
hostile input is made here; sizes come from TVMRT_SERVE_HOSTILE_* with small defaults.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import tvmrt
from support.serve import Served, error_of, read_reply, status_of, tvmrt_serve

pytest.importorskip("uvicorn")

SRC = str(Path(tvmrt.__file__).parents[1])  # the tvmrt under test, also in the server
MODEL = str(Path(__file__).parents[2] / "examples" / "digits" / "model")
HEADER_MB = int(os.environ.get("TVMRT_SERVE_HOSTILE_HEADER_MB", "16"))
SLOW = min(int(os.environ.get("TVMRT_SERVE_HOSTILE_SLOW", "32")), 39)  # under the cap
CONNECTIONS = 40
PIPELINED_MB = int(os.environ.get("TVMRT_SERVE_HOSTILE_PIPELINED_MB", "256"))
CAP = 16 << 10  # ServeLimits.max_header_bytes
LIVE = b"GET /v2/health/live HTTP/1.1\r\nHost: a\r\n\r\n"
PROTOCOLS = ["httptools", "h11"]


@pytest.fixture(scope="module", params=PROTOCOLS)
def served(request: pytest.FixtureRequest) -> Iterator[Served]:
    if request.param == "httptools":
        pytest.importorskip("httptools")
    flags = ("--max-connections", str(CONNECTIONS), "--header-timeout", "1")
    flags += ("--http", request.param, "--log-level", "warning")  # no line per request
    with tvmrt_serve(
        MODEL, "--name", "mb", "--threads", "1", *flags, env={"PYTHONPATH": SRC}
    ) as server:
        yield server


def _live_ok(served: Served) -> None:
    deadline = time.monotonic() + 5
    while True:  # the server sees earlier closes shortly after they happen
        try:
            if served.request("GET", "/v2/health/live", timeout=5)[0] == 200:
                return
        except OSError:
            pass
        assert time.monotonic() < deadline, "the server stopped answering"
        time.sleep(0.1)


@pytest.mark.parametrize("http", PROTOCOLS)
def test_the_chosen_protocol_serves_and_is_logged(http: str) -> None:
    if http == "httptools":
        pytest.importorskip("httptools")
    with tvmrt_serve(MODEL, "--name", "mb", "--http", http, env={"PYTHONPATH": SRC}) as served:
        assert served.request("GET", "/v2/health/ready")[0] == 200
        served.stop()
    started = next(e for e in served.logs if e.get("msg") == "serving")
    assert started["http"] == http


def test_one_connection_over_the_cap_gets_503(served: Served) -> None:
    held = [served.connect() for _ in range(CONNECTIONS)]
    try:
        with served.connect() as extra:
            raw = read_reply(extra, 5)
        assert status_of(raw) == 503
        assert error_of(raw) == f"the server holds {CONNECTIONS} connections at most"
    finally:
        for s in held:
            s.close()
    _live_ok(served)


def test_headers_trickling_past_the_deadline_get_408(served: Served) -> None:
    socks = [served.connect() for _ in range(SLOW)]
    open_ = set(range(SLOW))
    start = time.monotonic()
    line = b"GET /v2/health/live HTTP/1.1\r\nX-Slow: " + b"a" * 1000
    sent = 0
    while open_ and time.monotonic() - start < 4:  # a byte every 0.1 s from each
        for i in list(open_):
            try:
                socks[i].sendall(line[sent : sent + 1])
            except OSError:
                open_.discard(i)  # closed by the server: what we want
        sent += 1
        time.sleep(0.1)
    assert not open_ or time.monotonic() - start < 4, f"{len(open_)} slow clients still open"
    replies = [read_reply(s, 2) for s in socks]
    for s in socks:
        s.close()
    assert all(status_of(r) in (0, 408) for r in replies)  # 0: reset before we read
    assert sum(status_of(r) == 408 for r in replies) >= SLOW // 2
    message = "the request headers did not arrive within 1 s"
    assert all(error_of(r) == message for r in replies if r)
    _live_ok(served)


def test_the_deadline_rearms_on_a_kept_alive_connection(served: Served) -> None:
    with served.connect() as sock:
        sock.sendall(LIVE)
        time.sleep(0.5)
        sock.sendall(b"GET /v2/health/live HTTP/1.1\r\n")  # and no more
        raw = read_reply(sock, 4)
    assert raw.count(b"HTTP/1.1 200") == 1
    assert b"HTTP/1.1 408" in raw


def test_headers_streamed_past_the_cap_are_refused_and_memory_stays_flat(served: Served) -> None:
    chunk = b"a" * (64 << 10)
    before = served.vm_hwm()

    def hostile() -> bytes:
        with served.connect() as s:
            try:
                s.sendall(b"GET /v2/health/live HTTP/1.1\r\nX-Big: ")
                for _ in range(HEADER_MB * 16):
                    s.sendall(chunk)
            except OSError:
                pass
            return read_reply(s, 5)

    with ThreadPoolExecutor(4) as pool:
        replies = list(pool.map(lambda _: hostile(), range(4)))
    grown = served.vm_hwm() - before
    assert grown < 16 << 20, f"4 x {HEADER_MB} MiB headers grew peak RSS by {grown >> 20} MiB"
    assert any(replies), "no hostile client got an answer"
    for raw in replies:
        if raw:  # a reset instead of the answer is fine: the server closed first
            assert status_of(raw) == 400
            assert error_of(raw) == f"invalid HTTP request: malformed, or headers over {CAP} bytes"
    _live_ok(served)


@pytest.mark.parametrize("split", [False, True], ids=["one-read", "many-headers"])
def test_headers_over_the_cap_in_one_read_are_refused(served: Served, split: bool) -> None:
    if split:  # many small headers, each well under the cap
        extra = b"".join(b"X-H%d: %s\r\n" % (i, b"b" * 100) for i in range(200))
    else:
        extra = b"X-Big: " + b"a" * (CAP + 100) + b"\r\n"
    with served.connect() as sock:
        sock.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: a\r\n" + extra + b"\r\n")
        raw = read_reply(sock, 5)
    assert status_of(raw) == 400
    assert "headers over" in error_of(raw)


def test_headers_under_the_cap_and_pipelined_requests_are_served(served: Served) -> None:
    near = (
        b"GET /v2/health/live HTTP/1.1\r\nHost: a\r\nX-Near: " + b"n" * (CAP - 2000) + b"\r\n\r\n"
    )
    with served.connect() as sock:
        sock.sendall(
            near + LIVE + LIVE.replace(b"HTTP/1.1\r\n", b"HTTP/1.1\r\nConnection: close\r\n")
        )
        raw = read_reply(sock, 5)
    assert raw.count(b"HTTP/1.1 200 OK") == 3, raw[:600]


def test_a_request_framed_two_ways_is_answered_then_closed(served: Served) -> None:
    request = (
        b"POST /v2/models/mb/infer HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
        b"Content-Length: 5\r\n\r\n0\r\n\r\n" + LIVE
    )
    with served.connect() as sock:
        sock.sendall(request)
        raw = read_reply(sock, 8)
    assert raw.count(b"HTTP/1.1 ") == 1, f"a second request ran: {raw[:400]!r}"
    assert status_of(raw) == 400


def test_an_unknown_protocol_is_refused_before_loading() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tvmrt", "serve", MODEL, "--http", "h3"],
        env={**os.environ, "PYTHONPATH": SRC},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "--http: invalid choice: 'h3'" in proc.stderr


def test_a_client_that_never_reads_its_answers_cannot_grow_the_server(served: Served) -> None:
    """Small requests pipelined without reading a byte: once the answers fill the socket,
    the server stops reading (it must not buffer answers without end)."""
    meta = json.loads(served.request("GET", "/v2/models/mb")[2])
    spec = meta["inputs"][0]
    shape = [1 if d == -1 else d for d in spec["shape"]]
    data = [0.5] * int(np.prod(shape))
    body = json.dumps(
        {
            "inputs": [
                {"name": spec["name"], "shape": shape, "datatype": spec["datatype"], "data": data}
            ]
        }
    ).encode()
    request = b"POST /v2/models/mb/infer HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n" % len(
        body
    )
    burst = (request + body) * max(1, (1 << 20) // len(request + body))
    for _ in range(3):  # the model's runs become short enough to be answered directly
        assert served.request("POST", "/v2/models/mb/infer", body)[0] == 200
    before = served.vm_hwm()
    sent = 0
    with served.connect(timeout=2) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
        start = time.monotonic()
        try:
            while sent < (PIPELINED_MB << 20) and time.monotonic() - start < 20:
                sock.sendall(burst)
                sent += len(burst)
        except (TimeoutError, OSError):
            pass  # the server stopped reading: what we want
    grown = served.vm_hwm() - before
    assert sent < (PIPELINED_MB << 20), f"the server read all {sent >> 20} MiB of requests"
    assert grown < 32 << 20, f"unread answers grew peak RSS by {grown >> 20} MiB"
    _live_ok(served)


def test_a_pipelined_request_split_across_reads_is_answered(served: Served) -> None:
    """A whole request, then part of the next: the server reads on for the rest of it."""
    body = b'{"inputs": []}'
    post = b"POST /v2/models/mb/infer HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n" % len(body)
    second = post + body
    with served.connect() as sock:
        for cut in (10, len(post) + 3):  # inside the headers, inside the body
            sock.sendall(LIVE + second[:cut])
            time.sleep(0.3)
            sock.sendall(second[cut:])
            got = b""
            deadline = time.monotonic() + 5
            while got.count(b"HTTP/1.1 ") < 2 or not got.endswith(b"}"):
                assert time.monotonic() < deadline, got
                got += sock.recv(65536)
            assert got.startswith(b"HTTP/1.1 200")
            assert got.count(b"HTTP/1.1 400") == 1  # the second: no inputs, a 400 answer
