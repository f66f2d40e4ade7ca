"""RPC servers side by side: tvmrt's against TVM 0.16's own, driven by tvmrt's client.

Both servers run on 127.0.0.1 as child processes with the same thread count
(``TVM_NUM_THREADS``); the client (this process) measures them alternately, round after
round, so load from other processes hits both alike. Per server:

* **empty call**: round trip of ``get_num_outputs`` of a remote graph executor (one
  ``kCallFunc`` that does no work), median over ``--calls`` calls per round;
* **copy MB/s**: a ``--mb`` MB float32 array to the server (``nd.array(x, remote_dev)``,
  ``kCopyToRemote``) and back (``.numpy()``, ``kCopyFromRemote``);
* **MobileNet v1 run**: ``run`` timed on the server (``time_evaluator``, no network), and
  ``set_input`` + ``run`` + ``get_output(0).numpy()`` timed at the client (end to end).

The figure of a round is the ratio tvmrt / TVM 0.16 (below 1.0: tvmrt is faster); the
median ratio over ``--rounds`` rounds is reported. TVM 0.16 is the hhb-tvm 3.2.3 wheel in
the peer venv (``tests/support/peers.py``; ``--tvm016-python``).

    python bench/rpc.py [--rounds 5] [--calls 200] [--mb 16] [--threads 1] [--baseline-src DIR]

``--baseline-src`` adds a third server, tvmrt's from another source tree (another
checkout's ``src``), measured in the same rounds: a paired before/after of a change.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import numpy as np

from tvmrt import nd, rpc
from tvmrt.contrib import graph_executor
from tvmrt.error import RPCError
from tvmrt.serve.server import free_port

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(os.environ.get("TVMRT_ARTIFACTS", ROOT.parent / "shared" / "artifacts"))
PEERS = Path(os.environ.get("TVMRT_PEERS_DIR", ROOT / "build" / "peers"))
HOST = "127.0.0.1"


@contextmanager
def server(
    command: list[str], threads: int, workdir: Path, src: str | None = None
) -> Iterator[int]:
    """Start ``command`` + ``--port P`` (tvmrt from ``src`` if given) and yield P once a
    client can connect."""
    port = free_port(HOST)
    env = dict(os.environ, TVM_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    if src is not None:
        env["PYTHONPATH"] = src
    log = open(workdir / f"server-{port}.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [*command, "--host", HOST, "--port", str(port), "--port-end", str(port + 1)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                rpc.connect(HOST, port).close()
                break
            except RPCError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.close()
                    text = (workdir / f"server-{port}.log").read_text(errors="replace")
                    raise SystemExit(f"{' '.join(command)} did not start:\n{text}") from None
                time.sleep(0.2)
        yield port
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
        log.close()


class Session:
    """One server's session with MobileNet v1 loaded and a copy buffer allocated."""

    def __init__(self, port: int, mb: float) -> None:
        folder = ARTIFACTS / "mobilenet_v1"
        self.remote = rpc.connect(HOST, port)
        self.dev = self.remote.cpu()
        self.remote.upload(str(folder / "deploy_lib.so"))
        lib = self.remote.load_module("deploy_lib.so")
        graph = (folder / "deploy_graph.json").read_text()
        self.module = graph_executor.create(graph, lib, self.dev)
        self.module.load_params((folder / "deploy_param.params").read_bytes())
        golden = np.load(folder / "golden.npz")
        self.data, self.expected = golden["data"], golden["output_0"]
        self.module.set_input("data", self.data)
        self.module.run()
        out = self.module.get_output(0).numpy()
        np.testing.assert_allclose(out, self.expected, rtol=1e-6, atol=1e-7)
        self.host = np.random.default_rng(0).standard_normal(int(mb * 1e6 / 4)).astype("float32")
        self.buffer = nd.array(self.host, self.dev)
        self.num_outputs = self.module._get_num_outputs
        self.timer = self.module.module.time_evaluator("run", self.dev, number=1, repeat=3)

    def empty_call_us(self, calls: int) -> float:
        samples = []
        for _ in range(calls):
            start = time.perf_counter_ns()
            self.num_outputs()
            samples.append((time.perf_counter_ns() - start) / 1e3)
        return statistics.median(samples)

    def upload_mbs(self) -> float:
        start = time.perf_counter()
        self.buffer.copyfrom(self.host)
        return self.host.nbytes / 1e6 / (time.perf_counter() - start)

    def download_mbs(self) -> float:
        start = time.perf_counter()
        back = self.buffer.numpy()
        elapsed = time.perf_counter() - start
        assert np.array_equal(back, self.host)
        return self.host.nbytes / 1e6 / elapsed

    def run_server_ms(self) -> float:
        return float(self.timer().median * 1e3)

    def run_end_to_end_ms(self) -> float:
        start = time.perf_counter()
        self.module.set_input("data", self.data)
        self.module.run()
        self.module.get_output(0).numpy()
        return (time.perf_counter() - start) * 1e3


