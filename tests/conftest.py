"""Shared fixtures: where the real TVM artifacts live, and test tiers."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.fixtures import ArtifactRoot
from support.paths import ARTIFACTS


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """The real TVM artifacts, as ``artifacts / "<folder>" / ...``: the project builds every
    folder TVM can make (tests/fixtures/, cached under build/fixtures); third-party folders come
    from $TVMRT_ARTIFACTS (tests/support/paths.py), and a test skips, naming the variable, without
    them (support/fixtures.py)."""
    return ArtifactRoot(ARTIFACTS)
