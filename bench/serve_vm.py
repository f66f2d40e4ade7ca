"""``tvmrt serve`` of a Relay VM model at batch 1: latency on the C VM against the Python
interpreter (before/after the VM face moved to C).

Two servers of the same ``vm.so`` folder run side by side as child processes
(``python -m tvmrt serve``, one worker), one with ``TVMRT_VM_ENGINE=python`` and one with
``TVMRT_VM_ENGINE=native``. One client (a keep-alive HTTP connection to each) alternates
requests between them, so load from other processes hits both alike; the binary-tensor
form tritonclient sends by default. Reported: median and p90 latency of each, and the
median of the paired differences.

    python bench/serve_vm.py [--requests 500] [--case dyn-batch-mlp]
"""

from __future__ import annotations

import argparse
import http.client
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve import Server, binary_body, percentile

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(os.environ.get("TVMRT_ARTIFACTS", ROOT.parent / "shared" / "artifacts"))
INPUTS = {"dyn-batch-mlp": ("x", (1, 16)), "cnn-static": ("data", None)}
SIGNATURES = {"dyn-batch-mlp": "x:float32:-1,16", "cnn-static": "data:float32:1,3,16,16"}


def _body(case: str) -> tuple[bytes, dict[str, str]]:
    name, shape = INPUTS[case]
    if shape is None:
        with np.load(ARTIFACTS / "relayvm" / case / "golden.npz") as g:
            arr = np.asarray(g[name], "<f4")
    else:
        arr = np.random.default_rng(0).standard_normal(shape).astype("<f4")
    inputs = [{"name": name, "shape": list(arr.shape), "datatype": "FP32"}]
    body, header_len = binary_body(inputs, [arr])
    return body, {"Inference-Header-Content-Length": str(header_len)}


def _request(conn: http.client.HTTPConnection, body: bytes, headers: dict[str, str]) -> float:
    start = time.perf_counter()
    conn.request("POST", "/v2/models/m/infer", body, headers)
    resp = conn.getresponse()
    data = resp.read()
    took = time.perf_counter() - start
    if resp.status != 200:
        raise RuntimeError(f"status {resp.status}: {data[:300]!r}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--case", default="dyn-batch-mlp", choices=sorted(INPUTS))
    args = parser.parse_args()
    folder = ARTIFACTS / "relayvm" / args.case
    servers = {}
    try:
        for engine in ("python", "native"):
            os.environ["TVMRT_VM_ENGINE"] = engine
            flags = ["--name", "m", "--workers", "1", "--input", SIGNATURES[args.case]]
            servers[engine] = Server([str(folder), *flags])
        os.environ.pop("TVMRT_VM_ENGINE")
        body, headers = _body(args.case)
        conns = {
            e: http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
            for e, s in servers.items()
        }
        lat: dict[str, list[float]] = {e: [] for e in servers}
        for k in range(args.requests + 20):
            order = ("python", "native") if k % 2 == 0 else ("native", "python")
            got = {e: _request(conns[e], body, headers) for e in order}
            if k >= 20:  # warm-up
                for e, t in got.items():
                    lat[e].append(t)
    finally:
        for server in servers.values():
            server.stop()
    diffs = [p - n for p, n in zip(lat["python"], lat["native"], strict=True)]
    print(f"tvmrt serve {args.case}, batch 1, 1 worker, {args.requests} requests each, alternated")
    print("| engine | p50 ms | p90 ms |")
    print("|---|---:|---:|")
    for e in ("python", "native"):
        p50, p90 = statistics.median(lat[e]) * 1e3, percentile(lat[e], 90) * 1e3
        print(f"| {e} | {p50:.3f} | {p90:.3f} |")
    print(f"median paired difference (python - native): {statistics.median(diffs) * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
