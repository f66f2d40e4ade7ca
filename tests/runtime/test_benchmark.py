"""BenchmarkResult and the time evaluator (spec §6.1); CPU tier, fake clock and sleep."""

from __future__ import annotations

from typing import Any

import pytest

from tvmrt.error import FunctionNotFoundError, TVMError
from tvmrt.runtime import PyModule, cpu, register_func, remove_global_func
from tvmrt.runtime.benchmark import BenchmarkResult, time_evaluate

MS = 1_000_000  # nanoseconds


class FakeTime:
    """A virtual clock: call k of :meth:`func` takes ``costs[k]`` ns (the last one repeats)."""

    def __init__(self, *costs: int) -> None:
        self.now = 0
        self.costs = costs or (MS,)
        self.calls = 0
        self.sleeps: list[float] = []
        self.events: list[str] = []

    def func(self, *args: Any) -> None:
        self.now += self.costs[min(self.calls, len(self.costs) - 1)]
        self.calls += 1
        self.events.append("call")

    def clock(self) -> int:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.events.append(f"sleep {seconds}")


def _evaluator(fake: FakeTime, **kwargs: Any) -> Any:
    return time_evaluate(fake.func, cpu(), clock=fake.clock, sleep=fake.sleep, **kwargs)


# -- BenchmarkResult --------------------------------------------------------------------
def test_benchmark_result_statistics() -> None:
    r = BenchmarkResult([1, 2, 2, 5])
    assert (r.mean, r.median, r.max, r.min, r.std) == (2.5, 2.0, 5, 1, 1.5)  # std: population
    assert r.results == [1, 2, 2, 5]


def test_benchmark_result_str() -> None:
    assert str(BenchmarkResult([1, 2, 2, 5])) == (
        "Execution time summary:\n"
        " mean (ms)   median (ms)    max (ms)     min (ms)     std (ms)  \n"
        " 2500.0000    2000.0000    5000.0000    1000.0000    1500.0000  "
        "               "
    )


def test_benchmark_result_repr() -> None:
    assert repr(BenchmarkResult([1, 2, 2, 5])) == (
        "BenchmarkResult(min=1, mean=2.5, median=2.0, max=5, std=1.5, results=[1, 2, 2, 5])"
    )
    assert repr(BenchmarkResult((0.5,))).endswith("results=(0.5,))")


# -- the evaluator ----------------------------------------------------------------------
def test_evaluator_warms_up_once_then_times_number_calls_per_repeat() -> None:
    fake = FakeTime(2 * MS)
    res = _evaluator(fake, number=3, repeat=4)()
    assert fake.calls == 1 + 3 * 4
    assert res.results == (0.002,) * 4
    assert isinstance(res.results, tuple)


def test_evaluator_passes_arguments() -> None:
    seen: list[tuple[Any, ...]] = []
    ev = time_evaluate(lambda *a: seen.append(a), cpu(), number=2, repeat=1, clock=lambda: 0)
    ev(1, "x")
    assert seen == [(1, "x")] * 3


def test_evaluator_grows_number_to_reach_min_repeat_ms() -> None:
    fake = FakeTime(MS)
    ev = _evaluator(fake, number=1, repeat=2, min_repeat_ms=10)
    res = ev()
    # 1 call = 1 ms < 10 ms -> number = int(max(10 / 1 + 1, 1 * 1.618)) = 11 -> 11 ms: done
    assert fake.calls == 1 + (1 + 11) + 11  # the second repeat keeps number = 11
    assert res.results == (0.001, 0.001)
    fake.calls = 0
    ev()
    assert fake.calls == 1 + 11 + 11  # number stays grown for later calls of the evaluator


def test_evaluator_growth_uses_the_golden_ratio_when_close() -> None:
    fake = FakeTime(MS)
    _evaluator(fake, number=8, repeat=1, min_repeat_ms=10)()
    # 8 ms < 10 ms -> int(max(10 / (8 / 8) + 1, 8 * 1.618)) = int(12.944) = 12
    assert fake.calls == 1 + 8 + 12


