"""``python -m tvmrt`` and the ``tvmrt`` console script."""

from __future__ import annotations

import sys

from tvmrt.cli import main as _main

__all__ = ["main"]


def main() -> None:
    """Entry point of the ``tvmrt`` command."""
    sys.exit(_main())


if __name__ == "__main__":
    main()
