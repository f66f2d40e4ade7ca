"""Neo-layout model folders built once with TVM 0.16 (tests/dlr/build_neo_fixtures.py).

Cached under ``build/dlr/<sha256 of the build script>``; a build runs under a file lock.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from support.built import built

SCRIPT = Path(__file__).with_name("build_neo_fixtures.py")
# a DLR user's script: its `import dlr` resolves only where a test makes it (not collected)
collect_ignore = ["dlr_script.py"]


@pytest.fixture(scope="session")
def neo_root() -> Path:
    return built(SCRIPT, "dlr")


@pytest.fixture
def neo_copy(neo_root: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    """``neo_copy(name)``: a private copy of a Neo folder the test may change."""

    def copy(name: str) -> Path:
        target = tmp_path / name
        shutil.copytree(neo_root / name, target)
        return target

    return copy
