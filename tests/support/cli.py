"""The ``tvmrt`` command as users run it: a child process of this interpreter."""

from __future__ import annotations

import os
import subprocess
import sys

__all__ = ["tvmrt"]


def tvmrt(
    *args: str | os.PathLike[str], cwd: str | os.PathLike[str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m tvmrt ARGS...``; stdout, stderr and the exit status come back."""
    return subprocess.run(
        [sys.executable, "-m", "tvmrt", *map(os.fspath, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )
