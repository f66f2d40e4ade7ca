"""What subnormal weights cost: ``tvmrt bench`` on the digits example, with its first
layer's 228 subnormal weights as they were committed, and with them zeroed, paired.

Method
------
The committed ``examples/digits/model`` no longer holds subnormals
(``examples/digits/flush_subnormals.py`` zeroed them), so the script makes the "before"
copy itself: the folder is copied to a temporary directory and the first-layer weights
of the copy whose value is zero get back a subnormal (the smallest positive float32
times 1..228, in the same positions count as before: ``--count``). Each round runs
``tvmrt bench FOLDER --json --repeat R --threads T`` on both copies, in alternating
order; the medians of each round are paired and the median over the rounds reported
with the ratio. ``--fill random`` (bench's default) feeds both.

Usage::

    .venv/bin/python bench/subnormal_params.py [--rounds 4] [--repeat 100] [--threads 1]

Measured (2026-11-27, a shared 2-core x86-64 box, 1 thread, 4 rounds of 100): 1.47 ms
with 228 made subnormals against 0.87 ms without (1.58x). The same pairing on the
committed weights before the flush gave 1.3 ms against 0.87 ms (1.5x): the figure
``tvmrt inspect`` and ``tvmrt bench`` quote (``tvmrt.artifact.subnormals.COST``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from tvmrt.runtime import ndarray
from tvmrt.runtime.params import load_param_dict_from_file, save_param_dict_to_file

MODEL = Path(__file__).resolve().parents[1] / "examples" / "digits" / "model"


def with_subnormals(folder: Path, count: int) -> int:
    """Give ``count`` zero weights of ``folder``'s first param a subnormal value."""
    params = {
        k: v.numpy() for k, v in load_param_dict_from_file(str(folder / "deploy.params")).items()
    }
    first = sorted(params)[0]
    flat = params[first].reshape(-1).copy()
    zeros = np.flatnonzero(flat == 0)[:count]
    tiny = np.finfo(np.float32).smallest_subnormal
    flat[zeros] = tiny * np.arange(1, len(zeros) + 1, dtype=np.float32)
    params[first] = flat.reshape(params[first].shape)
    save_param_dict_to_file(
        {k: ndarray.array(v) for k, v in params.items()}, str(folder / "deploy.params")
    )
    return len(zeros)


def median_ms(folder: Path, repeat: int, threads: int) -> float:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tvmrt",
            "bench",
            str(folder),
            "--json",
            "--repeat",
            str(repeat),
            "--threads",
            str(threads),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(json.loads(done.stdout)["latency_ms"]["median"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--count", type=int, default=228)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        slow = Path(tmp) / "model"
        shutil.copytree(MODEL, slow)
        made = with_subnormals(slow, args.count)
        pairs = []
        for r in range(args.rounds):
            order = [(MODEL, "clean"), (slow, "subnormal")][:: 1 if r % 2 else -1]
            got = {name: median_ms(folder, args.repeat, args.threads) for folder, name in order}
            pairs.append((got["subnormal"], got["clean"]))
            print(
                f"round {r}: {got['subnormal']:.3f} ms with {made} subnormals, "
                f"{got['clean']:.3f} ms without"
            )
    sub = statistics.median(p[0] for p in pairs)
    clean = statistics.median(p[1] for p in pairs)
    ratio = statistics.median(p[0] / p[1] for p in pairs)
    print(f"median: {sub:.3f} ms with {made} subnormals, {clean:.3f} ms without: {ratio:.2f}x")


if __name__ == "__main__":
    main()
