"""``tvmrt run``: one inference with a readable summary."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from tvmrt.cli._common import (
    UsageError,
    add_artifact_arguments,
    add_input_arguments,
    conversions,
    describe_array,
    load,
    make_inputs,
    set_inputs,
)
from tvmrt.cli.rpc_flags import add_rpc_arguments

EXAMPLES = """examples:
  tvmrt run model_dir/ --fill random
  tvmrt run model_dir/ -i inputs.npz -o outputs.npz
  tvmrt run deploy_lib.tar -i float_input=sample.npy --top-k 3
  tvmrt run --graph g.json --lib lib.so --params p.params -i x.npy
"""


def register(subparsers: Any) -> None:
    """Add the ``run`` verb."""
    parser = subparsers.add_parser(
        "run",
        help="run the model once and print a summary",
        description="Run a graph-executor artifact once and print its inputs and outputs.",
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
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Load, set inputs, run once, print, save."""
    model, load_s = load(args)
    inputs = make_inputs(model, args)
    executor = model.executor
    set_inputs(model, inputs)
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
        top = _top_k(arr, args.top_k)
        if top:
            print(f"    top-{len(top)}: " + ", ".join(f"{i} ({v:.4g})" for i, v in top))
    if args.output:
        if not args.output.endswith(".npz"):
            raise UsageError(f"-o/--output must name a .npz file, got {args.output!r}")
        arrays: dict[str, Any] = dict(outputs)  # keys as printed above
        np.savez(args.output, **arrays)
        print(f"saved {len(outputs)} output(s) to {args.output}")
    return 0


def _top_k(arr: np.ndarray[Any, Any], k: int) -> list[tuple[int, float]]:
    """Top-k of a classifier-like output: float scores over >= 2 classes, batch of 1."""
    scores = arr.reshape(-1) if arr.ndim == 1 or (arr.ndim == 2 and arr.shape[0] == 1) else None
    if k <= 0 or scores is None or arr.dtype.kind != "f" or scores.size < 2:
        return []
    order = np.argsort(scores)[::-1][:k]
    return [(int(i), float(scores[i])) for i in order]
