"""What ``import tvmrt`` costs, with the native library made global at import and without.

Method
------
Each sample is a fresh interpreter timing ``import tvmrt`` (``time.perf_counter`` around the
statement). The two settings alternate, sample by sample (paired runs): the default, where
the import also ``dlopen``s ``libtvmrt_runtime.so`` ``RTLD_GLOBAL`` (so that
``ctypes.CDLL`` of a system library finds ``TVMBackendRegisterSystemLibSymbol``), and
``TVMRT_LOCAL_SYMBOLS=1``, which leaves the library to its first use. Medians and minima in
milliseconds, and the median of the per-pair differences.

Usage::

    .venv/bin/python bench/import_cost.py [--runs 60]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

_CODE = "import time; t = time.perf_counter(); import tvmrt; print(time.perf_counter() - t)"
_SETTINGS = {
    "global at import (default)": {},
    "TVMRT_LOCAL_SYMBOLS=1": {"TVMRT_LOCAL_SYMBOLS": "1"},
}


def _sample(env: dict[str, str]) -> float:
    done = subprocess.run(
        [sys.executable, "-c", _CODE],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **env},
    )
    return float(done.stdout) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=60, help="samples of each setting")
    args = parser.parse_args()
    samples: dict[str, list[float]] = {name: [] for name in _SETTINGS}
    for _ in range(args.runs):
        for name, env in _SETTINGS.items():
            samples[name].append(_sample(env))
    for name, values in samples.items():
        print(f"{name:28} median {statistics.median(values):6.1f} ms  min {min(values):6.1f} ms")
    first, second = samples.values()
    diffs = [a - b for a, b in zip(first, second, strict=True)]
    print(f"{'paired difference':28} median {statistics.median(diffs):+6.1f} ms")


if __name__ == "__main__":
    main()
