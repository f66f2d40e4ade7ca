"""``tvmrt serve``: serve artifacts over the Open Inference Protocol (KServe v2)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from tvmrt.artifact import find_artifact
from tvmrt.artifact.devices import set_kernel_threads
from tvmrt.cli._common import UsageError
from tvmrt.cli.rpc_flags import add_rpc_arguments, remote_device, remote_requested
from tvmrt.error import DeviceUnavailableError, InvalidArgumentError
from tvmrt.runtime.device import device as make_device
from tvmrt.runtime.device import get_device_api
from tvmrt.serve.http import HTTP_CHOICES
from tvmrt.serve.limits import MIB, ServeLimits

EXAMPLES = """examples:
  tvmrt serve model_dir/ --port 8000
  tvmrt serve mobilenet/ resnet.so --name mobilenet --name resnet --workers 2
  tvmrt serve --graph g.json --lib lib.so --params p.params --name m --host 0.0.0.0
  tvmrt serve deploy.so --rpc-tracker 10.0.0.2:9190 --rpc-key rasp4   (runs on the board)

endpoints: GET /v2, /v2/health/{live,ready}, /v2/models/NAME[/ready|/stats|/config],
/metrics;
POST /v2/models/NAME/infer (JSON tensors or the binary-tensor extension).
"""


def register(subparsers: Any) -> None:
    """Add the ``serve`` verb."""
    parser = subparsers.add_parser(
        "serve",
        help="serve models over HTTP (Open Inference Protocol / KServe v2)",
        description="Serve one or more artifacts over the Open Inference Protocol (KServe "
        "v2): tritonclient, KServe clients and curl work unchanged. Needs the serve extra "
        "(pip install 'tvmrt[serve]', or pip install -e '.[serve]' from a checkout). With "
        "--rpc or --rpc-tracker/--rpc-key the models run on an RPC server (a board) and "
        "are served here.",
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
        "--http",
        default="auto",
        choices=HTTP_CHOICES,
        help="uvicorn's HTTP protocol: httptools (C parser, faster) or h11 (pure Python); "
        "auto: httptools where installed (the serve extra installs it), else h11",
    )
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
        "--max-batch",
        type=int,
        metavar="N",
        help="dynamic batching: rows per run, for an artifact compiled with batch B > 1 "
        "whose rows are independent (checked at load); requests send 1..N rows. Default: B "
        "where the check passes, else off; 1: off (docs/serving.md, Dynamic batching)",
    )
    parser.add_argument(
        "--batch-wait-us",
        type=float,
        metavar="US",
        help="microseconds an executor waits for more requests to fill a batch (0: run what "
        "is queued); given, batching is required",
    )
    parser.add_argument(
        "--batch-delay-ms",
        type=float,
        metavar="MS",
        help="--batch-wait-us in milliseconds (the older flag)",
    )
    parser.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME:DTYPE:DIMS",
        dest="signature",
        help="a Relay VM model's input type, e.g. x:float32:-1,16 (-1: any size); checked "
        "for every request (one model only; repeat per input)",
    )
    limits = parser.add_argument_group(
        "limits", "what clients may hold (docs/serving.md, Limits); past each: an error answer"
    )
    lim = ServeLimits()
    limits.add_argument(
        "--max-connections",
        type=int,
        default=lim.max_connections,
        metavar="N",
        help=f"open connections; one more gets 503 and is closed ({lim.max_connections})",
    )
    limits.add_argument(
        "--max-header-kb",
        type=float,
        default=lim.max_header_bytes / 1024,
        metavar="KB",
        help=f"request line + headers in KiB; more: 400 ({lim.max_header_bytes >> 10})",
    )
    limits.add_argument(
        "--header-timeout",
        type=float,
        default=lim.header_timeout,
        metavar="S",
        help=f"seconds for a request's headers, whatever the trickle ({lim.header_timeout:g})",
    )
    limits.add_argument(
        "--max-body-mb",
        type=float,
        default=lim.max_body_bytes / MIB,
        metavar="MB",
        help=f"largest request body in MiB; more: 413 ({lim.max_body_bytes // MIB})",
    )
    limits.add_argument(
        "--max-json-mb",
        type=float,
        metavar="MB",
        help="largest JSON part of a body in MiB; more: 413 "
        f"({lim.max_json_bytes // MIB}, at most --max-body-mb)",
    )
    limits.add_argument(
        "--body-timeout",
        type=float,
        default=lim.body_timeout,
        metavar="S",
        help=f"seconds for a whole body once the headers are in; then 408 ({lim.body_timeout:g})",
    )
    limits.add_argument(
        "--max-inflight-mb",
        type=float,
        default=lim.max_inflight_body_bytes / MIB,
        metavar="MB",
        help="MiB of request bodies held at once over all connections; past it 503 "
        f"({lim.max_inflight_body_bytes // MIB})",
    )
    limits.add_argument(
        "--parse-workers",
        type=int,
        default=lim.parse_workers,
        metavar="N",
        help=f"threads parsing large requests off the event loop ({lim.parse_workers})",
    )
    limits.add_argument(
        "--graceful-timeout",
        type=float,
        default=lim.graceful_timeout,
        metavar="S",
        help="seconds from SIGTERM to exit; work not done by then gets 503 "
        f"({lim.graceful_timeout:g})",
    )
    parser.add_argument(
        "--device",
        default="cpu",
        help="cpu (default), cuda[:N] or opencl[:N] (CPU kept too); no other device backends",
    )
    parser.add_argument("--threads", type=int, metavar="N", help="threads for parallel kernels")
    parser.add_argument("--log-level", default="info", choices=("debug", "info", "warning"))
    add_rpc_arguments(parser)  # the models run on the board; requests come here
    parser.set_defaults(handler=serve)


def _names(args: argparse.Namespace, count: int) -> list[str]:
    if args.name and len(args.name) != count:
        raise UsageError(
            f"give --name once per artifact: {count} artifact(s), {len(args.name)} name(s)"
        )
    if args.name:
        names = list(args.name)
    elif args.artifact:
        names = [Path(a).stem or Path(a).name for a in args.artifact]
    else:
        names = [Path(args.lib).stem]
    sources = args.artifact or [args.lib]
    for i, name in enumerate(names):
        if name in names[:i]:
            first = sources[names.index(name)]
            how = "--name gives" if args.name else "the default names (file or folder name) give"
            raise UsageError(
                f"{how} two models the same name {name!r} ({first} and {sources[i]}); "
                "give each artifact its own --name"
            )
    return names


def _limits(args: argparse.Namespace) -> ServeLimits:
    body, inflight = args.max_body_mb, args.max_inflight_mb
    json_mb = args.max_json_mb
    if json_mb is None:  # the default follows a smaller --max-body-mb
        json_mb = min(ServeLimits().max_json_bytes / MIB, body)
    for flag, value in (("--max-body-mb", body), ("--max-json-mb", json_mb)):
        if not value * MIB >= 1:
            raise UsageError(f"{flag} {value:g}: expected a positive size in MiB")
    if json_mb > body:
        raise UsageError(f"--max-json-mb {json_mb:g} must be at most --max-body-mb {body:g}")
    if inflight < body:
        raise UsageError(f"--max-inflight-mb {inflight:g} must be at least --max-body-mb {body:g}")
    try:
        return ServeLimits(
            max_connections=args.max_connections,
            max_header_bytes=int(args.max_header_kb * 1024),
            header_timeout=args.header_timeout,
            max_body_bytes=int(body * MIB),
            max_json_bytes=int(json_mb * MIB),
            body_timeout=args.body_timeout,
            max_inflight_body_bytes=int(args.max_inflight_mb * MIB),
            parse_workers=args.parse_workers,
            graceful_timeout=args.graceful_timeout,
        )
    except InvalidArgumentError as exc:
        raise UsageError(f"bad limit flags: {exc}") from None


def serve(args: argparse.Namespace) -> int:
    """Load every artifact as K executors and serve until interrupted."""
    from tvmrt.serve.app import InferenceApp, JsonLogFormatter
    from tvmrt.serve.dynamic import parse_signature
    from tvmrt.serve.model import load_model

    try:
        import uvicorn  # noqa: F401

        from tvmrt.serve.http import resolve_http
        from tvmrt.serve.server import check_port, serve_forever
    except ImportError:
        raise UsageError(
            "tvmrt serve needs the serve extra: pip install 'tvmrt[serve]' "
            "(from a checkout of tvmrt: pip install -e '.[serve]')"
        ) from None
    if not args.artifact and args.lib is None:
        raise UsageError("give an ARTIFACT (folder or factory library) or --lib")
    http = resolve_http(args.http)  # refused before anything is loaded
    single = args.graph or args.lib or args.params
    if single and len(args.artifact) > 1:
        raise UsageError("--graph/--lib/--params describe one model; give at most one ARTIFACT")
    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {args.workers}")
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be in 0..65535, got {args.port}")
    if args.max_queue < 0 or args.timeout <= 0:
        raise UsageError("--max-queue must be >= 0 and --timeout > 0")
    limits = _limits(args)
    if args.port:  # a busy port is found before the models load, not after "serving"
        try:
            check_port(args.host, args.port)
        except InvalidArgumentError as exc:
            raise UsageError(str(exc)) from None
    if args.threads is not None:
        if args.threads < 1:
            raise UsageError(f"--threads must be at least 1, got {args.threads}")
        set_kernel_threads(args.threads)
    remote = remote_requested(args)
    try:
        dev = make_device(args.device)
        if not remote:  # a device nothing here can run on is a bad argument
            get_device_api(dev)
    except (ValueError, DeviceUnavailableError) as exc:
        raise UsageError(str(exc)) from None
    if remote:  # --rpc / --rpc-tracker: every model runs on the server's device
        dev = remote_device(args, dev)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLogFormatter())
    log = logging.getLogger("tvmrt.serve")
    log.addHandler(handler)
    log.setLevel(args.log_level.upper())
    delay = None if args.batch_delay_ms is None else args.batch_delay_ms / 1e3
    if delay is not None and delay < 0:
        raise UsageError(f"--batch-delay-ms must be >= 0, got {args.batch_delay_ms}")
    if args.batch_wait_us is not None:
        if delay is not None:
            raise UsageError("give --batch-wait-us or --batch-delay-ms, not both")
        if args.batch_wait_us < 0:
            raise UsageError(f"--batch-wait-us must be >= 0, got {args.batch_wait_us}")
        delay = args.batch_wait_us / 1e6
    if args.max_batch is not None and args.max_batch < 1:
        raise UsageError(f"--max-batch must be >= 1 (1: no batching), got {args.max_batch}")
    sources = args.artifact or [None]
    if args.signature and len(sources) > 1:
        raise UsageError("--input describes one model's inputs; give at most one ARTIFACT")
    try:
        signature = [parse_signature(text) for text in args.signature]
    except InvalidArgumentError as exc:
        raise UsageError(str(exc)) from None
    models = []
    for name, source in zip(_names(args, len(sources)), sources, strict=True):
        files = find_artifact(source, args.graph, args.lib, args.params)
        try:
            model = load_model(
                name,
                files,
                args.workers,
                dev,
                args.max_queue,
                args.timeout,
                delay,
                signature,
                args.max_batch,
            )
        except InvalidArgumentError as exc:
            raise UsageError(str(exc)) from None
        models.append(model)
        log.info(
            "loaded",
            extra={
                "fields": {
                    "model": name,
                    "lib": str(files.lib),
                    "workers": args.workers,
                    "max_batch": model.batch or 1,
                }
            },
        )
    app = InferenceApp(models, limits=limits)
    log.info(
        "serving",
        extra={
            "fields": {
                "host": args.host,
                "port": args.port,
                "http": http,
                "models": sorted(app.models),
            }
        },
    )
    stopped_by = serve_forever(app, args.host, args.port, http)
    log.info("stopped", extra={"fields": {"signal": stopped_by}})
    return 0
