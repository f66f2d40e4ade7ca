"""MLF AOT packages: the C compile at first load (cold) and the cached load after it.

For each package of the MLF AOT fixtures (tests/mlf_aot/build_mlf_aot_fixtures.py, built by the
test suite under ``build/mlf_aot/``), or the packages given, this times
``load_artifact`` (read the package, compile its C code with the CRT platform, load the
library, make the AOT executor) once with an empty cache folder and then ``--repeat``
times with the cache filled (the entry's digest is checked on every use), and one run.

    .venv/bin/python bench/mlf_aot_compile.py            # --repeat N, PACKAGE...
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _load(path: Path) -> tuple[float, float]:
    from tvmrt.artifact import find_artifact, load_artifact

    start = time.perf_counter()
    model = load_artifact(find_artifact(path))
    loaded = time.perf_counter() - start
    start = time.perf_counter()
    model.executor.run()
    return loaded, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("packages", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    packages = args.packages or sorted(REPO.glob("build/mlf_aot/*/*/*.tar"))
    if not packages:
        raise SystemExit("no packages: run tests/mlf_aot first, or name MLF AOT packages")
    print(f"{'package':<28} {'cold ms':>9} {'cached ms':>10} {'run ms':>8}")
    with tempfile.TemporaryDirectory(prefix="tvmrt-bench-mlf-") as cache:
        os.environ["TVMRT_CACHE_DIR"] = cache
        for path in packages:
            cold, _ = _load(path)
            warm = [_load(path) for _ in range(args.repeat)]
            cached = statistics.median(w[0] for w in warm)
            run = statistics.median(w[1] for w in warm)
            print(f"{path.name:<28} {cold * 1e3:>9.1f} {cached * 1e3:>10.2f} {run * 1e3:>8.3f}")


if __name__ == "__main__":
    main()
