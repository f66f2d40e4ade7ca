"""Compiler and linker flags for C and C++ programs that use tvmrt's C runtime.

``tvmrt config --cflags --libs`` (or ``python -m tvmrt.config --cflags --libs``) prints what
``g++`` needs to build a program written against TVM's C++ runtime headers and link it with
``libtvmrt_runtime``, as ``pkg-config`` would::

    g++ -std=c++17 main.cc $(tvmrt config --cflags --libs)

The headers are the package's ``include/`` folder. The library is looked for in
``$TVMRT_LIBDIR`` when set (a build of your own, e.g. ``make native NATIVE_DIR=...``), else
in the package's ``lib/`` folder (an installed wheel) and then in ``build/native/`` of the
source checkout the package lives in (after ``make native``). The same folder holds a pkg-config
file (``lib/pkgconfig/tvmrt.pc``) and a CMake package (``lib/cmake/tvmrt``, for
``find_package(tvmrt)``); ``--pkgconfigdir`` and ``--cmakedir`` print where they are.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from tvmrt.error import ModuleFileNotFoundError

__all__ = [
    "LIBRARY_NAME",
    "SYSTEM_LIBS",
    "cflags",
    "cmake_dir",
    "include_dir",
    "lib_dir",
    "libs",
    "main",
    "pkgconfig_dir",
]

LIBRARY_NAME = "tvmrt_runtime"
# what libtvmrt_runtime itself links against (the static library needs them spelled out)
SYSTEM_LIBS = ("-ldl", "-lpthread", "-lm")

_PACKAGE = Path(__file__).resolve().parent


def include_dir() -> Path:
    """The folder to put on the include path: ``tvm/runtime/*.h`` and ``dlpack/dlpack.h``."""
    return _PACKAGE / "include"


def _candidate_lib_dirs() -> list[Path]:
    override = os.environ.get("TVMRT_LIBDIR")
    if override:
        return [Path(override).resolve()]
    # the wheel's tvmrt/lib, then a source checkout's build/native (src/tvmrt -> repo root)
    return [_PACKAGE / "lib", _PACKAGE.parent.parent / "build" / "native"]


def lib_dir() -> Path:
    """The folder holding ``libtvmrt_runtime.so`` and ``libtvmrt_runtime.a``."""
    for folder in _candidate_lib_dirs():
        if (folder / f"lib{LIBRARY_NAME}.so").is_file() or (
            folder / f"lib{LIBRARY_NAME}.a"
        ).is_file():
            return folder
    looked = ", ".join(str(folder) for folder in _candidate_lib_dirs())
    raise ModuleFileNotFoundError(
        f"lib{LIBRARY_NAME}.so/.a not found (looked in {looked}); install the tvmrt wheel, "
        "or run `make native` in the source checkout"
    )


def pkgconfig_dir() -> Path:
    """The folder holding ``tvmrt.pc`` (for ``PKG_CONFIG_PATH``)."""
    return _PACKAGE / "lib" / "pkgconfig"


def cmake_dir() -> Path:
    """The folder holding ``tvmrtConfig.cmake`` (for ``-Dtvmrt_DIR=`` or ``CMAKE_PREFIX_PATH``)."""
    return _PACKAGE / "lib" / "cmake" / "tvmrt"


def cflags() -> list[str]:
    """The compiler flags: the include path of TVM's headers."""
    return [f"-I{include_dir()}"]


def libs(static: bool = False) -> list[str]:
    """The linker flags: the shared library (found at run time through an rpath) or,
    with ``static``, the archive linked into the program, then the system libraries."""
    folder = lib_dir()
    if static:
        archive = folder / f"lib{LIBRARY_NAME}.a"
        if not archive.is_file():
            raise ModuleFileNotFoundError(f"{archive} not found (expected beside the .so)")
        return [str(archive), *SYSTEM_LIBS]
    return [f"-L{folder}", f"-Wl,-rpath,{folder}", f"-l{LIBRARY_NAME}", *SYSTEM_LIBS]


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """The options of ``tvmrt config`` (added to ``parser`` when one is given)."""
    if parser is None:
        parser = argparse.ArgumentParser(
            prog="python -m tvmrt.config", description=__doc__.split("\n\n")[0]
        )
    parser.add_argument("--cflags", action="store_true", help="compiler flags (-I...)")
    parser.add_argument("--libs", action="store_true", help="linker flags (-L... -l...)")
    parser.add_argument(
        "--static", action="store_true", help="with --libs: link libtvmrt_runtime.a instead"
    )
    parser.add_argument("--includedir", action="store_true", help="the include folder")
    parser.add_argument("--libdir", action="store_true", help="the library folder")
    parser.add_argument("--pkgconfigdir", action="store_true", help="the folder of tvmrt.pc")
    parser.add_argument("--cmakedir", action="store_true", help="the folder of tvmrtConfig.cmake")
    return parser


def render(args: argparse.Namespace) -> str:
    """The line ``tvmrt config`` prints for these options, in pkg-config's order."""
    words: list[str] = []
    if args.cflags:
        words += cflags()
    if args.libs:
        words += libs(static=args.static)
    for flag, folder in (
        ("includedir", include_dir),
        ("libdir", lib_dir),
        ("pkgconfigdir", pkgconfig_dir),
        ("cmakedir", cmake_dir),
    ):
        if getattr(args, flag):
            words.append(str(folder()))
    return " ".join(words)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tvmrt.config``: print the flags; exit 2 when nothing was asked for."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        line = render(args)
    except ModuleFileNotFoundError as exc:
        print(f"python -m tvmrt.config: error: {exc}", file=sys.stderr)
        return 2
    if not line:
        parser.print_usage(sys.stderr)
        print("python -m tvmrt.config: error: give at least one option", file=sys.stderr)
        return 2
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
