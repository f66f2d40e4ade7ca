"""``tvmrt bench``: latency statistics, load time and peak memory."""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from tvmrt.artifact.model import LoadedModel
from tvmrt.artifact.subnormals import model_subnormal_note
from tvmrt.cli._common import (
    UsageError,
    add_artifact_arguments,
    add_input_arguments,
    load,
    make_inputs,
)
from tvmrt.cli._progress import Progress
from tvmrt.cli.rpc_flags import add_rpc_arguments, remote_requested
from tvmrt.error import TVMError
from tvmrt.runtime.kernel_services import num_threads

EXAMPLES = """examples:
  tvmrt bench model_dir/                       # 10 warm-up runs, then 100 timed runs
  tvmrt bench model_dir/ --repeat 50 --number 10 --threads 1
  tvmrt bench model_dir/ --duration 5 --json
  tvmrt bench model_dir/ --end-to-end          # include copying inputs in and outputs out
"""


def register(subparsers: Any) -> None:
    """Add the ``bench`` verb."""
    parser = subparsers.add_parser(
        "bench",
        help="measure latency (mean/median/p90/p99), load time and peak memory",
        description="Benchmark an artifact (graph executor, AOT, Relay or Relax VM). Each of "
        "--repeat measurements "
        "times --number runs; statistics are over the per-run averages of the measurements.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_artifact_arguments(parser)
    add_input_arguments(parser)
    add_rpc_arguments(parser)
    parser.add_argument("--warmup", type=int, default=10, metavar="N", help="untimed runs (10)")
    parser.add_argument("--repeat", type=int, default=100, metavar="R", help="measurements (100)")
    parser.add_argument(
        "--number", type=int, default=1, metavar="N", help="runs per measurement (1)"
    )
    parser.add_argument(
        "--duration",
        type=float,
        metavar="SECONDS",
        help="measure for this long instead of a fixed --repeat",
    )
    parser.add_argument(
        "--end-to-end",
        action="store_true",
        help="time set_input + run + copying every output to the host",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=bench)


def bench(args: argparse.Namespace) -> int:
    """Load, warm up, measure, report."""
    for flag in ("warmup", "repeat", "number"):
        minimum = 0 if flag == "warmup" else 1
        if getattr(args, flag) < minimum:
            raise UsageError(f"--{flag} must be at least {minimum}, got {getattr(args, flag)}")
    if args.duration is not None and args.duration <= 0:
        raise UsageError(f"--duration must be positive, got {args.duration}")
    model, load_s = load(args)
    inputs = make_inputs(model, args)
    if not remote_requested(args):  # a server's weights stay there
        _warn_subnormals(model)
    executor = model.executor
    for name, arr in inputs.items():
        executor.set_input(name, arr)
    n_out = len(model.output_names())

    def once() -> None:
        if args.end_to_end:
            for name, arr in inputs.items():
                executor.set_input(name, arr)
            executor.run()
            for i in range(n_out):
                executor.get_output(i).numpy()
        else:
            executor.run()

    sync = model.device.sync if model.device is not None else (lambda: None)
    for _ in range(args.warmup):
        once()
    samples, interrupted = _measure(once, sync, args)
    if not samples:  # Ctrl-C before the first measurement: nothing to report
        raise KeyboardInterrupt
    stats = _stats(samples)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (
        1024 if sys.platform != "darwin" else 1024**2
    )
    result = {
        "artifact": str(model.files.lib),
        "threads": num_threads(),
        "end_to_end": args.end_to_end,
        "load_ms": load_s * 1e3,
        "measurements": len(samples),
        "runs_per_measurement": args.number,
        "latency_ms": stats,
        "peak_rss_mb": peak_mb,
        "interrupted": interrupted,
    }
    status = EXIT_INTERRUPTED if interrupted else 0
    if interrupted:
        print(
            f"tvmrt: interrupted; statistics of the {len(samples)} measurement(s) done",
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps(result))
        return status
    print(
        f"{model.files.lib.name}: {len(samples)} x {args.number} run(s), {num_threads()} thread(s)"
        f"{', end to end' if args.end_to_end else ''}"
    )
    print(f"load time     {load_s * 1e3:10.2f} ms")
    for key in ("mean", "median", "p90", "p99", "min", "max", "std"):
        print(f"{key:<13} {stats[key]:10.3f} ms")
    print(f"peak memory   {peak_mb:10.1f} MB (RSS)")
    return status


def _warn_subnormals(model: LoadedModel) -> None:
    """Warn when the weights hold subnormal floats (they can dominate the timings)."""

    def weights() -> Iterator[tuple[str, np.ndarray[Any, Any]]]:
        for name in sorted(model.param_names):
            try:
                yield name, model.executor.get_input(name).numpy()
            except TVMError:
                continue  # a weight the executor does not hand out (linked, AOT)

    note = model_subnormal_note(weights())
    if note is not None:
        print(f"warning: {note}", file=sys.stderr)


EXIT_INTERRUPTED = 130  # as for any command a shell's Ctrl-C stopped
PROGRESS_AFTER_S = 2.0  # a terminal shows a progress bar once a measurement runs this long


def _measure(
    once: Callable[[], None], sync: Callable[[], None], args: argparse.Namespace
) -> tuple[list[float], bool]:
    """The per-run milliseconds of each measurement, and whether Ctrl-C stopped it early.

    Each measurement starts with the device idle and ends when it is idle again (``sync``,
    as TVM's time evaluator): on a GPU, ``run`` returns once its kernels are queued."""
    samples: list[float] = []
    start_all = time.perf_counter()
    total = args.duration if args.duration is not None else args.repeat
    with Progress(total, "benchmark", after=PROGRESS_AFTER_S) as bar:
        try:
            while True:
                sync()
                start = time.perf_counter_ns()
                for _ in range(args.number):
                    once()
                sync()
                samples.append((time.perf_counter_ns() - start) / args.number / 1e6)
                elapsed = time.perf_counter() - start_all
                bar.update(elapsed if args.duration is not None else len(samples))
                if args.duration is not None:
                    if elapsed >= args.duration:
                        break
                elif len(samples) >= args.repeat:
                    break
        except KeyboardInterrupt:  # keep what was measured; the measurement cut short is lost
            return samples, True
    return samples, False


def _stats(samples: list[float]) -> dict[str, float]:
    arr = np.asarray(samples)
    return {
        "mean": float(arr.mean()),
        "median": float(np.median(arr)),
        "p90": float(np.percentile(arr, 90)),
        "p99": float(np.percentile(arr, 99)),
        "min": float(arr.min()),
        "max": float(arr.max()),
        "std": float(arr.std()),
    }
