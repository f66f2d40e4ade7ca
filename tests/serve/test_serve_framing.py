"""Issue 31 item 13 against a real ``tvmrt serve`` (the committed digits model) on 127.0.0.1: a request
framed two ways is answered and its connection closed (RFC 9112 6.1), and a small
``--max-body-mb`` starts, or a bad combination is refused naming the flags."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import tvmrt
from support.serve import read_reply, status_of, tvmrt_serve

pytest.importorskip("uvicorn")

SRC = str(Path(tvmrt.__file__).parents[1])  # the tvmrt under test, also in the server
# the repository's own model: framing and flags need a model, not a particular one
MODEL = str(Path(__file__).parents[2] / "examples" / "digits" / "model")


def _serve(*flags: str):  # type: ignore[no-untyped-def]
    return tvmrt_serve(MODEL, "--name", "mb", "--threads", "1", *flags, env={"PYTHONPATH": SRC})


def test_both_transfer_encoding_and_content_length_are_answered_then_closed() -> None:
    smuggled = b"GET /v2/health/live HTTP/1.1\r\nHost: a\r\n\r\n"
    request = (
        b"POST /v2/models/mb/infer HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
        b"Content-Length: 5\r\n\r\n0\r\n\r\n" + smuggled
    )
    with _serve() as served, served.connect() as sock:
        sock.sendall(request)
        raw = read_reply(sock, 8)
    assert raw.count(b"HTTP/1.1 ") == 1, f"a second request ran: {raw[:400]!r}"
    assert status_of(raw) == 400
    assert b"connection: close" in raw.lower()


def test_a_small_max_body_starts() -> None:
    with _serve("--max-body-mb", "1") as served, served.connect() as sock:
        # the declared length is refused before the body is read; the body is not sent:
        # the server closes after answering, and bytes of it still unread there would
        # reset the connection under the client's feet (it then may never read the 413)
        head = b"POST /v2/models/mb/infer HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n"
        sock.sendall(head % (2 << 20))
        raw = read_reply(sock, 8)
    assert status_of(raw) == 413, raw[:300]
    assert b"exceeds the limit of 1048576 bytes" in raw


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (
            ("--max-body-mb", "1", "--max-json-mb", "2"),
            "--max-json-mb 2 must be at most --max-body-mb 1",
        ),
        (
            ("--max-body-mb", "8", "--max-inflight-mb", "4"),
            "--max-inflight-mb 4 must be at least --max-body-mb 8",
        ),
        (("--max-body-mb", "0"), "--max-body-mb 0: expected a positive size in MiB"),
    ],
)
def test_bad_size_flags_name_the_flags(flags: tuple[str, ...], words: str) -> None:
    env = dict(os.environ, PYTHONPATH=SRC)
    done = subprocess.run(
        [sys.executable, "-m", "tvmrt", "serve", MODEL, *flags],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert words in done.stderr
