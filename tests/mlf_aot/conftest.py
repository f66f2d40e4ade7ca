"""The MLF AOT fixtures: built once with TVM 0.16 (tests/mlf_aot/build_mlf_aot_fixtures.py) under
``build/mlf_aot/<sha256 of the build script>`` (tests/support/built.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from support.mlf_aot_cases import fixture_root


@pytest.fixture(scope="session")
def mlf_root() -> Path:
    return fixture_root()


@pytest.fixture(scope="session")
def mlf_index(mlf_root: Path) -> list[dict[str, Any]]:
    index: list[dict[str, Any]] = json.loads((mlf_root / "index.json").read_text())
    return index
