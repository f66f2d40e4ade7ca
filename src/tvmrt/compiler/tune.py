"""MetaSchedule tuning of the graph's kernels, with the known pitfalls handled.

* Only the kernels the graph calls are tuned (``__nop`` reshapes are skipped).
* Builder workers: TVM's default build function imports ``tvm.s_tir.tensor_intrin`` in
  every worker of every build round, which parses hundreds of TVMScript intrinsics
  (15-40 s); with the default 30 s timeout every build then fails with "Build errors".
  :func:`build_without_intrinsics` builds the already-scheduled module without that import,
  and the builder timeout is 300 s regardless.
* The cost model is XGBoost when ``xgboost`` is installed, else ``"random"`` (no extra
  dependency). MetaSchedule's worker pools need ``psutil`` and ``cloudpickle``, which the
  ``compile`` extra installs.
* The records go to a JSON database in ``work_dir`` (``database_workload.json``,
  ``database_tuning_record.json``); a later run with the same directory starts from them,
  and ``tune=0`` applies them without new trials.
* Progress is drawn on stderr: trials done of the budget, current task, best latency.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np

from tvmrt.compiler._tvm import require_tvm
from tvmrt.error import CompileError

__all__ = [
    "TuneReport",
    "tune_kernels",
    "apply_database",
    "keep_faster_kernels",
    "build_without_intrinsics",
    "Progress",
]

BUILDER_TIMEOUT_SEC = 300.0


@dataclass(frozen=True)
class TuneReport:
    """What a tuning run did.

    Attributes
    ----------
    work_dir
        The database directory.
    trials
        Trials measured in this run.
    tasks
        Names of the tuned kernels.
    cost_model
        ``"xgb"`` or ``"random"``.
    seconds
        Wall time of the tuning run.
    kept_untuned
        Kernels whose untuned version was faster than the best tuned one, and was kept.
    """

    work_dir: str
    trials: int
    tasks: tuple[str, ...]
    cost_model: str
    seconds: float
    kept_untuned: tuple[str, ...] = ()


def build_without_intrinsics(mod: Any, target: Any, _params: Any) -> Any:
    """MetaSchedule's ``default_build`` without importing ``tvm.s_tir.tensor_intrin``.

    The candidates are scheduled already (tensorized blocks are inlined TIR by then), so
    the intrinsic registry is not needed, and importing it costs each worker 15-40 s.
    """
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm_build(mod, target=target)


class Progress:
    """A one-line progress bar on a text stream (redrawn in place on a terminal).

    Parameters
    ----------
    total
        Trials in the budget.
    stream
        Where to draw (stderr by default); ``None`` draws nothing.
    """

    def __init__(self, total: int, stream: TextIO | None = sys.stderr) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.stream = stream
        self.best: dict[str, float] = {}
        self._tty = bool(stream is not None and getattr(stream, "isatty", lambda: False)())
        self._last_line = -1
        self._start = time.perf_counter()

    def update(self, task: str, trials: int, latencies: Sequence[float]) -> None:
        """Record ``trials`` more measurements of ``task`` (seconds, ``inf`` for failures)."""
        self.done += trials
        good = [t for t in latencies if t != float("inf")]
        if good:
            self.best[task] = min(self.best.get(task, float("inf")), min(good))
        self._draw(task)

    def line(self, task: str = "") -> str:
        """The text of the bar."""
        width = 24
        frac = min(self.done / self.total, 1.0)
        bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
        total_ms = sum(self.best.values()) * 1e3
        elapsed = time.perf_counter() - self._start
        text = f"tuning [{bar}] {self.done}/{self.total} trials, {elapsed:.0f}s"
        if self.best:
            text += f", kernels {total_ms:.3f} ms"
        if task:
            text += f" ({task[:40]})"
        return text

    def _draw(self, task: str) -> None:
        if self.stream is None:
            return
        if self._tty:
            self.stream.write("\r\x1b[2K" + self.line(task))
        else:  # a log: one line per tenth of the budget
            tenth = int(10 * min(self.done / self.total, 1.0))
            if tenth == self._last_line:
                return
            self._last_line = tenth
            self.stream.write(self.line(task) + "\n")
        self.stream.flush()

    def close(self) -> None:
        """End the bar's line."""
        if self.stream is not None and self._tty:
            self.stream.write("\n")
            self.stream.flush()


def _progress_callback(progress: Progress, names: list[str]) -> Any:
    from tvm.ir.utils import derived_object
    from tvm.s_tir import meta_schedule as ms

    @derived_object
    class _ProgressCallback(ms.measure_callback.PyMeasureCallback):  # type: ignore[misc]
        def apply(
            self,
            task_scheduler: Any,
            task_id: int,
            measure_candidates: Any,
            builder_results: Any,
            runner_results: Any,
        ) -> None:
            latencies = []
            for result in runner_results:
                secs = [float(s) for s in (result.run_secs or [])]
                ok = result.error_msg is None and secs
                latencies.append(sum(secs) / len(secs) if ok else float("inf"))
            progress.update(names[task_id], len(measure_candidates), latencies)

    return _ProgressCallback()


