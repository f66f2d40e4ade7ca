"""Load time of each Relay-era packaging form (relay016), cold and warm cache.

For every CPU artifact of ``relay016`` this times ``tvmrt.runtime.load_module`` + creating
the executor, once with an empty link cache (compile C sources, link objects) and then
``--repeat`` times with the cache filled. The reference, measured in the same process,
is the plain factory library (``linkparams-so/deploy.so``: one dlopen, no link step);
``ratio`` = form's warm load time / reference load time.

    .venv/bin/python bench/packaging_load.py            # --repeat N
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(
    os.environ.get("TVMRT_ARTIFACTS", Path(__file__).resolve().parents[2] / "shared" / "artifacts")
)
CASES = [
    ("linkparams-so", "deploy.so"),
    ("systemlib-so", "deploy.so"),
    ("systemlib-tar", "deploy.tar"),
    ("systemlib-seed-flow", "deploy_devc_c.tar"),
    ("aot-so", "deploy.so"),
    ("tvmc-package", "module.tar"),
    ("mlf-graph", "model_llvm.tar"),
    ("mlf-graph", "model_c_crt.tar"),
]


def _load(path: Path) -> float:
    from tvmrt import runtime

    start = time.perf_counter()
    lib = runtime.load_module(path)
    lib["default"](runtime.cpu(0))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tvmrt-bench-cache-") as cache:
        os.environ["TVMRT_CACHE_DIR"] = cache
        base = ROOT / "relay016"
        reference = statistics.median(
            _load(base / "linkparams-so" / "deploy.so") for _ in range(args.repeat)
        )
        print(f"{'form':42s} {'cold ms':>9s} {'warm ms':>9s} {'ratio':>7s}")
        for folder, file in CASES:
            path = base / folder / file
            cold = _load(path)
            warm = statistics.median(_load(path) for _ in range(args.repeat))
            name = f"{folder}/{file}"
            ratio = warm / reference
            print(f"{name:42s} {cold * 1e3:9.1f} {warm * 1e3:9.2f} {ratio:7.2f}")
        print(f"reference (linkparams-so/deploy.so, warm): {reference * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
