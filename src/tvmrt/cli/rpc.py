"""``tvmrt rpc server`` and ``tvmrt rpc tracker``: TVM's RPC server and tracker, no TVM.

The flags are TVM's (``python -m tvm.exec.rpc_server`` / ``rpc_tracker``), except that
both bind 127.0.0.1 unless ``--host`` says otherwise: a server runs whatever code its
clients upload.
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import signal
import sys
from pathlib import Path
from typing import Any

from tvmrt.cli._common import UsageError
from tvmrt.error import InvalidArgumentError

__all__ = ["register", "add_server_arguments", "run_server", "add_tracker_arguments", "run_tracker"]

EXAMPLES = """examples:
  tvmrt rpc tracker --port 9190
  tvmrt rpc server --tracker 127.0.0.1:9190 --key rasp4
  tvmrt rpc server --port 9090 --timeout 600 --workdir /tmp/rpc
  (also: python -m tvmrt.exec.rpc_server --tracker HOST:9190 --key rasp4)
"""
SERVER_EXAMPLES = """examples:
  tvmrt rpc server --port 9090 --timeout 600 --workdir /tmp/rpc
  tvmrt rpc server --host 0.0.0.0 --tracker 10.0.0.1:9190 --key rasp4
"""
TRACKER_EXAMPLES = """examples:
  tvmrt rpc tracker --port 9190
  tvmrt rpc tracker --host 0.0.0.0 --port 9190 --stop-key secret
"""


def register(subparsers: Any) -> None:
    """Add the ``rpc`` verb with its ``server`` and ``tracker`` commands."""
    parser = subparsers.add_parser(
        "rpc",
        help="TVM's RPC server (for a board) and tracker",
        description="Serve TVM RPC clients (TVM <= 0.20 and >= 0.21, tvmrt's client) on this "
        "machine, or run a tracker that TVM's and tvmrt's servers and clients share. The "
        "server runs whatever code a client uploads: it binds 127.0.0.1 by default.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="rpc_command", metavar="COMMAND", required=True)
    server = commands.add_parser(
        "server",
        help="serve RPC sessions (python -m tvm.exec.rpc_server)",
        description="TVM's RPC server: clients upload libraries and run them on this "
        "machine's cpu (and opencl, where an OpenCL driver is installed). It runs whatever code a "
        "client uploads: it binds 127.0.0.1 unless --host says otherwise.",
        epilog=SERVER_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_server_arguments(server)
    server.set_defaults(handler=run_server)
    tracker = commands.add_parser(
        "tracker",
        help="run an RPC tracker (python -m tvm.exec.rpc_tracker)",
        description="TVM's RPC tracker: servers register under a key, clients request a "
        "server by key. TVM's and tvmrt's servers and clients share it.",
        epilog=TRACKER_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_tracker_arguments(tracker)
    tracker.set_defaults(handler=run_tracker)


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """TVM's ``rpc_server`` flags, plus ``--timeout`` and ``--workdir``."""
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    parser.add_argument("--port", type=int, default=9090, help="first port to try (9090)")
    parser.add_argument("--port-end", type=int, default=9199, help="end of the port range (9199)")
    parser.add_argument("--tracker", metavar="HOST:PORT", help="register with this tracker")
    parser.add_argument("--key", default="", help="the key clients request this server by")
    parser.add_argument("--custom-addr", help="address to report to the tracker")
    parser.add_argument(
        "--timeout",
        type=float,
        metavar="S",
        help="longest session in seconds, whatever the client asks (none)",
    )
    parser.add_argument(
        "--workdir", metavar="DIR", help="where each session's private folder is made (/tmp)"
    )
    parser.add_argument(
        "--max-packet-mb",
        type=int,
        default=1024,
        metavar="MB",
        help="largest packet (one upload) a client may send (1024)",
    )
    parser.add_argument(
        "--max-alloc-mb",
        type=int,
        default=4096,
        metavar="MB",
        help="largest single device allocation a client may ask for (4096)",
    )
    parser.add_argument(
        "--max-workdir-mb",
        type=int,
        default=4096,
        metavar="MB",
        help="bytes a session's folder may hold before an upload is refused; libraries "
        "linked from uploads count (4096)",
    )
    parser.add_argument("--load-library", help="extra shared libraries to load, ':'-separated")
    parser.add_argument("--silent", action="store_true", help="log warnings only")


def _address(text: str, flag: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise UsageError(f"{flag} {text!r}: expected HOST:PORT")
    return host, int(port)


def _logging(silent: bool) -> None:
    logging.basicConfig(
        level=logging.WARNING if silent else logging.INFO,
        format="%(asctime)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def run_server(args: argparse.Namespace) -> int:
    from tvmrt.rpc.server import RPCServer, ServerConfig
    from tvmrt.rpc.wire import Limits

    _logging(args.silent)
    for lib in (args.load_library or "").split(":"):
        if lib:
            ctypes.CDLL(lib, ctypes.RTLD_GLOBAL)
    for flag, value in (
        ("--max-packet-mb", args.max_packet_mb),
        ("--max-alloc-mb", args.max_alloc_mb),
        ("--max-workdir-mb", args.max_workdir_mb),
    ):
        if value <= 0:
            raise UsageError(f"{flag} {value}: expected a positive number")
    config = ServerConfig(
        host=args.host,
        port=args.port,
        port_end=args.port_end,
        key=args.key,
        tracker=_address(args.tracker, "--tracker") if args.tracker else None,
        custom_addr=args.custom_addr,
        timeout=args.timeout,
        workdir=Path(args.workdir) if args.workdir else None,
        limits=Limits(
            max_packet=args.max_packet_mb << 20,
            max_alloc=args.max_alloc_mb << 20,
            max_workdir=args.max_workdir_mb << 20,
        ),
    )
    try:  # a busy port range is a bad argument, as for tvmrt serve (exit 2)
        server = RPCServer(config)
    except InvalidArgumentError as exc:
        raise UsageError(f"{exc}; choose another --port (or a wider --port-end)") from None
    print(f"tvmrt rpc server: listening on {args.host}:{server.port}", flush=True)

    # SIGTERM ends the server as Ctrl-C does: the session is killed, its folder removed.
    # The interrupt is raised wherever the main thread is, and one raised inside a finalizer
    # or callback is printed and dropped, so the handler also asks the loop to stop.
    def on_term(signum: int, _frame: object) -> None:
        server.request_stop()
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


def add_tracker_arguments(parser: argparse.ArgumentParser) -> None:
    """TVM's ``rpc_tracker`` flags."""
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    parser.add_argument("--port", type=int, default=9190, help="first port to try (9190)")
    parser.add_argument("--port-end", type=int, default=9199, help="end of the port range (9199)")
    parser.add_argument("--stop-key", default="", help="a STOP message with this key stops it")
    parser.add_argument("--silent", action="store_true", help="log warnings only")


def run_tracker(args: argparse.Namespace) -> int:
    from tvmrt.rpc.tracker import Tracker

    _logging(args.silent)
    try:
        tracker = Tracker(args.host, args.port, args.port_end, args.stop_key)
    except InvalidArgumentError as exc:
        raise UsageError(f"{exc}; choose another --port (or a wider --port-end)") from None
    print(f"tvmrt rpc tracker: listening on {args.host}:{tracker.port}", flush=True)
    tracker.serve_forever()
    return 0
