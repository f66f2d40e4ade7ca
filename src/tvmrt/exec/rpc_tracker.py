"""``python -m tvmrt.exec.rpc_tracker``: TVM's ``python -m tvm.exec.rpc_tracker``, no TVM."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from tvmrt.cli import main as cli_main

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the tracker with ``argv`` (default: the command line)."""
    return cli_main(["rpc", "tracker", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
