"""Where the checkout and the real TVM artifacts are."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ARTIFACTS", "REPO"]

REPO = Path(__file__).resolve().parents[2]
# ../shared/artifacts beside the checkout, or TVMRT_ARTIFACTS; tests get it through the
# `artifacts` fixture (tests/conftest.py), which skips or fails when it is missing
ARTIFACTS = Path(os.environ.get("TVMRT_ARTIFACTS", REPO.parent / "shared" / "artifacts"))