def test_evaluator_growth_follows_the_measured_rate() -> None:
    # Warm-up 1 ms; first measurement 2 calls take 1 ms (0.5 ms each), then 1 ms per call.
    fake = FakeTime(MS, MS // 2, MS // 2, MS)
    res = _evaluator(fake, number=2, repeat=1, min_repeat_ms=10)()
    # 1 ms < 10 ms -> number = int(max(10 / (1 / 2) + 1, 3.236)) = 21 -> 21 ms
    assert fake.calls == 1 + 2 + 21
    assert res.results == (21 / 1e3 / 21,)


def test_evaluator_retries_zero_time_measurements_up_to_the_limit() -> None:
    fake = FakeTime(0)
    res = _evaluator(fake, number=3, repeat=2, min_repeat_ms=5, limit_zero_time_iterations=4)()
    assert fake.calls == 1 + 2 * (4 * 3)  # zero time never grows number
    assert res.results == (0.0, 0.0)


@pytest.mark.parametrize(
    ("min_repeat_ms", "limit", "measurements"),
    [
        pytest.param(5, 0, 1, id="limit-0"),
        pytest.param(0, 100, 1, id="no-min-repeat"),
        pytest.param(5, 100, 100, id="default-limit"),
    ],
)
def test_evaluator_zero_time_does_not_hang(
    min_repeat_ms: int, limit: int, measurements: int
) -> None:
    fake = FakeTime(0)
    _evaluator(
        fake, number=1, repeat=1, min_repeat_ms=min_repeat_ms, limit_zero_time_iterations=limit
    )()
    assert fake.calls == 1 + measurements


@pytest.mark.parametrize(
    ("repeat", "repeats_to_cooldown", "sleeps"),
    [
        pytest.param(3, 1, 3, id="every-repeat-including-the-last"),
        pytest.param(5, 2, 3, id="repeats-0-2-4"),
        pytest.param(4, 3, 2, id="repeats-0-3"),
        pytest.param(2, 5, 1, id="repeat-0-only"),
    ],
)
def test_evaluator_cools_down(repeat: int, repeats_to_cooldown: int, sleeps: int) -> None:
    fake = FakeTime()
    _evaluator(
        fake,
        number=1,
        repeat=repeat,
        cooldown_interval_ms=250,
        repeats_to_cooldown=repeats_to_cooldown,
    )()
    assert fake.sleeps == [0.25] * sleeps


def test_evaluator_cooldown_order_and_last_repeat() -> None:
    fake = FakeTime()
    _evaluator(fake, number=2, repeat=2, cooldown_interval_ms=10)()
    assert fake.events == ["call", "call", "call", "sleep 0.01", "call", "call", "sleep 0.01"]


def test_evaluator_without_cooldown_never_sleeps() -> None:
    fake = FakeTime()
    _evaluator(fake, number=1, repeat=3, repeats_to_cooldown=1)()
    assert fake.sleeps == []


def test_evaluator_calls_preproc_before_each_repeat() -> None:
    fake = FakeTime()

    def preproc(*args: Any) -> None:
        fake.events.append(f"preproc {args}")

    _evaluator(fake, number=2, repeat=2, f_preproc=preproc)(7)
    assert fake.events == [
        "call",
        "preproc (7,)",
        "call",
        "call",
        "preproc (7,)",
        "call",
        "call",
    ]


def test_evaluator_flushes_cache_without_changing_counts() -> None:
    fake = FakeTime()
    res = _evaluator(fake, number=2, repeat=2, cache_flush_bytes=1024)()
    assert fake.calls == 1 + 2 * 2
    assert len(res.results) == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        # one set of checks for every timing front (TimingConfig), naming the parameter
        ({"number": 0}, r"^number must be > 0, got 0$"),
        ({"repeat": -1}, r"^repeat must be > 0, got -1$"),
        ({"repeats_to_cooldown": 0}, r"^repeats_to_cooldown must be > 0, got 0$"),
        ({"min_repeat_ms": -1}, r"^min_repeat_ms must be >= 0, got -1$"),
        ({"limit_zero_time_iterations": -1}, r"^limit_zero_time_iterations must be >= 0, got -1$"),
        ({"cooldown_interval_ms": -5}, r"^cooldown_interval_ms must be >= 0, got -5$"),
    ],
)
def test_evaluator_validates_arguments(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        time_evaluate(lambda: None, cpu(), **kwargs)


# -- Module.time_evaluator ----------------------------------------------------------------
def test_module_time_evaluator_returns_repeat_results() -> None:
    calls: list[tuple[Any, ...]] = []
    mod = PyModule({"work": lambda *args: calls.append(args)})
    res = mod.time_evaluator("work", cpu(0), number=2, repeat=3)(1, 2)
    assert isinstance(res, BenchmarkResult)
    assert len(res.results) == 3
    assert all(t >= 0 for t in res.results)
    assert calls == [(1, 2)] * (1 + 2 * 3)


def test_module_time_evaluator_finds_imported_functions() -> None:
    calls: list[int] = []
    lib = PyModule({"kernel": lambda: calls.append(1)})
    mod = PyModule()
    mod.import_module(lib)
    mod.time_evaluator("kernel", cpu(0), number=1, repeat=2)()
    assert len(calls) == 1 + 2


def test_module_time_evaluator_calls_global_preproc() -> None:
    seen: list[str] = []
    register_func("tvmrt.test.benchmark_preproc", lambda *args: seen.append("preproc"))
    try:
        mod = PyModule({"work": lambda: seen.append("call")})
        mod.time_evaluator(
            "work", cpu(0), number=1, repeat=2, f_preproc="tvmrt.test.benchmark_preproc"
        )()
    finally:
        remove_global_func("tvmrt.test.benchmark_preproc")
    assert seen == ["call", "preproc", "call", "preproc", "call"]


def test_module_time_evaluator_missing_function() -> None:
    mod = PyModule({"work": lambda: None})
    with pytest.raises(
        FunctionNotFoundError, match=r"^Cannot find missing in the module or its imports$"
    ) as info:
        mod.time_evaluator("missing", cpu(0))
    assert isinstance(info.value, AttributeError)
    assert isinstance(info.value, TVMError)
