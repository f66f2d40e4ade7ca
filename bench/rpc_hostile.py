"""``tvmrt rpc tracker`` and ``tvmrt rpc server`` under hostile connections, on 127.0.0.1.

Both run as the real entry points in child processes (the server registered with the
tracker). For the duration, ``--conns`` connections *of each kind* are held open against
each, reopened whenever the peer closes them:

- tracker: idle after the magic (a legitimate but silent client), a magic trickled one
  byte a second, SUMMARY requests pipelined and never read, and a malformed message
  (``Infinity`` priority, nesting 30,000 deep, a wrong magic) sent again and again;
- server: connected and silent, a handshake trickled one byte a second, and a wrong magic.

Meanwhile one honest client PINGs the tracker on a fresh connection and one opens an RPC
session (connect, ``listdir``, close), each in a loop; the report gives their success
count and latency p50/p99, and both processes' RSS before and after (and peak). Every loop
stops at the deadline.

    python bench/rpc_hostile.py [--conns 200] [--seconds 60]

Sizes also come from ``TVMRT_RPC_HOSTILE_CONNS`` / ``TVMRT_RPC_HOSTILE_S`` (the test of
``tests/rpc/test_rpc_hostile_bench.py`` runs a short one).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import statistics
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
SRC = Path(__file__).resolve().parents[1] / "src"
TRACKER_MAGIC = 0x2F271
RPC_MAGIC = 0xFF271


def _frame(body: bytes) -> bytes:
    return struct.pack("<i", len(body)) + body


MAGIC = struct.pack("<i", TRACKER_MAGIC)
GARBAGE = [
    MAGIC + _frame(b'[4, "k", "", Infinity]'),
    MAGIC + _frame(b"[" * 30000 + b"]" * 30000),
    struct.pack("<i", 0x1234) + b"junk",
]


def _status_kb(pid: int, key: str) -> int:
    """``key`` of ``/proc/PID/status`` in KiB; 0 once the process is gone (reaped)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except FileNotFoundError:
        pass
    return 0


@contextmanager
def _rpc(*args: str) -> Iterator[tuple[subprocess.Popen[str], int]]:
    env = dict(os.environ, PYTHONPATH=str(SRC))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tvmrt", "rpc", *args, "--port", "0", "--silent"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        found = re.search(r":(\d+)$", proc.stdout.readline().strip())
        if found is None:
            raise RuntimeError(f"tvmrt rpc {args[0]} did not start")
        yield proc, int(found.group(1))
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


# -- hostile connections (asyncio, one loop in a thread) -------------------------------
async def _hold(port: int, first: bytes, trickle: bytes, repeat: bytes, stop: float) -> None:
    """One hostile connection, reopened when closed, until ``stop`` (monotonic)."""
    while time.monotonic() < stop:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, port), 5)
        except (OSError, asyncio.TimeoutError):
            await asyncio.sleep(0.5)
            continue
        try:
            writer.write(first)
            for byte in trickle:
                if time.monotonic() >= stop:
                    break
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(1.0)
            if repeat:  # pipelined requests, never read: the transport stops reading soon
                writer.transport.pause_reading()
                for _ in range(100):
                    writer.write(repeat)
                await asyncio.sleep(max(0.0, stop - time.monotonic()))
            else:
                left = max(0.0, stop - time.monotonic())
                await asyncio.wait_for(reader.read(1 << 16), left)  # until the peer closes
                while await asyncio.wait_for(reader.read(1 << 16), left):
                    pass
        except (OSError, asyncio.TimeoutError):
            pass
        finally:
            writer.close()
        await asyncio.sleep(0.05)


async def _hostile(tracker: int, server: int, conns: int, stop: float) -> None:
    summary = _frame(b"[6]")
    handshake = struct.pack("<ii", RPC_MAGIC, 20) + b"client:" + b"x" * 13
    kinds = [
        (tracker, MAGIC, b"", b""),  # idle after the magic
        (tracker, b"", MAGIC, b""),  # magic trickled
        (tracker, MAGIC, b"", summary),  # never reads
        (server, b"", b"", b""),  # silent
        (server, b"", handshake, b""),  # handshake trickled
    ]
    tasks = [
        asyncio.create_task(_hold(port, first, trickle, repeat, stop))
        for port, first, trickle, repeat in kinds
        for _ in range(conns)
    ]
    for i in range(conns):  # malformed messages / wrong magic, again and again
        payload = GARBAGE[i % len(GARBAGE)]
        tasks.append(asyncio.create_task(_hold(tracker, payload, b"", b"", stop)))
        tasks.append(asyncio.create_task(_hold(server, b"\x01\x02\x03\x04" * 2, b"", b"", stop)))
    await asyncio.gather(*tasks)