METRICS: list[tuple[str, str, Callable[[Session, argparse.Namespace], float], bool]] = [
    ("empty call", "us", lambda s, a: s.empty_call_us(a.calls), False),
    ("copy to server", "MB/s", lambda s, a: s.upload_mbs(), True),
    ("copy from server", "MB/s", lambda s, a: s.download_mbs(), True),
    ("MobileNet run (server-timed)", "ms", lambda s, a: s.run_server_ms(), False),
    ("MobileNet end to end", "ms", lambda s, a: s.run_end_to_end_ms(), False),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=200, help="empty calls per round")
    parser.add_argument("--mb", type=float, default=16, help="copy size in MB (10^6 bytes)")
    parser.add_argument("--threads", type=int, default=1, help="kernel threads of both servers")
    parser.add_argument(
        "--tvm016-python", default=str(PEERS / "tvm016" / "bin" / "python"), metavar="PATH"
    )
    parser.add_argument(
        "--baseline-src",
        metavar="DIR",
        help="also run tvmrt's server from this source tree (e.g. another checkout's src) "
        "in the same rounds: a paired before/after",
    )
    args = parser.parse_args()
    if not Path(args.tvm016_python).exists():
        raise SystemExit(f"no TVM 0.16 peer at {args.tvm016_python} (see tests/support/peers.py)")
    commands = {
        "tvmrt": [sys.executable, "-m", "tvmrt.exec.rpc_server"],
        "tvm016": [args.tvm016_python, "-m", "tvm.exec.rpc_server"],
    }
    workdir = Path(tempfile.mkdtemp(prefix="bench-rpc-"))
    if args.baseline_src:
        commands["baseline"] = commands["tvmrt"]
    results: dict[str, dict[str, list[float]]] = {k: {m[0]: [] for m in METRICS} for k in commands}
    try:
        with ExitStack() as stack:
            sessions: dict[str, Session] = {}
            for which, command in commands.items():
                src = args.baseline_src if which == "baseline" else None
                port = stack.enter_context(server(command, args.threads, workdir, src))
                sessions[which] = Session(port, args.mb)
            for _ in range(args.rounds):
                for name, _unit, measure, _higher in METRICS:
                    for which in commands:
                        results[which][name].append(measure(sessions[which], args))
            for session in sessions.values():
                session.remote.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"{args.rounds} rounds, {args.threads} kernel thread(s) per server, copies of {args.mb} MB"
    )
    print(f"| {'measure':<30} | {'tvmrt':>10} | {'TVM 0.16':>10} | unit | time ratio |")
    print(f"|{'-' * 32}|{'-' * 12}:|{'-' * 12}:|------|-----------:|")
    for name, unit, _measure, higher in METRICS:
        ours, theirs = results["tvmrt"][name], results["tvm016"][name]
        # a time ratio either way: for rates, theirs / ours
        ratios = [(t / o) if higher else (o / t) for o, t in zip(ours, theirs, strict=True)]
        print(
            f"| {name:<30} | {statistics.median(ours):>10.2f} | "
            f"{statistics.median(theirs):>10.2f} | {unit:<4} | {statistics.median(ratios):>9.2f}x |"
        )
    if "baseline" in results:
        print(f"\nbaseline: tvmrt's server from {args.baseline_src}, same rounds")
        head = f"| {'measure':<30} | {'baseline':>10} | unit |"
        print(f"{head} baseline / TVM 0.16 | tvmrt / baseline |")
        print(f"|{'-' * 32}|{'-' * 12}:|------|--------------------:|-----------------:|")
        for name, unit, _measure, higher in METRICS:
            base, ours = results["baseline"][name], results["tvmrt"][name]
            theirs = results["tvm016"][name]
            vs_016 = [(t / b) if higher else (b / t) for b, t in zip(base, theirs, strict=True)]
            vs_base = [(b / o) if higher else (o / b) for o, b in zip(ours, base, strict=True)]
            print(
                f"| {name:<30} | {statistics.median(base):>10.2f} | {unit:<4} | "
                f"{statistics.median(vs_016):>18.2f}x | {statistics.median(vs_base):>15.2f}x |"
            )


if __name__ == "__main__":
    socket.setdefaulttimeout(None)
    main()
