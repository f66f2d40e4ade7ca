"""The ``tvmrt compile`` verb: ``tvmrt compile model.onnx -o DIR [options]``.

:func:`register_cli` adds it to the ``tvmrt`` command line; importing this module does
not import TVM (only running the verb does).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tvmrt.compiler.target import PORTABLE_CPUS
from tvmrt.error import CompileError, InvalidArgumentError, UsageError

__all__ = ["register_cli", "run_cli"]

EXAMPLES = """examples:
  tvmrt compile model.onnx -o build/
  tvmrt compile model.onnx -o build/ --input-shape input=1x3x224x224
  tvmrt compile model.onnx -o build/ --target x86-64-v3      # portable: any AVX2 machine
  tvmrt compile model.onnx -o build/ --tune 200              # MetaSchedule, 200 trials
  tvmrt compile model.onnx -o model-cuda/ --target cuda      # CUDA device (PTX, sm_75 up; nvcc)
  tvmrt run build/ --fill random

writes deploy.json, deploy.so, deploy.params (run them with tvmrt or TVM's graph executor)
and standalone.so (all three in one library: load_module(path)["default"](dev)).
"""


def register_cli(subparsers: Any) -> None:
    """Add the ``compile`` verb to ``subparsers`` (from ``ArgumentParser.add_subparsers``)."""
    parser = subparsers.add_parser(
        "compile",
        help="compile an ONNX model into a graph-executor artifact (needs tvmrt[compile])",
        description="Compile an ONNX model with today's TVM (Relax + TIR) into deploy.json + "
        "deploy.so + deploy.params and a single-file standalone.so.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("model", help="the .onnx file")
    parser.add_argument(
        "-o", "--output-dir", required=True, metavar="DIR", help="folder for the artifacts"
    )
    parser.add_argument(
        "--target",
        default=None,
        help="CPU to compile for: 'host' (default: this machine's CPU by name), a portable "
        f"level ({', '.join(PORTABLE_CPUS[:4])}), a CPU name (znver3, skylake-avx512), "
        "'llvm -mcpu=...' or a target JSON object; or 'cuda' / 'cuda -arch=sm_XY' for an "
        "NVIDIA CUDA device (needs nvcc at compile time)",
    )
    parser.add_argument(
        "--input-shape",
        action="append",
        default=[],
        metavar="NAME=SHAPE",
        help="static shape of an input, e.g. input=1x3x224x224 (fixes symbolic dimensions); "
        "repeatable",
    )
    parser.add_argument(
        "--tune",
        type=int,
        default=None,
        metavar="TRIALS",
        help="tune the kernels with MetaSchedule for TRIALS trials in total (0: apply an "
        "existing database only); records go to DIR/tuning and are reused",
    )
    parser.add_argument(
        "--tuning-dir", metavar="DIR", help="tuning database folder (default: OUTPUT/tuning)"
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar or summary")
    parser.set_defaults(handler=run_cli)


def run_cli(args: argparse.Namespace) -> int:
    """Run the ``compile`` verb; returns the exit status.

    Bad arguments and unreadable model files raise the CLI's usage error (exit 2);
    a model that cannot be compiled raises :class:`~tvmrt.error.CompileError` (exit 1).
    """
    from tvmrt.compiler import compile as compile_model
    from tvmrt.compiler.frontend import parse_input_shape

    try:
        shapes = dict(parse_input_shape(text) for text in args.input_shape)
        if args.tune is not None and args.tune < 0:
            raise InvalidArgumentError(f"--tune must be a trial count >= 0, got {args.tune}")
        result = compile_model(
            args.model,
            target=args.target,
            input_shapes=shapes or None,
            tune=args.tune,
            output_dir=args.output_dir,
            tuning_dir=args.tuning_dir,
            progress=None if args.quiet else sys.stderr,
        )
    except CompileError:
        raise
    except ImportError as exc:  # a missing extra: exit 2, as tvmrt serve without its extra
        raise UsageError(str(exc)) from exc
    except (ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from exc
    if not args.quiet:
        print(result.summary())
    return 0
