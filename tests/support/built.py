"""Fixtures that TVM 0.16 builds once: a script run by the peer's Python into a folder.

``built(script, name)`` runs ``script OUT`` in the TVM 0.16 peer (tests/support/peers.py)
into ``build/<name>/<sha256 of the script>`` unless that folder already holds its
``done`` file (the script writes it last); builds take a file lock, so parallel test runs
build once, and a failed build leaves nothing behind.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
from pathlib import Path

from support.paths import REPO
from support.peers import tvm016_python

__all__ = ["built"]


def built(script: Path, name: str) -> Path:
    """The folder of the script's outputs (built now if missing)."""
    digest = hashlib.sha256(script.read_bytes()).hexdigest()[:16]
    root = REPO / "build" / name / digest
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (root / "done").is_file():
            return root
        shutil.rmtree(root, ignore_errors=True)
        done = subprocess.run(
            [str(tvm016_python()), str(script), str(root)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0 or not (root / "done").is_file():
            shutil.rmtree(root, ignore_errors=True)
            raise RuntimeError(f"building {name} fixtures failed:\n{done.stderr[-3000:]}")
    return root