# -- honest clients ---------------------------------------------------------------------
def _honest_ping(port: int, stop: float, out: dict[str, Any]) -> None:
    from tvmrt.rpc.tracker_client import TrackerConnection

    while time.monotonic() < stop:
        start = time.monotonic()
        try:
            conn = TrackerConnection((HOST, port), timeout=30)
            try:
                ok = conn.call(1) == 0
            finally:
                conn.close()
        except Exception as exc:  # counted, not fatal: the report says how many failed
            out["errors"].append(str(exc)[:120])
            ok = False
        if ok:
            out["ms"].append((time.monotonic() - start) * 1e3)
        time.sleep(0.1)


def _honest_session(tracker: int, stop: float, out: dict[str, Any]) -> None:
    """Ask the tracker for the server (a fresh match key) and run a session on it."""
    from tvmrt import rpc

    while time.monotonic() < stop:
        start = time.monotonic()
        try:
            client = rpc.connect_tracker(HOST, tracker)
            session = client.request("b", session_timeout=30, max_retry=1)
            client.close()
            session.listdir(".")
            session.close()
            out["ms"].append((time.monotonic() - start) * 1e3)
        except Exception as exc:  # counted, not fatal
            out["errors"].append(str(exc)[:120])
        time.sleep(0.2)


def _stats(out: dict[str, Any]) -> dict[str, Any]:
    ms = sorted(out["ms"])
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))] if ms else None
    return {
        "ok": len(ms),
        "failed": len(out["errors"]),
        "p50_ms": round(statistics.median(ms), 2) if ms else None,
        "p99_ms": round(p99, 2) if p99 is not None else None,
        "max_ms": round(ms[-1], 2) if ms else None,
        "first_errors": out["errors"][:3],
    }


def run(conns: int, seconds: float) -> dict[str, Any]:
    """Run the bench; the report as a dict (``alive``, honest latencies, RSS in MB)."""
    sys.path.insert(0, str(SRC))
    with contextlib.ExitStack() as stack:
        tproc, tport = stack.enter_context(_rpc("tracker"))
        server = stack.enter_context(_rpc("server", "--tracker", f"{HOST}:{tport}", "--key", "b"))
        return _measure(conns, seconds, (tproc, tport), server)


def _measure(
    conns: int,
    seconds: float,
    tracker: tuple[subprocess.Popen[str], int],
    server: tuple[subprocess.Popen[str], int],
) -> dict[str, Any]:
    (tproc, tport), (sproc, sport) = tracker, server
    procs = {"tracker": tproc, "server": sproc}
    time.sleep(1.0)

    def rss(key: str) -> dict[str, float]:
        return {n: round(_status_kb(p.pid, key) / 1024, 1) for n, p in procs.items()}

    before = rss("VmRSS")
    stop = time.monotonic() + seconds
    pings: dict[str, Any] = {"ms": [], "errors": []}
    sessions: dict[str, Any] = {"ms": [], "errors": []}
    attack = threading.Thread(target=lambda: asyncio.run(_hostile(tport, sport, conns, stop)))
    attack.start()
    time.sleep(min(2.0, seconds / 4))  # the hostile connections are in place
    honest = [
        threading.Thread(target=_honest_ping, args=(tport, stop, pings)),
        threading.Thread(target=_honest_session, args=(tport, stop, sessions)),
    ]
    for t in honest:
        t.start()
    for t in honest:
        t.join()
    attack.join(seconds + 30)
    return {
        "conns_per_kind": conns,
        "seconds": seconds,
        "alive": {n: p.poll() is None for n, p in procs.items()},
        "tracker_ping": _stats(pings),
        "rpc_session": _stats(sessions),
        "rss_mb_before": before,
        "rss_mb_after": rss("VmRSS"),
        "peak_rss_mb": rss("VmHWM"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--conns", type=int, default=int(os.environ.get("TVMRT_RPC_HOSTILE_CONNS", "200"))
    )
    parser.add_argument(
        "--seconds", type=float, default=float(os.environ.get("TVMRT_RPC_HOSTILE_S", "60"))
    )
    args = parser.parse_args()
    print(json.dumps(run(args.conns, args.seconds), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
