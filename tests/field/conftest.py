"""Field-style artifacts built once with TVM 0.16 (tests/field/build_field_fixtures.py), cached
under ``build/field/<sha256 of the build script>`` (tests/support/built.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.built import built

SCRIPT = Path(__file__).with_name("build_field_fixtures.py")


@pytest.fixture(scope="session")
def field_root() -> Path:
    return built(SCRIPT, "field")
