"""``BenchmarkResult``, ``TimingConfig`` and the time evaluator behind ``Module.time_evaluator``.

The evaluator is TVM's (``src/runtime/profiling.cc``, ``WrapTimeEvaluator``): one warm-up
call, then ``repeat`` measurements of ``number`` calls, ``number`` growing until a
measurement lasts ``min_repeat_ms``. Every timing front (``Module.time_evaluator``,
``GraphModule.benchmark``, the debug executor's ``run_individual*``, the AOT profiler)
checks its arguments once, by building a :class:`TimingConfig`.
"""

from __future__ import annotations

import numbers
import operator
import time
from collections.abc import Callable, Sequence
from dataclasses import astuple, dataclass
from typing import Any

import numpy as np

from tvmrt.error import ArgumentTypeError, InvalidArgumentError
from tvmrt.runtime.device import Device

__all__ = ["BenchmarkResult", "TimingConfig", "time_evaluate", "time_evaluate_config", "Clock"]

Clock = Callable[[], int]
"""A monotonic clock in nanoseconds (``time.perf_counter_ns``); tests pass a fake one."""


class BenchmarkResult:
    """Timing of repeated runs, in seconds: ``mean``, ``median``, ``std``, ``min``, ``max``.

    ``std`` is the population standard deviation (numpy's default), like TVM.

    Parameters
    ----------
    results
        Seconds per run for each repeat.

    Examples
    --------
    >>> r = BenchmarkResult([1, 2, 2, 5])
    >>> r.mean, r.median, r.std, r.min, r.max
    (2.5, 2.0, 1.5, 1, 5)
    """

    def __init__(self, results: Sequence[float]) -> None:
        self.results = results  # kept as given, like TVM (a tuple from the time evaluator)
        self.mean = float(np.mean(self.results))
        self.std = float(np.std(self.results))
        self.median = float(np.median(self.results))
        self.min = min(self.results)
        self.max = max(self.results)

    def __repr__(self) -> str:
        return (
            f"BenchmarkResult(min={self.min}, mean={self.mean}, median={self.median}, "
            f"max={self.max}, std={self.std}, results={self.results})"
        )

    def __str__(self) -> str:
        return (
            "Execution time summary:\n"
            f"{'mean (ms)':^12} {'median (ms)':^12} {'max (ms)':^12} "
            f"{'min (ms)':^12} {'std (ms)':^12}\n"
            f"{self.mean * 1000:^12.4f} {self.median * 1000:^12.4f} {self.max * 1000:^12.4f} "
            f"{self.min * 1000:^12.4f} {self.std * 1000:^12.4f}"
            "               "
        )


@dataclass(frozen=True)
class TimingConfig:
    """How to time a function: TVM's six time-evaluator parameters, checked once.

    Defaults are those of TVM's ``Module.time_evaluator``. Integers are taken from any
    integral value (``numpy.int64`` included, ``bool`` refused), durations from any real
    number; both are stored as Python ``int`` / ``float``.

    Attributes
    ----------
    number
        Calls per measurement (> 0; grows to reach ``min_repeat_ms``).
    repeat
        Measurements (> 0): one result each.
    min_repeat_ms
        Minimum duration of one measurement, in milliseconds (>= 0).
    limit_zero_time_iterations
        Retries of a measurement that took zero time (>= 0).
    cooldown_interval_ms
        Sleep between measurements, in milliseconds (>= 0).
    repeats_to_cooldown
        Sleep after every this many measurements (> 0).

    Raises
    ------
    InvalidArgumentError
        If a value is out of range (a ``ValueError`` naming the parameter).
    ArgumentTypeError
        If a value is not a number of the right kind (a ``TypeError``).

    Examples
    --------
    >>> TimingConfig(number=5).repeat
    1
    >>> TimingConfig(number=0)
    Traceback (most recent call last):
    ...
    tvmrt.error.InvalidArgumentError: number must be > 0, got 0
    """

    number: int = 10
    repeat: int = 1
    min_repeat_ms: float = 0.0
    limit_zero_time_iterations: int = 100
    cooldown_interval_ms: float = 0.0
    repeats_to_cooldown: int = 1

    def __post_init__(self) -> None:
        checked = {
            "number": _count(self.number, "number", minimum=1),
            "repeat": _count(self.repeat, "repeat", minimum=1),
            "min_repeat_ms": _duration(self.min_repeat_ms, "min_repeat_ms"),
            "limit_zero_time_iterations": _count(
                self.limit_zero_time_iterations, "limit_zero_time_iterations", minimum=0
            ),
            "cooldown_interval_ms": _duration(self.cooldown_interval_ms, "cooldown_interval_ms"),
            "repeats_to_cooldown": _count(
                self.repeats_to_cooldown, "repeats_to_cooldown", minimum=1
            ),
        }
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    def as_args(self) -> tuple[int, int, float, int, float, int]:
        """The six values in TVM's order, as packed functions (``run_individual``) take them."""
        return astuple(self)


def _count(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool):
        raise ArgumentTypeError(f"{name} must be an integer, got bool")
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise ArgumentTypeError(f"{name} must be an integer, got {type(value).__name__}") from None
    if number < minimum:
        raise InvalidArgumentError(f"{name} must be {'> 0' if minimum else '>= 0'}, got {number}")
    return number


