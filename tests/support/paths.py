"""Where the checkout and the real TVM artifacts are."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ARTIFACTS", "REPO", "WORKSPACE", "WORKSPACE_PATH"]

REPO = Path(__file__).resolve().parents[2]
# the folder of third-party data beside the checkout (a developer's workspace; a user's
# clone has none): its name, and the path as text would name it from the checkout
WORKSPACE = "shared"
WORKSPACE_PATH = f"../{WORKSPACE}"
# its artifacts/, or TVMRT_ARTIFACTS; tests get it through the `artifacts` fixture
# (tests/conftest.py), which skips or fails when it is missing
ARTIFACTS = Path(os.environ.get("TVMRT_ARTIFACTS", REPO.parent / WORKSPACE / "artifacts"))
