"""``tvmrt serve``: serve artifacts over the Open Inference Protocol (KServe v2)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from tvmrt.artifact import find_artifact
from tvmrt.cli._common import UsageError
from tvmrt.runtime import kernel_services
from tvmrt.runtime.device import device as make_device

EXAMPLES = """examples:
  tvmrt serve model_dir/ --port 8000
  tvmrt serve mobilenet/ resnet.so --name mobilenet --name resnet --workers 2
  tvmrt serve --graph g.json --lib lib.so --params p.params --name m --host 0.0.0.0

endpoints: GET /v2, /v2/health/{live,ready}, /v2/models/NAME[/ready|/stats], /metrics;
POST /v2/models/NAME/infer (JSON tensors or the binary-tensor extension).
"""


def register(subparsers: Any) -> None:
    """Add the ``serve`` verb."""
    parser = subparsers.add_parser(
        "serve",
        help="serve models over HTTP (Open Inference Protocol / KServe v2)",
        description="Serve one or more artifacts over the Open Inference Protocol (KServe "
        "v2): tritonclient, KServe clients and curl work unchanged. Needs the serve extra "
        "(pip install 'tvmrt[serve]').",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("artifact", nargs="*", help="artifact folder(s) or factory library(ies)")
    parser.add_argument("--graph", metavar="FILE", help="graph JSON (one model only)")
    parser.add_argument("--lib", metavar="FILE", help="kernel library (one model only)")
    parser.add_argument("--params", metavar="FILE", help="params blob (one model only)")
    parser.add_argument(
        "--name",
        action="append",
        default=[],
        help="model name, once per artifact (default: the folder or file name)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="TCP port (8000)")
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="K",
        help="executors per model, sharing one copy of the weights (1)",
    )
    parser.add_argument(
        "--max-queue",
        type=int,
        default=64,
        metavar="N",
        help="requests waiting beyond the K running before 503 + Retry-After (64)",
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request (30)")
    parser.add_argument(
        "--batch-delay-ms",
        type=float,
        metavar="MS",
        help="dynamic batching (off by default), for artifacts compiled with a batch "
        "dimension B > 1: requests send 1..B rows; wait up to MS to fill a batch",
    )
    parser.add_argument(
        "--max-body-mb", type=float, default=64.0, help="largest request body in MiB (64)"
    )
    parser.add_argument("--device", default="cpu", help="device, e.g. cpu (default)")
    parser.add_argument("--threads", type=int, metavar="N", help="threads for parallel kernels")
    parser.add_argument("--log-level", default="info", choices=("debug", "info", "warning"))
    parser.set_defaults(handler=serve)


def _names(args: argparse.Namespace, count: int) -> list[str]:
    if args.name and len(args.name) != count:
        raise UsageError(
            f"give --name once per artifact: {count} artifact(s), {len(args.name)} name(s)"
        )
    if args.name:
        return list(args.name)
    if args.artifact:
        return [Path(a).stem or Path(a).name for a in args.artifact]
    return [Path(args.lib).stem]


def serve(args: argparse.Namespace) -> int:
    """Load every artifact as K executors and serve until interrupted."""
    from tvmrt.serve.app import InferenceApp, JsonLogFormatter
    from tvmrt.serve.model import load_model

    try:
        import uvicorn  # noqa: F401

        from tvmrt.serve.server import serve_forever
    except ImportError:
        raise UsageError("tvmrt serve needs the serve extra: pip install 'tvmrt[serve]'") from None
    if not args.artifact and args.lib is None:
        raise UsageError("give an ARTIFACT (folder or factory library) or --lib")
    single = args.graph or args.lib or args.params
    if single and len(args.artifact) > 1:
        raise UsageError("--graph/--lib/--params describe one model; give at most one ARTIFACT")
    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {args.workers}")
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be in 0..65535, got {args.port}")
    if args.max_queue < 0 or args.timeout <= 0 or args.max_body_mb <= 0:
        raise UsageError("--max-queue must be >= 0, --timeout and --max-body-mb > 0")
    if args.threads is not None:
        kernel_services.set_num_threads(args.threads)
    try:
        dev = make_device(args.device)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLogFormatter())
    log = logging.getLogger("tvmrt.serve")
    log.addHandler(handler)
    log.setLevel(args.log_level.upper())
    delay = None if args.batch_delay_ms is None else args.batch_delay_ms / 1e3
    if delay is not None and delay < 0:
        raise UsageError(f"--batch-delay-ms must be >= 0, got {args.batch_delay_ms}")
    sources = args.artifact or [None]
    models = []
    for name, source in zip(_names(args, len(sources)), sources, strict=True):
        files = find_artifact(source, args.graph, args.lib, args.params)
        models.append(
            load_model(name, files, args.workers, dev, args.max_queue, args.timeout, delay)
        )
        log.info(
            "loaded",
            extra={"fields": {"model": name, "lib": str(files.lib), "workers": args.workers}},
        )
    app = InferenceApp(models, max_body_bytes=int(args.max_body_mb * (1 << 20)))
    log.info(
        "serving",
        extra={"fields": {"host": args.host, "port": args.port, "models": sorted(app.models)}},
    )
    stopped_by = serve_forever(app, args.host, args.port)
    log.info("stopped", extra={"fields": {"signal": stopped_by}})
    return 0
