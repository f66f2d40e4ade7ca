"""``tvmrt config``: compiler and linker flags for C/C++ programs using libtvmrt_runtime."""

from __future__ import annotations

import argparse
from typing import Any

from tvmrt import config
from tvmrt.cli._common import UsageError

__all__ = ["register", "show"]

EXAMPLES = """examples:
  g++ -std=c++17 main.cc $(tvmrt config --cflags --libs)
  g++ -std=c++17 main.cc lib.o devc.c $(tvmrt config --cflags --libs --static)
  cmake -Dtvmrt_DIR=$(tvmrt config --cmakedir) ..
  PKG_CONFIG_PATH=$(tvmrt config --pkgconfigdir) pkg-config --cflags --libs tvmrt
"""


def register(subparsers: Any) -> None:
    """Add the ``config`` verb."""
    parser = subparsers.add_parser(
        "config",
        help="print compiler/linker flags for C and C++ programs using tvmrt's C runtime",
        description="Print the flags a C or C++ program written against TVM's runtime headers "
        "needs to compile and link with libtvmrt_runtime (no Python in the program), or "
        "the folders of the headers, the library, the pkg-config file and the CMake package.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    config.build_parser(parser)
    parser.set_defaults(handler=show)


def show(args: argparse.Namespace) -> int:
    """Print the asked-for flags on one line."""
    line = config.render(args)
    if not line:
        raise UsageError(
            "give at least one of --cflags, --libs, --includedir, --libdir, "
            "--pkgconfigdir, --cmakedir"
        )
    print(line)
    return 0
