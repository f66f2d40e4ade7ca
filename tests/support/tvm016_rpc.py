"""TVM 0.16's own RPC server and tracker (``python -m tvm.exec.rpc_*`` from the peer venv),
and TVM 0.27's server (``apache-tvm``, a test dependency of this venv).

Each runs as a subprocess on 127.0.0.1 and is ready once it logs the port it bound;
the context managers stop it (and its forked workers) on exit.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from support.peers import tvm016_python
from tvmrt.serve.server import free_port

__all__ = ["HOST", "Peer", "tvm016_rpc_server", "tvm016_rpc_tracker"]

HOST = "127.0.0.1"
_BOUND = re.compile(r"bind to [0-9.]+:(\d+)")


@dataclass
class Peer:
    """A running TVM process: the port it listens on and its log so far."""

    port: int
    proc: subprocess.Popen[bytes]
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")


@contextmanager
def _spawn(
    args: list[str], log: Path, ready_timeout: float = 60, python: Path | None = None
) -> Iterator[Peer]:
    python = python or tvm016_python()
    env = dict(os.environ, TVM_NUM_THREADS="1", OMP_NUM_THREADS="1", TOPHUB_LOCATION="NONE")
    env.pop("PYTHONPATH", None)  # the peer's own tvm, never this checkout's tvmrt
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(python), "-m", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its forked session workers go with it
        )
    try:
        deadline = time.monotonic() + ready_timeout
        while True:
            found = _BOUND.search(log.read_text(errors="replace"))
            if found:
                yield Peer(int(found.group(1)), proc, log)
                return
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{' '.join(args[:1])} did not start:\n{log.read_text()}")
            time.sleep(0.1)
    finally:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@contextmanager
def tvm016_rpc_server(
    workdir: Path,
    tracker: int | None = None,
    key: str = "",
    extra: tuple[str, ...] = (),
    python: Path | None = None,
) -> Iterator[Peer]:
    """TVM 0.16's ``rpc_server`` on 127.0.0.1 (registered with ``tracker`` under ``key``);
    another TVM's with ``python`` (an interpreter with that TVM installed)."""
    port = free_port(HOST)
    args = ["tvm.exec.rpc_server", "--host", HOST, "--port", str(port)]
    args += ["--port-end", str(port + 1)]
    if tracker is not None:
        args += ["--tracker", f"{HOST}:{tracker}", "--key", key]
    with _spawn([*args, *extra], workdir / f"tvm-server-{port}.log", python=python) as peer:
        yield peer


@contextmanager
def tvm016_rpc_tracker(workdir: Path) -> Iterator[Peer]:
    """TVM 0.16's ``rpc_tracker`` on 127.0.0.1."""
    port = free_port(HOST)
    args = [
        "tvm.exec.rpc_tracker",
        "--host",
        HOST,
        "--port",
        str(port),
        "--port-end",
        str(port + 1),
    ]
    with _spawn(args, workdir / f"tvm016-tracker-{port}.log") as peer:
        yield peer
