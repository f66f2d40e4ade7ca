"""``tvmrt profile``: per-node times from the debug executor."""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tvmrt.artifact import load_artifact
from tvmrt.cli._common import (
    UsageError,
    add_artifact_arguments,
    add_input_arguments,
    load,
    make_inputs,
)
from tvmrt.cli.profile_html import render_html
from tvmrt.cli.profile_summary import by_op_type, chrome_trace, collect, format_by_op_type
from tvmrt.cli.rpc_flags import add_rpc_arguments
from tvmrt.error import InternalError

EXAMPLES = """examples:
  tvmrt profile model_dir/                     # per-node table, slowest first, with %
  tvmrt profile model_dir/ --csv > nodes.csv   # TVM's Report as CSV (or --json)
  tvmrt profile model_dir/ --trace trace.json  # Chrome trace: open in ui.perfetto.dev
  tvmrt profile model_dir/ --dump dbg/         # TVM's debug dump folder (graph, trace, tensors)
  tvmrt profile model_dir/ --html report.html  # one page: charts, graph, memory pools
  tvmrt profile model.so --input-shape x=8x16  # a Relax VM executable: every call it makes
"""


def register(subparsers: Any) -> None:
    """Add the ``profile`` verb."""
    parser = subparsers.add_parser(
        "profile",
        help="time every node with the debug executor",
        description="Time every node of the graph with the debug executor and print the "
        "nodes slowest first, with their share of the total (an AOT build: its whole run; a "
        "Relay or Relax VM executable: every kernel, and for Relax every builtin, it calls).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_artifact_arguments(parser)
    add_input_arguments(parser)
    add_rpc_arguments(parser)
    parser.add_argument(
        "--number", type=int, default=10, metavar="N", help="runs per node timing (10)"
    )
    parser.add_argument("--repeat", type=int, default=1, metavar="R", help="timings per node (1)")
    fmt = parser.add_mutually_exclusive_group()
    fmt.add_argument("--csv", action="store_true", help="print TVM's profiling Report as CSV")
    fmt.add_argument("--json", action="store_true", help="print TVM's profiling Report as JSON")
    parser.add_argument("--trace", metavar="FILE", help="write a Chrome trace (Perfetto) here")
    parser.add_argument("--dump", metavar="DIR", help="keep TVM's debug dump folder here")
    parser.add_argument(
        "--html",
        metavar="FILE",
        help="write a self-contained HTML report (charts, the graph, memory pools) here",
    )
    parser.set_defaults(handler=profile)


TRACE_FILE = "_tvmdbg_execution_trace.json"  # in the debug dump folder


def profile(args: argparse.Namespace) -> int:
    """Load as a debug executor, time every node, print."""
    if args.number < 1 or args.repeat < 1:
        raise UsageError("--number and --repeat must be at least 1")
    dump_root = args.dump or tempfile.mkdtemp(prefix="tvmrt_profile_")
    try:
        model, _ = load(args, loader=lambda files, dev: load_artifact(files, dev, True, dump_root))
        profiler = model.profiler
        if profiler is None:  # load_artifact(debug=True) always gives one
            raise InternalError(f"{model.files.lib.name!r} was loaded without a profiler")
        inputs = make_inputs(model, args)
        for name, arr in inputs.items():
            profiler.set_input(name, arr)
        table = profiler.run_timed(args.number, args.repeat)
        summary = None
        timing = profiler.node_timing()
        if timing is None:  # no graph (AOT: one call; a VM: its calls): the trace is its own
            if args.html:
                kind = "a VM executable" if model.form in ("relax", "relay_vm") else "AOT"
                raise UsageError(f"--html draws the graph, and this artifact has none ({kind})")
            if args.trace:
                shutil.copyfile(Path(profiler.dump_path) / TRACE_FILE, args.trace)
        else:
            rows = collect(timing.graph, timing.times)
            types = by_op_type(rows)
            summary = format_by_op_type(types)
            if args.trace:
                chrome_trace(rows, args.trace)
            if args.html:
                title = str(args.artifact or args.lib)
                page = render_html(title, timing.graph, model.param_names, rows, types, timing.plan)
                Path(args.html).write_text(page, encoding="utf-8")
        if args.csv or args.json:
            report = profiler.profile()
            print(report.csv() if args.csv else report.json())
        else:
            print(table)
            if summary is not None:
                print()
                print("Summary by operator type (mean per run, slowest first)")
                print(summary)
        if args.trace and not (args.csv or args.json):
            print(f"Chrome trace written to {args.trace} (open it in ui.perfetto.dev)")
        if args.html and not (args.csv or args.json):
            print(f"HTML report written to {args.html} (open it in a browser)")
        if args.dump and not (args.csv or args.json):
            print(f"debug dump kept in {profiler.dump_path}")
    finally:
        if not args.dump:
            shutil.rmtree(dump_root, ignore_errors=True)
    return 0
