"""``python -m tvmrt.exec.rpc_server`` and ``tvmrt rpc server``: TVM's flags, usage errors."""

from __future__ import annotations

import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time

from support.cli import tvmrt
from support.paths import REPO
from tvmrt.rpc import wire
from tvmrt.rpc.server import RPCServer, ServerConfig


def test_exec_rpc_server_serves_and_refuses_a_wrong_key() -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    proc = subprocess.Popen(
        [sys.executable, "-m", "tvmrt.exec.rpc_server", "--port", "0", "--key", "k1", "--silent"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        found = re.search(r"listening on 127\.0\.0\.1:(\d+)", proc.stdout.readline())
        assert found is not None
        port = int(found.group(1))
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(wire.handshake_bytes(wire.RPC_MAGIC, "client:other"))
            assert struct.unpack("<i", s.recv(4)) == (wire.RPC_CODE_MISMATCH,)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(wire.handshake_bytes(wire.RPC_MAGIC, "client:k1 -timeout=5"))
            assert wire.recv_handshake(s) == (wire.RPC_MAGIC, "server:k1")
    finally:
        proc.terminate()
        try:
            proc.wait(30)  # SIGTERM ends it
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
            if proc.stdout is not None:
                proc.stdout.close()


def test_bad_flags_are_usage_errors() -> None:
    result = tvmrt("rpc", "server", "--tracker", "nohostport")
    assert result.returncode == 2
    assert "--tracker 'nohostport': expected HOST:PORT" in result.stderr
    result = tvmrt("rpc", "server", "--max-alloc-mb", "0")
    assert result.returncode == 2
    assert "--max-alloc-mb 0" in result.stderr


def test_request_stop_ends_serve_forever_within_its_wake_up() -> None:
    # what SIGTERM's handler relies on when its interrupt is lost in a finalizer
    server = RPCServer(ServerConfig(port=0))
    loop = threading.Thread(target=server.serve_forever, daemon=True)
    loop.start()
    time.sleep(0.2)
    start = time.monotonic()
    server.request_stop()
    loop.join(10)
    server.close()
    assert not loop.is_alive()
    assert time.monotonic() - start < 3  # the accept loop wakes at least every 2 s
