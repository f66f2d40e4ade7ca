"""The ``tvmrt`` command line: run, bench, profile, inspect and compile artifacts."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
import warnings
from collections.abc import Sequence
from typing import TextIO

from tvmrt.cli import bench, config_cmd, inspect_cmd, micro, profile, rpc, run, serve
from tvmrt.cli._common import UsageError
from tvmrt.error import (
    ArrayError,
    DataTypeError,
    DeviceUnavailableError,
    GraphFormatError,
    InputNotFoundError,
    InputShapeRequiredError,
    ModuleLoadError,
    ParamsFormatError,
    TVMError,
)

__all__ = ["main", "build_parser"]

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
EXIT_BROKEN_PIPE = 128 + 13  # what a process killed by SIGPIPE reports, as `cat` or `seq` do

# Problems with what the user handed us (files, arguments): exit status 2.
_INPUT_ERRORS = (
    UsageError,
    FileNotFoundError,
    IsADirectoryError,
    ModuleLoadError,
    GraphFormatError,
    ParamsFormatError,
    DataTypeError,
    ArrayError,
    InputNotFoundError,
    DeviceUnavailableError,  # --device names a device tvmrt cannot use here
    InputShapeRequiredError,  # compile: symbolic input dimensions need --input-shape
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every verb."""
    parser = argparse.ArgumentParser(
        prog="tvmrt",
        description="Run TVM-compiled models (graph JSON + kernel library + params) without TVM.",
        epilog="run 'tvmrt VERB --help' for a verb's options and examples. exit status: "
        "0 ok, 1 the model failed (or inspect found problems, or --compare a difference), 2 bad "
        "arguments or input files.",
    )
    parser.add_argument("--verbose", action="store_true", help=_VERBOSE_HELP)
    parser.add_argument("--version", action="version", version=f"tvmrt {_version()}")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")
    for module in (run, bench, profile, inspect_cmd, serve, rpc, config_cmd, micro):
        module.register(verbs)
    try:
        compiler_cli = importlib.import_module("tvmrt.compiler.cli")
    except ImportError:  # the compiler package is optional at import time
        pass
    else:
        compiler_cli.register_cli(verbs)
    for verb_parser in verbs.choices.values():  # `tvmrt run X --verbose` works too
        verb_parser.add_argument(
            "--verbose", action="store_true", default=argparse.SUPPRESS, help=_VERBOSE_HELP
        )
    return parser


_VERBOSE_HELP = "show tracebacks on errors"


def _version() -> str:
    from tvmrt._version import __version__

    return __version__


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    with warnings.catch_warnings():  # restored after: main may run inside a test's process
        warnings.showwarning = _show_warning  # one line, without tvmrt's source line
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verb is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        status: int = args.handler(args)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
    except KeyboardInterrupt:
        print("tvmrt: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `tvmrt profile X | head`: the reader has gone; stop quietly
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except _INPUT_ERRORS as exc:
        return _report(exc, args.verbose, EXIT_USAGE)
    except (TVMError, OSError, ValueError, RuntimeError) as exc:
        return _report(exc, args.verbose, EXIT_FAILURE)
    return status


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """A warning as the command line shows it: ``tvmrt: warning: MESSAGE``; where it was
    raised in tvmrt is no help to a user who set an environment variable."""
    print(f"tvmrt: warning: {message}", file=file or sys.stderr)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so Python's final flush does not fail on the closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout without a file descriptor (tests capture it)
        pass


def _report(exc: BaseException, verbose: bool, status: int) -> int:
    if verbose:
        traceback.print_exception(exc)
    message = str(exc).strip().replace("\n", " ") or type(exc).__name__
    notes = getattr(exc, "__notes__", [])
    suffix = f" ({'; '.join(notes)})" if notes else ""
    print(f"tvmrt: error: {message}{suffix}", file=sys.stderr)
    if not verbose and not isinstance(exc, UsageError):  # a bad argument's is the CLI's own
        print("(run with --verbose for the traceback)", file=sys.stderr)
    return status
