"""Library unloading: N distinct model libraries loaded, run and dropped; memory must not grow.

Method
------
The model is MobileNet v1 (``mobilenet_v1``: graph, kernel library, params). ``--count``
distinct copies of its ``deploy_lib.so`` are written to a temporary folder, each made
different by a trailing tag after the ELF data (the loader ignores it, the file hash
does not). Each copy in turn is loaded with ``load_module``, given a graph executor and
the params, run once on a fixed input (the top-1 class is checked against the first
run), and dropped (``del`` + ``gc.collect()``).

Memory is read from ``/proc/self/status`` (``VmRSS``: resident; ``VmSize``: everything
mapped) at ``start`` (after ``--warmup`` cycles: imports, the thread pool, and glibc's
heap high-water mark for one model's params and activations, which it keeps after they
are freed), at ``after`` (all copies dropped) and at ``trimmed`` (after
``malloc_trim(0)``, which hands glibc's free heap pages back: what remains is memory
something still holds). The check: ``after - start`` under 10 MB for both, and no model
library left in ``/proc/self/maps``.

Usage::

    .venv/bin/python bench/unload.py [--count 200] [--model mobilenet_v1]
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from tvmrt import runtime
from tvmrt.contrib import graph_executor

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(os.environ.get("TVMRT_ARTIFACTS", REPO.parent / "shared" / "artifacts"))
MB = 1 << 20


def memory() -> tuple[int, int]:
    """``(resident, mapped)`` bytes of this process."""
    fields = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmSize"):
                fields[key] = int(value.split()[0]) * 1024
    return fields["VmRSS"], fields["VmSize"]


def mapped_libraries() -> int:
    """Mappings of the copies still in ``/proc/self/maps`` (by file or memfd name)."""
    with open("/proc/self/maps") as maps:
        return sum(bool(re.search(r"model\d{4}\.so", line)) for line in maps)


def cycle(lib_path: Path, graph: str, params: bytes, data: np.ndarray) -> int:
    """Load, run once and drop one copy; the top-1 class."""
    lib = runtime.load_module(str(lib_path))
    module = graph_executor.create(graph, lib, runtime.cpu())
    module.load_params(params)
    module.set_input(0, data)
    module.run()
    top1 = int(module.get_output(0).numpy().argmax())
    del module, lib
    gc.collect()
    return top1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--model", default="mobilenet_v1")
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()
    folder = ARTIFACTS / args.model
    graph = (folder / "deploy_graph.json").read_text()
    params = (folder / "deploy_param.params").read_bytes()
    original = (folder / "deploy_lib.so").read_bytes()
    shape = tuple(
        graph_executor.create(
            graph, runtime.load_module(str(folder / "deploy_lib.so")), runtime.cpu()
        )
        .get_input(0)
        .shape
    )
    data = np.random.default_rng(0).standard_normal(shape).astype("float32")
    work = Path(tempfile.mkdtemp(prefix="tvmrt-unload-"))
    try:
        copies = []
        for i in range(args.count + args.warmup):
            path = work / f"model{i:04d}.so"
            path.write_bytes(original + f"tvmrt-unload-{i}".encode())
            copies.append(path)
        expected = cycle(copies[0], graph, params, data)
        for path in copies[1 : args.warmup]:
            cycle(path, graph, params, data)
        gc.collect()
        start = memory()
        peak = list(start)
        t0 = time.perf_counter()
        for path in copies[args.warmup :]:
            if cycle(path, graph, params, data) != expected:
                raise SystemExit(f"{path.name}: a different top-1 class than the first copy")
            now = memory()
            peak = [max(p, n) for p, n in zip(peak, now, strict=True)]
        elapsed = time.perf_counter() - t0
        gc.collect()
        after = memory()
        ctypes.CDLL(None).malloc_trim(0)
        trimmed = memory()
        left = mapped_libraries()
    finally:
        shutil.rmtree(work)
    print(
        f"{args.count} distinct copies of {args.model}/deploy_lib.so "
        f"({len(original) / 1e3:.0f} kB) loaded, run, dropped in {elapsed:.1f} s "
        f"(after {args.warmup} warm-up cycles)"
    )
    for name, i in (("RSS", 0), ("mapped", 1)):
        delta = (after[i] - start[i]) / MB
        ok = "ok" if abs(delta) < 10 else "FAIL (>= 10 MB)"
        print(
            f"  {name:6s} start {start[i] / MB:7.1f} MB  peak {peak[i] / MB:7.1f} MB  "
            f"after {after[i] / MB:7.1f} MB ({delta:+5.1f} MB, {ok})  "
            f"after malloc_trim {trimmed[i] / MB:7.1f} MB ({(trimmed[i] - start[i]) / MB:+5.1f} MB)"
        )
    print(f"  model libraries still mapped: {left}")


if __name__ == "__main__":
    main()
