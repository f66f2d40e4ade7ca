"""``python -m tvmrt.dlr SCRIPT [ARGS...]``: run a DLR script unchanged on tvmrt.

The script's ``import dlr`` resolves to :mod:`tvmrt.dlr` (:func:`tvmrt.dlr.install`),
unless a real ``dlr`` is installed: then the script gets that one, and a line on stderr
says so.
"""

from __future__ import annotations

import runpy
import sys

from tvmrt.dlr import install


def main(argv: list[str]) -> int:
    """Run ``argv[0]`` as ``__main__`` with ``argv`` as its ``sys.argv``."""
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m tvmrt.dlr SCRIPT [ARGS...]  (runs SCRIPT with dlr = tvmrt.dlr)")
        return 0 if argv else 2
    if not install():
        print("tvmrt.dlr: a real dlr is installed; the script uses it", file=sys.stderr)
    sys.argv = list(argv)
    runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