def _duration(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(f"{name} must be a number, got {type(value).__name__}")
    number = float(value)
    if not number >= 0:  # NaN fails too
        raise InvalidArgumentError(f"{name} must be >= 0, got {value}")
    return number


class _Evaluator:
    """State of one time evaluator: ``number`` grows under ``min_repeat_ms`` and stays grown."""

    def __init__(
        self,
        func: Callable[..., Any],
        dev: Device,
        timing: TimingConfig,
        cache_flush_bytes: int,
        f_preproc: Callable[..., Any] | None,
        clock: Clock,
        sleep: Callable[[float], None],
    ) -> None:
        self.func, self.dev = func, dev
        self.number, self.repeat = timing.number, timing.repeat
        self.min_repeat_ms = timing.min_repeat_ms
        self.limit_zero = timing.limit_zero_time_iterations
        self.cooldown_ms = timing.cooldown_interval_ms
        self.repeats_to_cooldown = timing.repeats_to_cooldown
        self.cache_flush_bytes = cache_flush_bytes
        self.f_preproc = f_preproc
        self.clock, self.sleep = clock, sleep

    def __call__(self, *args: Any) -> BenchmarkResult:
        self.func(*args)  # warm-up, discarded
        flush = self._flush_buffers()
        self.dev.sync()
        results = []
        for i in range(self.repeat):
            if self.f_preproc is not None:
                self.f_preproc(*args)
            duration_ms = 0.0
            zero_times = 0
            while True:
                if duration_ms > 0.0:
                    self.number = int(
                        max(
                            self.min_repeat_ms / (duration_ms / self.number) + 1,
                            self.number * 1.618,
                        )
                    )
                if flush is not None:
                    flush[0][...] = flush[1]
                self.dev.sync()
                start = self.clock()
                for _ in range(self.number):
                    self.func(*args)
                self.dev.sync()
                elapsed_ns = self.clock() - start
                if elapsed_ns == 0:
                    zero_times += 1
                duration_ms = elapsed_ns / 1e6
                if not (duration_ms < self.min_repeat_ms and zero_times < self.limit_zero):
                    break
            results.append(duration_ms / 1e3 / self.number)
            if self.cooldown_ms > 0 and i % self.repeats_to_cooldown == 0:
                self.sleep(self.cooldown_ms / 1000)
        return BenchmarkResult(tuple(results))  # struct.unpack gives TVM a tuple

    def _flush_buffers(self) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]] | None:
        if self.cache_flush_bytes <= 0:
            return None
        n = max(self.cache_flush_bytes // 4, 1)
        return np.zeros(n, dtype=np.int32), np.ones(n, dtype=np.int32)


def time_evaluate(
    func: Callable[..., Any],
    dev: Device,
    number: int = 10,
    repeat: int = 1,
    min_repeat_ms: float = 0,
    limit_zero_time_iterations: int = 100,
    cooldown_interval_ms: float = 0,
    repeats_to_cooldown: int = 1,
    cache_flush_bytes: int = 0,
    f_preproc: Callable[..., Any] | None = None,
    *,
    clock: Clock | None = None,
    sleep: Callable[[float], None] | None = None,
) -> Callable[..., BenchmarkResult]:
    """Wrap ``func`` in TVM's time evaluator; calling the result times ``func(*args)``.

    One warm-up call, then ``repeat`` measurements of ``number`` calls each. When a
    measurement is shorter than ``min_repeat_ms``, ``number`` grows (and stays grown)
    and it is measured again; a zero-time measurement is retried at most
    ``limit_zero_time_iterations`` times. After repeat ``i`` with
    ``i % repeats_to_cooldown == 0`` the evaluator sleeps ``cooldown_interval_ms``
    (the parameters are those of :class:`TimingConfig`). ``clock`` (ns) and ``sleep``
    default to ``time.perf_counter_ns`` and ``time.sleep``, looked up when called.

    Returns
    -------
    Callable[..., BenchmarkResult]
        ``evaluator(*args)`` returns seconds per call for each repeat.
    """
    timing = TimingConfig(
        number,
        repeat,
        min_repeat_ms,
        limit_zero_time_iterations,
        cooldown_interval_ms,
        repeats_to_cooldown,
    )
    return time_evaluate_config(
        func, dev, timing, cache_flush_bytes, f_preproc, clock=clock, sleep=sleep
    )


def time_evaluate_config(
    func: Callable[..., Any],
    dev: Device,
    timing: TimingConfig,
    cache_flush_bytes: int = 0,
    f_preproc: Callable[..., Any] | None = None,
    *,
    clock: Clock | None = None,
    sleep: Callable[[float], None] | None = None,
) -> Callable[..., BenchmarkResult]:
    """:func:`time_evaluate` with its timing parameters already checked, as a TimingConfig."""
    return _Evaluator(
        func,
        dev,
        timing,
        cache_flush_bytes,
        f_preproc,
        clock or time.perf_counter_ns,
        sleep or time.sleep,
    )
