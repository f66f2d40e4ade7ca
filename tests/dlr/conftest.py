"""Neo-layout model folders built once with TVM 0.16 (tests/dlr/build_fixtures.py).

Cached under ``build/dlr/<sha256 of the build script>``; a build runs under a file lock.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from support.paths import REPO
from support.peers import tvm016_python

SCRIPT = Path(__file__).with_name("build_fixtures.py")
# a DLR user's script: its `import dlr` resolves only where a test makes it (not collected)
collect_ignore = ["dlr_script.py"]


@pytest.fixture(scope="session")
def neo_root() -> Path:
    digest = hashlib.sha256(SCRIPT.read_bytes()).hexdigest()[:16]
    root = REPO / "build" / "dlr" / digest
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "done").is_file():
            shutil.rmtree(root, ignore_errors=True)
            done = subprocess.run(
                [str(tvm016_python()), str(SCRIPT), str(root)],
                capture_output=True,
                text=True,
                timeout=600,
            )
            if done.returncode != 0:
                shutil.rmtree(root, ignore_errors=True)
                raise RuntimeError(f"building the Neo fixtures failed:\n{done.stderr[-3000:]}")
    return root


@pytest.fixture
def neo_copy(neo_root: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    """``neo_copy(name)``: a private copy of a Neo folder the test may change."""

    def copy(name: str) -> Path:
        target = tmp_path / name
        shutil.copytree(neo_root / name, target)
        return target

    return copy
