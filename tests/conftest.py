"""Shared fixtures: where the real TVM artifacts live, and test tiers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from support.paths import ARTIFACTS


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Folder of real TVM artifacts (../shared/artifacts); CI must have it."""
    if not ARTIFACTS.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"artifacts folder {ARTIFACTS} is missing in CI")
        pytest.skip(f"artifacts folder {ARTIFACTS} is missing (set TVMRT_ARTIFACTS)")
    return ARTIFACTS
