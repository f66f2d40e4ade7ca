"""Start ``tvmrt rpc server`` / ``tvmrt rpc tracker`` in a subprocess; run peers' clients."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from support.paths import REPO

__all__ = ["PEER_ENV", "run_peer", "tvmrt_rpc"]

# a peer's python must not see this checkout's tvmrt on its path
PEER_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


@contextmanager
def tvmrt_rpc(
    command: str, *args: str, timeout: float = 30
) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """Run ``tvmrt rpc COMMAND ARGS --port 0``; yields the process and its port."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    # the log goes to a file: a pipe nobody reads would fill and stall the server
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tvmrt", "rpc", command, "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=env,
        )
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            found = re.search(r"listening on .*:(\d+)", line)
            if found is None:
                proc.kill()
                log.seek(0)
                raise AssertionError(f"tvmrt rpc {command} did not start: {line!r} {log.read()}")
            yield proc, int(found.group(1))
        finally:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


def run_peer(
    python: Path | str, script: str, *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` (Python source) under a peer's interpreter, without our PYTHONPATH."""
    return subprocess.run(
        [str(python), "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=PEER_ENV,
        check=False,
    )
