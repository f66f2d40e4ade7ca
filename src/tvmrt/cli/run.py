"""``tvmrt run``: one inference with a readable summary."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from tvmrt.artifact.output_names import output_aliases
from tvmrt.cli._common import (
    add_artifact_arguments,
    add_input_arguments,
    conversions,
    describe_array,
    load,
    make_inputs,
)
from tvmrt.cli.compare import add_compare_arguments, compare_outputs
from tvmrt.cli.rpc_flags import add_rpc_arguments

EXAMPLES = """examples:
  tvmrt run model_dir/ --fill random
  tvmrt run model_dir/ -i inputs.npz -o outputs.npz
  tvmrt run model_dir/ -i golden.npz --compare golden.npz
  tvmrt run deploy_lib.tar -i float_input=sample.npy --top-k 3
  tvmrt run --graph g.json --lib lib.so --params p.params -i x.npy
  tvmrt run model.so --input-shape x=4x16      # a Relax VM executable, x of shape (n, 16)
"""


def register(subparsers: Any) -> None:
    """Add the ``run`` verb."""
    parser = subparsers.add_parser(
        "run",
        help="run the model once and print a summary",
        description="Run an artifact (a graph-executor build, an AOT build, a Relay or Relax "
        "VM executable) once and print its inputs and outputs.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_artifact_arguments(parser)
    add_input_arguments(parser)
    add_rpc_arguments(parser)
    parser.add_argument("-o", "--output", metavar="FILE.npz", help="save the outputs to a .npz")
    parser.add_argument(
        "--top-k", type=int, default=5, metavar="K", help="top-K classes of a score vector (5)"
    )
    add_compare_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Load, set inputs, run once, print, save."""
    model, load_s = load(args)  # -i, -o and --compare are checked first
    inputs = make_inputs(model, args)
    executor = model.executor
    for name, arr in inputs.items():
        executor.set_input(name, arr)
    executor.run()
    names = model.output_names()  # unique: screen and .npz agree
    outputs = {name: executor.get_output(i).numpy() for i, name in enumerate(names)}
    print(f"loaded {model.files.lib.name} in {load_s * 1e3:.1f} ms")
    print("inputs:")
    for name, arr in inputs.items():
        print(f"  {name}: {describe_array(arr)}")
    for note in conversions(model, inputs):
        print(note)
    print("outputs:")
    for name, arr in outputs.items():
        print(f"  {name}: {describe_array(arr)}")
        for line in top_k_lines(arr, args.top_k):
            print(f"    {line}")
    if args.output:
        arrays: dict[str, Any] = dict(outputs)  # keys as printed above
        np.savez(args.output, **arrays)
        print(f"saved {len(outputs)} output(s) to {args.output}")
    if args.compare:
        aliases = output_aliases(names, [t.name for t in executor.outputs])
        lines, ok = compare_outputs(
            list(outputs.items()), aliases, list(inputs), args.compare, args.rtol, args.atol
        )
        print("\n".join(lines))
        return 0 if ok else 1
    return 0


_ROWS_SHOWN = 8


def top_k_lines(arr: np.ndarray[Any, Any], k: int) -> list[str]:
    """Top-k of a classifier-like output (float scores over >= 2 classes), one line per row
    of a batch: ``(classes,)`` or ``(batch, classes)``; the first rows of a large batch."""
    if k <= 0 or arr.dtype.kind != "f" or arr.ndim not in (1, 2) or arr.shape[-1] < 2:
        return []
    rows = arr.reshape(-1, arr.shape[-1])
    lines = []
    for r, scores in enumerate(rows[:_ROWS_SHOWN]):
        order = np.argsort(scores, kind="stable")[::-1][:k]
        top = ", ".join(f"{int(i)} ({float(scores[i]):.4g})" for i in order)
        lines.append(
            f"top-{len(order)}: {top}" if len(rows) == 1 else f"row {r} top-{len(order)}: {top}"
        )
    if len(rows) > _ROWS_SHOWN:
        lines.append(f"... {len(rows) - _ROWS_SHOWN} more rows (-o saves every output)")
    return lines
