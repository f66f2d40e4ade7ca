"""Hostile peers of the tracker: one peer's bytes close that peer only, and nobody can stall,
grow or exhaust the tracker for the others (issue 31, items 6 and 8)."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import tvmrt
from tvmrt.error import RPCError, RPCProtocolError
from tvmrt.rpc import tracker as tracker_module
from tvmrt.rpc import wire
from tvmrt.rpc.tracker import Tracker
from tvmrt.rpc.tracker_client import TrackerConnection, recv_json, send_json

HOST = "127.0.0.1"


@contextlib.contextmanager
def running(limits: object = None) -> Iterator[tuple[Tracker, threading.Thread]]:
    t = Tracker(HOST, 0, 0) if limits is None else Tracker(HOST, 0, 0, limits=limits)
    thread = threading.Thread(target=t.serve_forever, daemon=True)
    thread.start()
    try:
        yield t, thread
    finally:
        t.stop()
        thread.join(5)


def _raw(port: int, body: bytes) -> bytes:
    """Send one frame after the magic; what came back before the tracker closed."""
    with socket.create_connection((HOST, port), timeout=10) as s:
        s.sendall(struct.pack("<ii", wire.TRACKER_MAGIC, len(body)) + body)
        data = b""
        while part := s.recv(4096):
            data += part
        return data


def _ping_s(port: int) -> float:
    conn = TrackerConnection((HOST, port), timeout=30)
    start = time.monotonic()
    assert conn.call(1) == 0
    took = time.monotonic() - start
    conn.close()
    return took


@pytest.mark.parametrize(
    "body",
    [
        b'[4, "k", "", Infinity]',  # priority Infinity: OverflowError in int()
        b'[3, "k", [Infinity, "k:1"], null]',  # port Infinity
        b'[3, "k", [1e400, "k:1"], null]',
        b'[4, "k", "", NaN]',
        b'[4, "k", "", 99999999999999999999999]',
        b"[" * 30000 + b"]" * 30000,  # nesting: RecursionError in json.loads
        b"[5, [1, 2, 3]]",  # UPDATE_INFO of something that is not a mapping
        b'[3, "k"]',
        b'[4, "' + b"k" * 300 + b'", "", 1]',  # a key over the limit
    ],
    ids=[
        "prio-inf",
        "port-inf",
        "port-1e400",
        "prio-nan",
        "prio-huge",
        "nested",
        "info",
        "short-put",
        "long-key",
    ],
)
def test_a_hostile_message_closes_its_peer_only(body: bytes) -> None:
    with running() as (t, thread):
        server = TrackerConnection((HOST, t.port), timeout=10)
        server.put("board", 9000, "board:1", None)
        assert _raw(t.port, body) == struct.pack("<i", wire.TRACKER_MAGIC)
        assert thread.is_alive()
        assert _ping_s(t.port) < 5
        # the honest server's registration is untouched
        assert server.pending_matchkeys() == ["board:1"]
        server.close()


def test_peers_that_never_read_do_not_stall_the_others() -> None:
    """Three peers pipeline SUMMARY requests and never read: honest PINGs stay fast."""
    with running() as (t, thread):
        # state that makes SUMMARY large (about 75 KB)
        holders = [TrackerConnection((HOST, t.port), timeout=10) for _ in range(10)]
        for i, h in enumerate(holders):
            for j in range(60):
                send_json(h.sock, [4, f"{i}-{j}-" + "x" * 110, "", 1])
            assert h.call(1) == 0  # its requests are in
        assert len(json.dumps(holders[0].summary())) > 60_000
        sinks = []
        for _ in range(3):
            s = socket.create_connection((HOST, t.port), timeout=10)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            frame = struct.pack("<i", 3) + b"[6]"
            s.sendall(struct.pack("<i", wire.TRACKER_MAGIC) + frame * 200)
            sinks.append(s)
        worst = max(_ping_s(t.port) for _ in range(20))
        assert worst < 3.0, f"an honest PING took {worst:.1f} s (a stalled tracker: 10 s)"
        assert thread.is_alive()
        for s in sinks + [h.sock for h in holders]:
            s.close()


def test_keys_of_closed_connections_are_forgotten_and_summary_stays_small() -> None:
    with running() as (t, _):
        for i in range(100):
            c = TrackerConnection((HOST, t.port), timeout=10)
            for j in range(20):
                send_json(c.sock, [4, f"throwaway-{i}-{j}", "", 1])
            assert c.call(1) == 0  # the requests were read before the close
            c.close()
        probe = TrackerConnection((HOST, t.port), timeout=10)
        for _ in range(100):
            if not probe.summary()["queue_info"]:
                break
            time.sleep(0.05)
        assert probe.summary() == {"queue_info": {}, "server_info": []}
        assert t.queues == {}
        probe.close()


def test_per_connection_and_key_limits_close_the_greedy_peer() -> None:
    limits = tracker_module.TrackerLimits(max_keys=8, max_per_conn=4)
    with running(limits) as (t, thread):
        greedy = TrackerConnection((HOST, t.port), timeout=10)
        for j in range(10):
            send_json(greedy.sock, [4, f"k{j}", "", 1])
        with pytest.raises((ConnectionError, OSError, RPCError)):
            greedy.call(1)
        greedy.close()
        assert len(t.queues) <= 4
        assert thread.is_alive()
        assert _ping_s(t.port) < 5


def test_handshake_and_frames_have_a_total_deadline() -> None:
    with running(tracker_module.TrackerLimits(deadline_s=0.5)) as (t, _):
        trickler = socket.create_connection((HOST, t.port), timeout=10)
        half = socket.create_connection((HOST, t.port), timeout=10)
        half.sendall(struct.pack("<ii", wire.TRACKER_MAGIC, 100) + b"[1")
        assert half.recv(4) == struct.pack("<i", wire.TRACKER_MAGIC)
        start = time.monotonic()
        for byte in struct.pack("<i", wire.TRACKER_MAGIC)[:3]:
            trickler.sendall(bytes([byte]))
            time.sleep(0.2)
        trickler.settimeout(5)
        assert trickler.recv(4) == b""  # closed, though a byte came every 0.2 s
        assert half.recv(4) == b""
        assert time.monotonic() - start < 3
        trickler.close()
        half.close()


def test_the_tracker_survives_running_out_of_file_descriptors() -> None:
    """Under a 64-descriptor limit, 100 idle connections: the excess is refused, the
    tracker lives, and serves again once they leave."""
    env = dict(os.environ, PYTHONPATH=str(Path(tvmrt.__file__).parents[1]))

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    proc = subprocess.Popen(
        [sys.executable, "-m", "tvmrt", "rpc", "tracker", "--port", "0", "--silent"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        preexec_fn=limit,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().rsplit(":", 1)[1])
        idle = []
        for _ in range(100):
            with contextlib.suppress(OSError):
                s = socket.create_connection((HOST, port), timeout=10)
                idle.append(s)
                s.sendall(struct.pack("<i", wire.TRACKER_MAGIC))
        time.sleep(1.0)
        assert proc.poll() is None, "the tracker exited"
        for s in idle:
            s.close()
        time.sleep(0.5)
        assert _ping_s(port) < 5
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


def test_recv_json_refuses_deep_nesting_as_a_protocol_error() -> None:
    a, b = socket.socketpair()
    with a, b:
        body = b"[" * 50000 + b"]" * 50000
        a.sendall(struct.pack("<i", len(body)) + body)
        with pytest.raises(RPCProtocolError, match="not JSON"):
            recv_json(b)
