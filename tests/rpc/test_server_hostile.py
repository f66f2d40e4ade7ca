"""Hostile peers and lifecycle of ``tvmrt rpc server`` (issue 31, items 7, 9 and 10).

A handshake is bounded in total, not per ``recv``; a tracker's hostile answer costs a
reconnect, not the server; the session's folder (uploads and the libraries linked from
them) is removed by SIGTERM; a restart gets its port back; a timed-out session's compiler
is killed with it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
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
from tvmrt import rpc
from tvmrt.error import RPCError
from tvmrt.rpc import server as server_module
from tvmrt.rpc import wire
from tvmrt.rpc.server import RPCServer, ServerConfig

HOST = "127.0.0.1"
SRC = str(Path(tvmrt.__file__).parents[1])


@contextlib.contextmanager
def cli_server(
    *args: str, env: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """``tvmrt rpc server ARGS`` of the tvmrt under test; yields the process and its port."""
    full = dict(os.environ, PYTHONPATH=SRC, **(env or {}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tvmrt", "rpc", "server", "--silent", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=full,
    )
    try:
        assert proc.stdout is not None
        found = re.search(r":(\d+)$", proc.stdout.readline().strip())
        assert found is not None, "the server did not start"
        yield proc, int(found.group(1))
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)
        if proc.stdout is not None:
            proc.stdout.close()


@contextlib.contextmanager
def thread_server(config: ServerConfig) -> Iterator[tuple[RPCServer, threading.Thread]]:
    server = RPCServer(config)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, thread
    finally:
        server.close()
        thread.join(10)


def test_a_trickled_handshake_holds_no_one_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """Five peers send one handshake byte every 0.3 s: an honest client is served at once,
    and each trickler is cut at the total deadline although it never paused 1 s."""
    monkeypatch.setattr(server_module, "HANDSHAKE_S", 1.5, raising=False)
    with thread_server(ServerConfig(port=0, port_end=0)) as (server, _):
        cut_after: list[float] = []

        def trickle() -> None:
            with socket.create_connection((HOST, server.port), timeout=10) as s:
                start = time.monotonic()
                raw = wire.handshake_bytes(wire.RPC_MAGIC, "client:" + "x" * 30)
                for byte in raw:  # bounded: 38 bytes, 11 s at most
                    try:
                        s.sendall(bytes([byte]))
                    except OSError:
                        break
                    time.sleep(0.3)
                    s.setblocking(False)
                    try:
                        if s.recv(1) == b"":
                            break
                    except BlockingIOError:
                        pass
                    except OSError:
                        break
                    finally:
                        s.setblocking(True)
                cut_after.append(time.monotonic() - start)

        tricklers = [threading.Thread(target=trickle) for _ in range(5)]
        for t in tricklers:
            t.start()
        time.sleep(0.5)
        start = time.monotonic()
        session = rpc.connect(HOST, server.port, session_timeout=20)
        assert session.listdir(".") == ""
        session.close()
        assert time.monotonic() - start < 3.0, "an honest client waited behind the tricklers"
        for t in tricklers:
            t.join(20)
        assert len(cut_after) == 5
        assert max(cut_after) < 5.0, f"tricklers held on for {max(cut_after):.1f} s"


def _hostile_tracker(answer: bytes, hits: list[int]) -> tuple[socket.socket, threading.Thread]:
    listener = socket.create_server((HOST, 0))
    listener.settimeout(20)

    def serve() -> None:
        for _ in range(3):  # bounded: three registrations, each answered with ``answer``
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                hits.append(1)
                conn.recv(4)
                conn.sendall(struct.pack("<i", wire.TRACKER_MAGIC))
                conn.recv(65536)  # UPDATE_INFO
                conn.sendall(struct.pack("<i", len(answer)) + answer)
                with contextlib.suppress(OSError):
                    conn.recv(1)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread


@pytest.mark.parametrize(
    "answer",
    [b"[" * 50000 + b"]" * 50000, b"Infinity", b"\xff\xfe"],
    ids=["nested", "inf", "bytes"],
)
def test_a_hostile_tracker_answer_costs_a_reconnect_not_the_server(answer: bytes) -> None:
    hits: list[int] = []
    listener, tracker = _hostile_tracker(answer, hits)
    config = ServerConfig(port=0, port_end=0, key="board", tracker=listener.getsockname())
    with thread_server(config) as (_, thread):
        for _ in range(100):
            if len(hits) >= 2:
                break
            time.sleep(0.1)
        assert thread.is_alive(), "the server stopped on its tracker's answer"
        assert len(hits) >= 2, "the server did not register again"
    listener.close()
    tracker.join(10)


def _session_dirs(workdir: Path) -> list[Path]:
    return [p for p in workdir.iterdir() if p.name.startswith("tvmrt-rpc-")]


def test_sigterm_removes_the_session_folder(tmp_path: Path) -> None:
    with cli_server("--port", "0", "--workdir", str(tmp_path)) as (proc, port):
        session = rpc.connect(HOST, port)
        session.upload(b"\0" * (1 << 20), "weights.bin")
        assert len(_session_dirs(tmp_path)) == 1
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
        with contextlib.suppress(RPCError):
            session.close()
    assert _session_dirs(tmp_path) == []


def test_a_restarted_server_gets_its_port_back() -> None:
    with cli_server("--port", "0", "--key", "k") as (proc, port):
        # a refused key: the server closes first, so its side of the port is in TIME_WAIT
        with socket.create_connection((HOST, port), timeout=10) as s:
            s.sendall(wire.handshake_bytes(wire.RPC_MAGIC, "client:other"))
            assert struct.unpack("<i", s.recv(4)) == (wire.RPC_CODE_MISMATCH,)
            assert s.recv(1) == b""
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
    with cli_server("--port", str(port), "--port-end", str(port + 1), "--key", "k") as (_, again):
        assert again == port


def _object_file(folder: Path) -> Path:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    (folder / "k.c").write_text("int tvmrt_test_symbol(void) { return 7; }\n")
    subprocess.run([cc, "-c", "-fPIC", "-o", str(folder / "k.o"), str(folder / "k.c")], check=True)
    return folder / "k.o"


def test_linked_uploads_live_in_the_session_folder(tmp_path: Path) -> None:
    obj = _object_file(tmp_path)
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    env = {"TVMRT_CACHE_DIR": str(cache)}
    with cli_server("--port", "0", "--workdir", str(work), env=env) as (_, port):
        session = rpc.connect(HOST, port)
        session.upload(str(obj))
        linked = session.download_linked_module("k.o")
        assert linked[:4] == b"\x7fELF"
        (folder,) = _session_dirs(work)
        assert list(folder.glob(".cache/**/*.so")), "the linked library is not in the session"
        session.close()
        for _ in range(100):
            if not _session_dirs(work):
                break
            time.sleep(0.1)
    assert not cache.exists() or not list(cache.rglob("*.so")), "linked outside --workdir"
    assert _session_dirs(work) == []


def test_a_timed_out_session_kills_its_compiler(tmp_path: Path) -> None:
    obj = _object_file(tmp_path)
    marker = tmp_path / "cc.pid"
    slow = tmp_path / "slowcc"
    slow.write_text(f"#!/bin/sh\necho $$ > {marker}\nexec sleep 60\n")
    slow.chmod(0o755)
    env = {"CC": str(slow), "TVMRT_CACHE_DIR": str(tmp_path / "cache")}
    with cli_server("--port", "0", "--workdir", str(tmp_path), env=env) as (_, port):
        session = rpc.connect(HOST, port, session_timeout=2)
        session.upload(str(obj))
        with pytest.raises(RPCError):
            session.download_linked_module("k.o")
        pid = int(marker.read_text())
        alive = True
        for _ in range(50):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                alive = False
                break
            time.sleep(0.1)
        if alive:
            os.kill(pid, signal.SIGKILL)
        assert not alive, "the session's compiler outlived the session"


def test_a_session_folder_is_bounded(tmp_path: Path) -> None:
    with cli_server("--port", "0", "--workdir", str(tmp_path), "--max-workdir-mb", "1") as (
        _,
        port,
    ):
        session = rpc.connect(HOST, port)
        session.upload(b"\1" * 600_000, "a.bin")
        with pytest.raises(RPCError, match=r"may hold 1048576 .*--max-workdir-mb"):
            session.upload(b"\2" * 600_000, "b.bin")
        session.upload(b"\3" * 600_000, "a.bin")  # replacing a file frees its bytes
        session.remove("a.bin")
        session.upload(b"\4" * 600_000, "b.bin")  # the session went on
        assert session.listdir(".") == "b.bin,"
        session.close()
