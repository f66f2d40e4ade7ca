"""``--rpc HOST:PORT`` and ``--rpc-tracker HOST:PORT --rpc-key KEY`` for run/bench/profile/serve.

tvmc's flags: with them the command's device is the RPC server's ``--device`` (directly,
or on a server the tracker hands out for the key); ``load_artifact`` uploads the library
there and the server runs the model; the command prints what it prints for a local run.
The session lasts as long as the command.
"""

from __future__ import annotations

import argparse
import atexit
import sys
from typing import TYPE_CHECKING, Any

from tvmrt.error import RPCError, UsageError

if TYPE_CHECKING:
    from tvmrt.runtime.device import Device

__all__ = ["add_rpc_arguments", "remote_requested", "remote_device", "CONNECT_WAIT", "TRACKER_WAIT"]

CONNECT_WAIT = 10.0  # seconds: a TCP connect, a handshake, a session's init, a tracker's answer
TRACKER_WAIT = 30.0  # seconds in the tracker's queue for a free server of the key


def add_rpc_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--rpc``, ``--rpc-tracker``, ``--rpc-key`` and ``--rpc-timeout``."""
    group = parser.add_argument_group(
        "remote run (TVM RPC)",
        "run on an RPC server (`tvmrt rpc server` or TVM's `python -m tvm.exec.rpc_server`); "
        "the library is uploaded and runs there",
    )
    group.add_argument("--rpc", metavar="HOST:PORT", help="the RPC server to run on")
    group.add_argument(
        "--rpc-tracker", metavar="HOST:PORT", help="an RPC tracker to request a server from"
    )
    group.add_argument(
        "--rpc-key",
        metavar="KEY",
        help="the device key: to request from --rpc-tracker, or the key a server started "
        "with --key takes (--rpc)",
    )
    group.add_argument(
        "--rpc-timeout",
        type=float,
        default=0,
        metavar="SECONDS",
        help="ask the server to end the session after this long (0: never), and wait at most "
        f"this long for each step: connecting and the handshakes (default "
        f"{CONNECT_WAIT:g} s), a free server of --rpc-key at the tracker (default "
        f"{TRACKER_WAIT:g} s)",
    )


def remote_requested(args: argparse.Namespace) -> bool:
    """Whether the command line asks for a remote run."""
    return bool(getattr(args, "rpc", None) or getattr(args, "rpc_tracker", None))


def _address(text: str, flag: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"{flag} must be HOST:PORT (e.g. 127.0.0.1:9090), got {text!r}")
    return host, int(port)


def _tracker_keys(summary: dict[str, Any]) -> list[str]:
    """The keys of the servers a tracker's summary lists (``server:KEY`` in TVM's)."""
    keys = {str(item.get("key", "")).split(":")[-1] for item in summary.get("server_info", [])}
    return sorted(k for k in keys if k)


def remote_device(args: argparse.Namespace, device: Device) -> Device:
    """Open the session the flags name and return its device of ``device``'s kind.

    ``load_artifact`` on that device runs the model on the server; the session lasts as
    long as the command.

    Raises
    ------
    UsageError
        If the flags do not fit together.
    RPCError
        If the server or tracker cannot be reached, or refuses.
    """
    from tvmrt import rpc

    if args.rpc and args.rpc_tracker:
        raise UsageError("give --rpc or --rpc-tracker, not both")
    if args.rpc_timeout < 0:
        raise UsageError(f"--rpc-timeout must not be negative, got {args.rpc_timeout}")
    step_wait = args.rpc_timeout or CONNECT_WAIT
    if args.rpc:
        host, port = _address(args.rpc, "--rpc")
        key = args.rpc_key or ""
        try:
            session = rpc.connect(
                host, port, key, session_timeout=args.rpc_timeout, connect_timeout=step_wait
            )
        except RPCError as exc:
            if "has a different key" not in str(exc):
                raise
            hint = (
                "pass the key the server was started with: --rpc-key KEY (tvmrt rpc server "
                "--key KEY takes clients of that key only)"
                if not key
                else f"the server was started with another --key than {key!r}"
            )
            raise RPCError(f"{exc}: {hint}") from None
    else:
        if not args.rpc_key:
            raise UsageError("--rpc-tracker needs --rpc-key KEY (the device key to request)")
        host, port = _address(args.rpc_tracker, "--rpc-tracker")
        tracker = rpc.connect_tracker(host, port, timeout=step_wait)
        try:
            keys = _tracker_keys(tracker.summary())
        except BaseException:
            tracker.close()
            raise
        known = ", ".join(keys) if keys else "none"
        try:
            queue_wait = args.rpc_timeout or TRACKER_WAIT
            print(
                f"tvmrt: waiting up to {queue_wait:g} s for a free RPC server of key "
                f"{args.rpc_key!r} at the tracker {host}:{port} (its servers' keys: {known})",
                file=sys.stderr,
                flush=True,
            )
            session = tracker.request(
                args.rpc_key, session_timeout=args.rpc_timeout, wait_timeout=queue_wait
            )
        except RPCError as exc:
            if args.rpc_key in keys:
                raise RPCError(f"{exc} (its servers' keys: {known})") from None
            raise RPCError(
                f"{exc}: no server of key {args.rpc_key!r} is registered there (its servers' "
                f"keys: {known})"
            ) from None
        finally:
            tracker.close()
    atexit.register(session.close)
    return session.device(device.device_type, device.device_id)
