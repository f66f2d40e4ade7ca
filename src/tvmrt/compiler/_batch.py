"""Compile many models in worker processes: ``python -m tvmrt.compiler._batch JOBS.json OUT.json``.

Tests and benchmarks compile here, in processes of their own, so the process that runs
the artifacts under tvmrt never imports TVM (as in deployment). Each job is a dict with
``name``, ``model`` (path), ``output_dir`` and optionally ``input_shapes``, ``target`` and
``tune``; each result has ``name``, ``ok``, ``error`` (the exception's class name, or
``None``), ``message`` and ``seconds``, plus the artifact paths when ``ok``.
"""

from __future__ import annotations

import concurrent.futures
import json
import multiprocessing
import os
import sys
import time
import traceback
from collections.abc import Sequence
from typing import Any

__all__ = ["compile_job", "run_jobs", "main"]


def compile_job(job: dict[str, Any]) -> dict[str, Any]:
    """Compile one job; never raises (the failure is described in the result)."""
    import io

    from tvmrt.compiler import compile as compile_model

    start = time.perf_counter()
    out: dict[str, Any] = {"name": job["name"], "ok": False, "error": None, "message": ""}
    shapes = job.get("input_shapes")
    try:
        result = compile_model(
            job["model"],
            target=job.get("target"),
            input_shapes={k: tuple(v) for k, v in shapes.items()} if shapes else None,
            tune=job.get("tune"),
            output_dir=job["output_dir"],
            progress=sys.stderr if job.get("progress") else io.StringIO(),
        )
    except Exception as exc:
        out["error"] = type(exc).__name__
        out["message"] = str(exc)
        if not isinstance(exc, ValueError | ImportError | OSError):
            out["traceback"] = traceback.format_exc(limit=8)
    else:
        out.update(
            ok=True,
            graph_json=result.graph_json,
            lib=result.lib,
            params=result.params,
            standalone=result.standalone,
            kernels=list(result.kernels),
            num_nops=result.num_nops,
            output_names=list(result.output_names),
            timings=result.timings,
            tuned_tasks=list(result.tuning.tasks) if result.tuning else [],
            kept_untuned=list(result.tuning.kept_untuned) if result.tuning else [],
        )
    out["seconds"] = time.perf_counter() - start
    return out


def run_jobs(jobs: Sequence[dict[str, Any]], workers: int = 1) -> list[dict[str, Any]]:
    """Compile ``jobs`` with ``workers`` processes (``1``: in this process)."""
    if workers <= 1 or len(jobs) <= 1:
        return [compile_job(job) for job in jobs]
    ctx = multiprocessing.get_context("spawn")  # never fork a process that imported TVM
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        return list(pool.map(compile_job, jobs))


def main(argv: Sequence[str] | None = None) -> int:
    """``JOBS.json OUT.json [WORKERS]``: compile the jobs, write the results."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) not in (2, 3):
        print(
            "usage: python -m tvmrt.compiler._batch JOBS.json OUT.json [WORKERS]", file=sys.stderr
        )
        return 2
    with open(args[0], encoding="utf-8") as f:
        jobs = json.load(f)
    workers = int(args[2]) if len(args) == 3 else min(len(jobs), os.cpu_count() or 1)
    results = run_jobs(jobs, workers)
    with open(args[1], "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
