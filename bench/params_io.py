"""Benchmark of the params format: load_param_dict / save_param_dict throughput.

Runs on the largest ``.params`` file under the artifacts folder (``../shared/artifacts``,
or ``$TVMRT_ARTIFACTS``) and compares with a plain numpy reference measured in the same
run on the same bytes:

* load reference: ``np.frombuffer(blob, ...).copy()`` over each tensor's byte range of the
  blob already in memory (the tensor offsets are found before timing);
* save reference: ``bytearray().join(...)`` of every tensor's raw bytes (one copy of the
  data, no headers).

Usage: ``.venv/bin/python bench/params_io.py [--repeat N] [--file PATH]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tvmrt.runtime.params import load_param_dict, save_param_dict

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(os.environ.get("TVMRT_ARTIFACTS", REPO.parent / "shared" / "artifacts"))

TensorRange = tuple[str, int, int, np.dtype[Any], tuple[int, ...]]


def tensor_ranges(blob: bytes) -> list[TensorRange]:
    """(name, offset, nbytes, numpy dtype, shape) of every tensor's data in a params blob."""
    loaded = load_param_dict(blob)  # validates the blob; gives dtypes and shapes
    offset = 16
    (count,) = struct.unpack_from("<Q", blob, offset)
    offset += 8
    for _ in range(count):
        (length,) = struct.unpack_from("<Q", blob, offset)
        offset += 8 + length
    offset += 8  # tensor count
    ranges = []
    for name, arr in loaded.items():
        offset += 40 + 8 * arr.ndim  # magic, reserved, device, ndim, dtype, shape, size
        ranges.append((name, offset, arr.nbytes, arr.dtype.numpy_dtype, arr.shape))
        offset += arr.nbytes
    return ranges


def reference_load(blob: bytes, ranges: list[TensorRange]) -> dict[str, np.ndarray[Any, Any]]:
    """Plain numpy: copy every tensor's bytes out of the in-memory blob into a dict."""
    return {
        name: np.frombuffer(blob, dtype=dtype, count=nbytes // dtype.itemsize, offset=offset)
        .reshape(shape)
        .copy()
        for name, offset, nbytes, dtype, shape in ranges
    }


def reference_save(arrays: list[np.ndarray[Any, Any]]) -> bytearray:
    """Plain numpy: one buffer holding every tensor's raw bytes."""
    return bytearray().join(a.reshape(-1).view(np.uint8).data for a in arrays)


def median_seconds(
    ours: Callable[[], object], reference: Callable[[], object], repeat: int
) -> tuple[float, float]:
    """Median wall times of ``ours`` and ``reference``, run alternately, after a warm-up.

    Alternating gives both the same allocator state (whether fresh pages must be
    faulted in dominates at these sizes); each result is freed after its timer stops.
    """
    ours()
    reference()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for func, out in ((ours, times[0]), (reference, times[1])):
            gc.collect()
            start = time.perf_counter()
            result = func()
            out.append(time.perf_counter() - start)
            del result
    return statistics.median(times[0]), statistics.median(times[1])


def largest_params_file() -> Path:
    files = sorted(ARTIFACTS.rglob("*.params"), key=lambda p: p.stat().st_size)
    if not files:
        sys.exit(f"no .params files under {ARTIFACTS} (set TVMRT_ARTIFACTS)")
    return files[-1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15, help="timed runs per case (median)")
    parser.add_argument("--file", type=Path, default=None, help="params file (default: largest)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    path = args.file or largest_params_file()
    blob = path.read_bytes()
    ranges = tensor_ranges(blob)
    params = load_param_dict(blob)
    arrays = [arr.numpy_view() for arr in params.values()]
    if save_param_dict(params) != blob:
        sys.exit(f"{path}: save_param_dict(load_param_dict(b)) differs from b")

    cases = [
        ("load", lambda: load_param_dict(blob), lambda: reference_load(blob, ranges)),
        ("save", lambda: save_param_dict(params), lambda: reference_save(arrays)),
    ]
    mb = len(blob) / 1e6
    print(f"file: {path} ({mb:.1f} MB, {len(params)} tensors), repeat={args.repeat}")
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, "
        f"{os.cpu_count()} CPUs, {platform.machine()}"
    )
    header = (
        f"{'op':<5} {'tvmrt ms':>9} {'tvmrt MB/s':>11} {'ref ms':>8} {'ref MB/s':>9} {'ratio':>6}"
    )
    print(header)
    print("-" * len(header))
    for op, ours, reference in cases:
        t_ours, t_ref = median_seconds(ours, reference, args.repeat)
        print(
            f"{op:<5} {t_ours * 1e3:>9.2f} {mb / t_ours:>11.0f} "
            f"{t_ref * 1e3:>8.2f} {mb / t_ref:>9.0f} {t_ours / t_ref:>5.2f}x"
        )
    print("ratio = tvmrt time / reference time (1.00x = as fast as plain numpy copies)")


if __name__ == "__main__":
    main()
