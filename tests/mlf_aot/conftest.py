"""The MLF AOT fixtures: built once with TVM 0.16 (tests/mlf_aot/build_fixtures.py).

They are cached under ``build/mlf_aot/<sha256 of the build script>``; a build runs under
a file lock, so parallel test runs build once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from support.paths import REPO
from support.peers import tvm016_python

SCRIPT = Path(__file__).with_name("build_fixtures.py")


def fixture_root() -> Path:
    """The folder of the built fixtures (built now if missing)."""
    digest = hashlib.sha256(SCRIPT.read_bytes()).hexdigest()[:16]
    root = REPO / "build" / "mlf_aot" / digest
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (root / "index.json").is_file():
            return root
        shutil.rmtree(root, ignore_errors=True)
        done = subprocess.run(
            [str(tvm016_python()), str(SCRIPT), str(root)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            shutil.rmtree(root, ignore_errors=True)
            raise RuntimeError(f"building the MLF AOT fixtures failed:\n{done.stderr[-3000:]}")
    return root


@pytest.fixture(scope="session")
def mlf_root() -> Path:
    return fixture_root()


@pytest.fixture(scope="session")
def mlf_index(mlf_root: Path) -> list[dict[str, Any]]:
    index: list[dict[str, Any]] = json.loads((mlf_root / "index.json").read_text())
    return index
