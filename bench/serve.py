"""``tvmrt serve`` against ``GraphModule.run`` in-process: throughput, p50/p99, overhead.

The server is the real entry point (``python -m tvmrt serve ARTIFACT --workers K``) in a
child process; clients are threads here, one keep-alive HTTP connection each, sending the
binary-tensor form that tritonclient sends by default. The reference, measured in this
process before each server starts, is K threads each looping ``set_input``/``run``/
``get_output`` on its own executor (weights shared): the most the server could reach.
Overhead per request: an HTTP request and an in-process run alternated pairwise (so load
from other processes on a shared machine hits both alike), median of the differences; for
MobileNet v1 and for the iris MLP factory (4 -> 10 -> 3), whose run costs microseconds.

With ``--compare OTHER/src`` every server also runs from another source tree (the code
before a change), alternated with this one in the same run. With ``--batched DIR`` (made
by ``bench/build_mobilenet_batch.py``) a batch-4 build served with dynamic batching is
compared with in-process runs of the batch-1 build, and its answers with theirs, bitwise.

    python bench/serve.py [--artifact DIR] [--tiny deploy_lib.tar] [--requests 24]
                          [--compare SRC] [--batched DIR]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from tvmrt.artifact import find_artifact
from tvmrt.serve.model import load_model
from tvmrt.serve.server import free_port

ROOT = Path(__file__).resolve().parents[1]


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def in_process(artifact: str, workers: int, per_thread: int) -> tuple[float, list[float]]:
    """(runs/s, latencies in s) of K threads each running its own executor."""
    model = load_model("m", find_artifact(artifact), workers=workers)
    rng = np.random.default_rng(0)
    feeds = {s.name: rng.standard_normal(s.shape).astype("float32") for s in model.inputs}
    latencies: list[float] = []
    lock = threading.Lock()

    def loop(module: Any) -> None:
        mine = []
        for _ in range(per_thread):
            t = time.perf_counter()
            for name, arr in feeds.items():
                module.set_input(name, arr)
            module.run()
            module.get_output(0).numpy()
            mine.append(time.perf_counter() - t)
        with lock:
            latencies.extend(mine)

    for module in model.executors:  # warm-up
        module.run()
    threads = [threading.Thread(target=loop, args=(m,)) for m in model.executors]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    model.close()
    return len(latencies) / elapsed, latencies


def handle_only(artifact: str, count: int) -> tuple[float, list[float]]:
    """(requests/s, latencies) of ``InferenceApp.handle`` called in-process: protocol
    parsing, queueing and encoding, without HTTP."""
    import asyncio

    from tvmrt.serve.app import InferenceApp

    model = load_model("tiny", find_artifact(artifact), workers=1)
    app = InferenceApp([model])
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(s.shape).astype("<f4") for s in model.inputs]
    body, header_len = binary_body([s.metadata() for s in model.inputs], arrays)
    headers = {"inference-header-content-length": str(header_len)}

    async def loop() -> list[float]:
        out = []
        for _ in range(count):
            t = time.perf_counter()
            reply = await app.handle("POST", "/v2/models/tiny/infer", headers, body)
            out.append(time.perf_counter() - t)
            if reply.status != 200:
                raise RuntimeError(reply.body.decode())
        return out

    start = time.perf_counter()
    latencies = asyncio.run(loop())
    elapsed = time.perf_counter() - start
    model.close()
    return len(latencies) / elapsed, latencies


def binary_body(
    inputs: list[dict[str, Any]], arrays: list[np.ndarray[Any, Any]]
) -> tuple[bytes, int]:
    for item, arr in zip(inputs, arrays, strict=True):
        item["parameters"] = {"binary_data_size": arr.nbytes}
    header = json.dumps({"inputs": inputs, "parameters": {"binary_data_output": True}}).encode()
    return header + b"".join(a.tobytes() for a in arrays), len(header)


class Server:
    """``python -m tvmrt serve`` in a child process."""

    def __init__(self, args: list[str], src: Path = ROOT / "src") -> None:
        self.port = free_port()
        env = {**os.environ, "PYTHONPATH": str(src)}
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in stop)
        command = [sys.executable, "-m", "tvmrt", "serve", *args, "--port", str(self.port)]
        self.proc = subprocess.Popen(
            [*command, "--log-level", "warning"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=self.log,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request("GET", "/v2/health/ready")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.log.seek(0)
                raise RuntimeError(f"server did not start: {self.log.read().decode()}")
            time.sleep(0.1)

    def get(self, path: str) -> Any:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        conn.request("GET", path)
        return json.loads(conn.getresponse().read())

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()


def load(server: Server, name: str, concurrency: int, per_client: int) -> tuple[float, list[float]]:
    """(requests/s, latencies in s) of ``concurrency`` clients, ``per_client`` requests each."""
    meta = server.get(f"/v2/models/{name}")
    rng = np.random.default_rng(1)
    for i in meta["inputs"]:  # a batched model's -1: requests of one row
        i["shape"] = [1 if d == -1 else d for d in i["shape"]]
    arrays = [rng.standard_normal(i["shape"]).astype("<f4") for i in meta["inputs"]]
    inputs = [
        {"name": i["name"], "shape": i["shape"], "datatype": i["datatype"]} for i in meta["inputs"]
    ]
    body, header_len = binary_body(inputs, arrays)
    headers = {"Inference-Header-Content-Length": str(header_len)}
    latencies: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    # every client warms up, then all start together: the timed window holds only the
    # counted requests (a warm-up inside it undercounted the rate by concurrency/(total))
    ready = threading.Barrier(concurrency + 1)

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        conn.request("POST", f"/v2/models/{name}/infer", body, headers)  # warm-up
        conn.getresponse().read()
        ready.wait(300)
        mine = []
        for _ in range(per_client):
            t = time.perf_counter()
            conn.request("POST", f"/v2/models/{name}/infer", body, headers)
            resp = conn.getresponse()
            resp.read()
            mine.append(time.perf_counter() - t)
            if resp.status != 200:
                failures.append(str(resp.status))
        with lock:
            latencies.extend(mine)
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    for t in threads:
        t.start()
    ready.wait(300)
    start = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    if failures:
        raise RuntimeError(f"{len(failures)} requests failed: {sorted(set(failures))}")
    return len(latencies) / elapsed, latencies


def row(label: str, rate: float, lat: list[float]) -> str:
    return (
        f"| {label} | {rate:8.1f} | {statistics.median(lat) * 1e3:8.2f} | "
        f"{percentile(lat, 99) * 1e3:8.2f} |"
    )


def paired_overhead(server: Server, name: str, artifact: str, count: int) -> list[float]:
    """Per-request server overhead in s: one HTTP request and one in-process run,
    alternated ``count`` times, so load from other processes hits both alike."""
    model = load_model("ref", find_artifact(artifact), workers=1)
    module = model.executors[0]
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(s.shape).astype("<f4") for s in model.inputs]
    body, header_len = binary_body([s.metadata() for s in model.inputs], arrays)
    headers = {"Inference-Header-Content-Length": str(header_len)}
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    diffs = []
    for k in range(count + 2):
        t0 = time.perf_counter()
        for spec, arr in zip(model.inputs, arrays, strict=True):
            module.set_input(spec.name, arr)
        module.run()
        module.get_output(0).numpy()
        t1 = time.perf_counter()
        conn.request("POST", f"/v2/models/{name}/infer", body, headers)
        resp = conn.getresponse()
        resp.read()
        t2 = time.perf_counter()
        if resp.status != 200:
            raise RuntimeError(f"request failed: {resp.status}")
        if k >= 2:  # the first two warm up
            diffs.append((t2 - t1) - (t1 - t0))
    conn.close()
    model.close()
    return diffs


def check_batched(server: Server, name: str, single: str, count: int) -> str:
    """Send ``count`` different 1-row requests at once; compare every answer with an
    unbatched in-process run of the batch-1 build ``single``; say how they compared."""
    model = load_model("ref", find_artifact(single), workers=1)
    module, spec = model.executors[0], model.inputs[0]
    rng = np.random.default_rng(2)
    xs = [rng.standard_normal(spec.shape).astype("<f4") for _ in range(count)]
    before = server.get(f"/v2/models/{name}/stats")["model_stats"][0]["execution_count"]
    item = {"name": spec.name, "shape": list(spec.shape), "datatype": "FP32"}

    def ask(x: np.ndarray[Any, Any]) -> bytes:
        body, header_len = binary_body([dict(item)], [x])
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        conn.request(
            "POST",
            f"/v2/models/{name}/infer",
            body,
            {"Inference-Header-Content-Length": str(header_len)},
        )
        resp = conn.getresponse()
        data = resp.read()
        start = int(resp.getheader("Inference-Header-Content-Length") or len(data))
        return data[start:]

    with ThreadPoolExecutor(count) as pool:
        answers = list(pool.map(ask, xs))
    runs = server.get(f"/v2/models/{name}/stats")["model_stats"][0]["execution_count"] - before
    equal = 0
    for x, got in zip(xs, answers, strict=True):
        module.set_input(spec.name, x)
        module.run()
        equal += module.get_output(0).numpy().tobytes() == got
    model.close()
    return f"{equal}/{count} answers bitwise equal to unbatched in-process runs, in {runs} runs"


def paired_rounds(
    args: argparse.Namespace,
    artifact: str,
    servers: list[tuple[str, Server]],
    workers: int,
    conc: int,
) -> None:
    """``args.rounds`` rounds of: the in-process reference (``artifact``, K threads), then
    each server (model ``m``), the same number of requests each; rows pool the rounds, and
    ``vs in-process`` is the median over rounds of (server rate / reference rate in the
    same round)."""
    per_client = max(4, args.requests * 2 // conc)
    per_thread = max(1, per_client * conc // workers)
    ref_rates: list[float] = []
    ref_lat: list[float] = []
    # per server tag (the one tree's tag is ""): its rate over the round's reference rate
    pooled: dict[str, tuple[list[float], list[float]]] = {}
    for k in range(args.rounds):
        rate, lat = in_process(artifact, workers, per_thread)
        ref_rates.append(rate)
        ref_lat.extend(lat)
        for tag, server in servers if k % 2 == 0 else servers[::-1]:  # no order bias
            got = load(server, "m", conc, per_client)
            mine = pooled.setdefault(tag, ([], []))
            mine[0].append(got[0] / rate)
            mine[1].extend(got[1])
    label = f"in-process GraphModule.run, K={workers} threads (paired with c={conc})"
    print(f"{row(label, statistics.median(ref_rates), ref_lat)} 1 |")
    for tag, (ratios, lat) in pooled.items():
        rate = statistics.median(ratios) * statistics.median(ref_rates)
        label = f"tvmrt serve{tag}, K={workers}, concurrency {conc}"
        print(f"{row(label, rate, lat)} {statistics.median(ratios):.2f} |", flush=True)


def main() -> None:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifact", default=str(ROOT.parent / "shared/artifacts/mobilenet_v1"))
    parser.add_argument(
        "--tiny", default=str(ROOT.parent / "shared/artifacts/iris-factory/deploy_lib.tar")
    )
    parser.add_argument("--requests", type=int, default=24, help="requests per client (c=1)")
    parser.add_argument("--rounds", type=int, default=3, help="paired rounds per row (3)")
    parser.add_argument(
        "--compare",
        metavar="SRC",
        help="another tvmrt source tree (its src/): each server "
        "is also run from it, alternated with this one",
    )
    parser.add_argument(
        "--batched",
        metavar="DIR",
        help="b1/ and b<B>/ of bench/build_mobilenet_batch.py: "
        "serve b<B> with dynamic batching against in-process runs of b1",
    )
    parser.add_argument(
        "--batched-only", action="store_true", help="measure only the --batched rows"
    )
    parser.add_argument(
        "--batch-wait-us", type=int, help="the batched server's --batch-wait-us (its default: 0)"
    )
    args = parser.parse_args()
    trees = [("", ROOT / "src")]
    if args.compare:
        trees = [(" [base]", Path(args.compare)), (" [this]", ROOT / "src")]
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("| configuration | req/s | p50 ms | p99 ms | vs in-process |")
    print("|---|---:|---:|---:|---:|")
    overhead: dict[str, list[float]] = {}
    for workers in () if args.batched_only else (1, 2):
        servers = [
            (tag, Server([args.artifact, "--name", "m", "--workers", str(workers)], src))
            for tag, src in trees
        ]
        try:
            for conc in (1, 4, 16):
                paired_rounds(args, args.artifact, servers, workers, conc)
            if workers == 1:
                for tag, server in servers:
                    overhead[f"MobileNet v1{tag}"] = paired_overhead(
                        server, "m", args.artifact, 100
                    )
        finally:
            for _, server in servers:
                server.stop()
    if args.batched:
        single = str(Path(args.batched) / "b1")
        batched = str(next(p for p in sorted(Path(args.batched).glob("b*")) if p.name != "b1"))
        size = Path(batched).name[1:]
        print(f"| *batch-{size} build served with dynamic batching; reference: batch-1 build* ||||")
        wait = [] if args.batch_wait_us is None else ["--batch-wait-us", str(args.batch_wait_us)]
        server = Server([batched, "--name", "m", *wait])  # batching on by default where safe
        try:
            for conc in (1, 4, 16):
                tag = f" (batch-{size} build, batching)"
                paired_rounds(args, single, [(tag, server)], 1, conc)
            print(f"batched answers: {check_batched(server, 'm', single, 16)}")
        finally:
            server.stop()
    if args.batched_only:
        return
    # a model whose run costs microseconds: what the server adds per request
    rate, lat = in_process(args.tiny, 1, 2000)
    print(row("in-process GraphModule.run, iris MLP, K=1", rate, lat))
    rate, lat = handle_only(args.tiny, 2000)
    print(row("InferenceApp.handle (protocol + queue, no HTTP), iris MLP", rate, lat))
    for tag, src in trees:
        server = Server([args.tiny, "--name", "tiny", "--workers", "1"], src)
        try:
            rate, lat = load(server, "tiny", 1, 1000)
            print(row(f"tvmrt serve{tag}, iris MLP, K=1, concurrency 1", rate, lat))
            overhead[f"iris MLP{tag}"] = paired_overhead(server, "tiny", args.tiny, 500)
        finally:
            server.stop()
    print()
    print("server overhead per request, K=1, concurrency 1 (HTTP request minus in-process run,")
    print("alternated pairwise): ", end="")
    print(
        "; ".join(
            f"{k}: median {statistics.median(v) * 1e3:.2f} ms (p10 {percentile(v, 10) * 1e3:.2f}, "
            f"p90 {percentile(v, 90) * 1e3:.2f})"
            for k, v in overhead.items()
        )
    )
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