def _num_trials_per_iter(budget: int, num_tasks: int) -> int:
    return max(4, min(64, budget // max(num_tasks, 1)))


def tune_kernels(
    mod: Any,
    kernels: Sequence[str],
    target: Any,
    work_dir: str,
    trials: int,
    *,
    progress: TextIO | None = sys.stderr,
    seed: int | None = None,
) -> TuneReport:
    """Tune the PrimFuncs ``kernels`` of ``mod`` with MetaSchedule into ``work_dir``.

    Parameters
    ----------
    mod
        The fused module.
    kernels
        Names of the PrimFuncs to tune.
    target
        The ``tvm.target.Target`` (with ``num-cores``).
    work_dir
        Database directory; created if needed, reused if it has records.
    trials
        Trial budget for all kernels together.
    progress
        Stream for the progress bar, or ``None``.
    seed
        Random seed of the search.

    Raises
    ------
    CompileError
        If MetaSchedule fails, or its worker dependencies are missing.
    """
    require_tvm()
    for dep in ("psutil", "cloudpickle"):
        if importlib.util.find_spec(dep) is None:
            raise CompileError(
                f"tuning needs {dep!r} for MetaSchedule's worker processes, which is not "
                "installed: pip install 'tvmrt[compile]' (from a checkout: pip install -e "
                "'.[compile]')"
            )
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.relax_integration import (
        extract_tasks,
        extracted_tasks_to_tune_contexts,
    )

    start = time.perf_counter()
    os.makedirs(work_dir, exist_ok=True)
    wanted = set(kernels)
    tasks = [t for t in extract_tasks(mod, target) if t.task_name in wanted]
    if not tasks:
        return TuneReport(work_dir, 0, (), "none", 0.0)
    cost_model = "xgb" if importlib.util.find_spec("xgboost") is not None else "random"
    contexts, weights = extracted_tasks_to_tune_contexts(tasks, work_dir, seed=seed)
    names = [str(c.task_name) for c in contexts]
    bar = Progress(trials, progress)
    callbacks = [*ms.measure_callback.MeasureCallback.create("default")]
    callbacks.append(_progress_callback(bar, names))
    ms_logger = logging.getLogger("tvm.s_tir.meta_schedule")
    old_level = ms_logger.level
    ms_logger.setLevel(logging.WARNING)  # the bar replaces the per-round tables
    try:
        ms.tune.tune_tasks(
            tasks=contexts,
            task_weights=weights,
            work_dir=work_dir,
            max_trials_global=trials,
            num_trials_per_iter=_num_trials_per_iter(trials, len(contexts)),
            builder=ms.builder.LocalBuilder(
                timeout_sec=BUILDER_TIMEOUT_SEC, f_build=build_without_intrinsics
            ),
            runner=ms.runner.LocalRunner(
                evaluator_config=ms.runner.EvaluatorConfig(
                    number=3, repeat=1, min_repeat_ms=40, enable_cpu_cache_flush=False
                )
            ),
            cost_model=cost_model,
            measure_callbacks=callbacks,
        )
    except Exception as exc:
        from tvmrt.compiler.frontend import one_line

        raise CompileError(f"MetaSchedule tuning failed: {one_line(exc)}") from exc
    finally:
        ms_logger.setLevel(old_level)
        bar.close()
    return TuneReport(work_dir, bar.done, tuple(names), cost_model, time.perf_counter() - start)


def has_database(work_dir: str) -> bool:
    """Whether ``work_dir`` holds a MetaSchedule JSON database with records."""
    path = os.path.join(work_dir, "database_tuning_record.json")
    return os.path.isfile(path) and os.path.getsize(path) > 0


def apply_database(mod: Any, target: Any, work_dir: str) -> Any:
    """Replace each PrimFunc of ``mod`` by its best tuned schedule in ``work_dir``'s database.

    PrimFuncs without records are left unscheduled.
    """
    tvm = require_tvm()
    from tvm import relax

    with target, tvm.transform.PassContext(opt_level=3):
        return relax.transform.MetaScheduleApplyDatabase(work_dir, enable_warning=False)(mod)


def keep_faster_kernels(
    untuned: Any,
    tuned: Any,
    kernel_args: Mapping[str, Sequence[tuple[tuple[int, ...], str]]],
    target: Any,
    min_repeat_ms: int = 10,
) -> tuple[Any, tuple[str, ...]]:
    """Per kernel, keep the tuned PrimFunc only if it runs faster than the untuned one.

    With a small trial budget, the best candidate MetaSchedule measured can be slower
    than TVM's default (unscheduled) kernel, which it never measures. Both versions are
    built and timed here on random inputs of the graph's shapes.

    Returns
    -------
    tuple
        The module with the faster version of each kernel, and the names of the kernels
        whose untuned version was kept.
    """
    tvm = require_tvm()
    names = [n for n in kernel_args if not untuned[n].same_as(tuned[n])]
    if not names:
        return tuned, ()
    libs = []
    for mod in (untuned, tuned):
        funcs = {n: mod[n].with_attr("global_symbol", n) for n in names}
        libs.append(tvm.compile(tvm.IRModule(funcs), target=target).jit())
    dev = tvm.cpu()
    rng = np.random.default_rng(0)
    kept = []
    for name in names:
        args = [
            tvm.runtime.tensor(
                rng.standard_normal(shape).astype(dtype)
                if dtype.startswith(("float", "bfloat"))
                else np.zeros(shape, dtype),
                dev,
            )
            for shape, dtype in kernel_args[name]
        ]
        times = []
        for lib in libs:
            evaluator = lib.time_evaluator(
                name, dev, number=1, repeat=5, min_repeat_ms=min_repeat_ms
            )
            times.append(float(np.median(evaluator(*args).results)))
        if times[0] < times[1]:
            kept.append(name)
    if not kept:
        return tuned, ()
    merged = {
        gvar: untuned[gvar.name_hint] if gvar.name_hint in kept else func
        for gvar, func in tuned.functions_items()
    }
    return tvm.IRModule(merged, attrs=tuned.attrs), tuple(kept)
