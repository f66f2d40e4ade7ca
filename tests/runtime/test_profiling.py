"""Profiling reports and the Profiler (spec §5.4, §5.5); no-device tier, fake clock."""

from __future__ import annotations

import json
import locale
import pickle
from collections.abc import Iterator

import pytest

from tvmrt.error import ReportFormatError, TVMError
from tvmrt.runtime import profiling
from tvmrt.runtime.device import Device, cpu, cuda
from tvmrt.runtime.profiling import Count, Duration, Metric, Percent, Profiler, Ratio, Report

DENSE = "float32[1, 784], float32[128, 784], float32[1, 128]"
ADD = "float32[1, 128], float32[1, 128]"
SOFTMAX = "float32[1, 10], float32[1, 10]"


def _call(name: str, us: float, percent: float, shapes: str, **extra: Metric) -> dict[str, Metric]:
    row: dict[str, Metric] = {
        "Name": name,
        "Duration (us)": Duration(us),
        "Count": Count(1),
        "Percent": Percent(percent),
        "Device": "cpu0",
    }
    row.update(extra)
    row["Argument Shapes"] = shapes
    return row


@pytest.fixture
def report() -> Report:
    """Four calls of an MLP; the two dense calls share a Hash."""
    return Report(
        [
            _call("fused_nn_dense", 120.5, 60.25, DENSE, Hash="a1"),
            _call("fused_add", 30.0, 15.0, ADD),
            _call("fused_nn_dense_1", 40.25, 20.125, DENSE, Hash="a1"),
            _call("fused_nn_softmax", 9.25, 4.625, SOFTMAX),
        ],
        {
            "cpu0": {
                "Name": "Total",
                "Duration (us)": Duration(200.0),
                "Count": Count(1),
                "Device": "cpu0",
            }
        },
        {"Executor": "Graph", "Number of threads": Count(8)},
    )


# -- metrics ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("metric", "field", "value", "text"),
    [
        (Duration(12.5), "microseconds", 12.5, "runtime.profiling.Duration(12.5)"),
        (Count(1), "value", 1, "runtime.profiling.Count(1)"),
        (Percent(50), "percent", 50.0, "runtime.profiling.Percent(50.0)"),
        (Ratio(0.25), "ratio", 0.25, "runtime.profiling.Ratio(0.25)"),
    ],
)
def test_metric_field_and_repr(metric: object, field: str, value: float, text: str) -> None:
    assert getattr(metric, field) == value
    assert type(getattr(metric, field)) is type(value)
    assert repr(metric) == text
    assert pickle.loads(pickle.dumps(metric)) == metric


def test_metrics_compare_by_type_and_value() -> None:
    assert Duration(1.0) == Duration(1)
    assert Duration(1.0) != Percent(1.0)
    assert hash(Count(3)) == hash(Count(3))
    assert len({Count(3), Count(3), Count(4)}) == 2


def test_metric_is_immutable() -> None:
    with pytest.raises(AttributeError, match=r"^Count is immutable; cannot set 'value'$"):
        Count(1).value = 2


@pytest.mark.parametrize(
    ("make", "arg", "message"),
    [
        (Count, 1.5, r"^Count takes an integer, got float$"),
        (Count, True, r"^Count takes an integer, got bool$"),
        (Duration, "1", r"^Duration takes a real number, got str$"),
        (Percent, None, r"^Percent takes a real number, got NoneType$"),
    ],
)
def test_metric_rejects_wrong_type(make: type, arg: object, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        make(arg)


def test_report_rejects_non_metric_values() -> None:
    with pytest.raises(
        TypeError,
        match=r"^calls\[0\]\['Duration \(us\)'\] must be a Duration, Count, Percent, Ratio or str, "
        r"got float$",
    ):
        Report([{"Duration (us)": 1.5}], {}, {})  # type: ignore[dict-item]


def test_string_metrics_are_plain_str(report: Report) -> None:
    name = report.calls[0]["Name"]
    assert name == "fused_nn_dense"
    assert type(name) is str


# -- json -------------------------------------------------------------------------------
def test_json_exact_text() -> None:
    r = Report(
        [
            {
                "Name": "add",
                "Duration (us)": Duration(12.3),
                "Count": Count(2),
                "Percent": Percent(50),
            }
        ],
        {"cpu0": {"Name": "Total", "Duration (us)": Duration(24.6)}},
        {"Executor": "Graph", "Number of threads": Count(4), "Flops": Ratio(0.5)},
    )
    assert r.json() == (
        '{"calls":[{"Name":{"string":"add"},"Duration (us)":{"microseconds":12.30000000000000071},'
        '"Count":{"count":2},"Percent":{"percent":50.00000000000000000}}],'
        '"device_metrics":{"cpu0":{"Name":{"string":"Total"},'
        '"Duration (us)":{"microseconds":24.60000000000000142}}},'
        '"configuration":{"Executor":{"string":"Graph"},"Number of threads":{"count":4},'
        '"Flops":{"ratio":0.50000000000000000}}}'
    )


def test_json_of_empty_report() -> None:
    assert Report([], {}, {}).json() == '{"calls":[],"device_metrics":{},"configuration":{}}'


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (12.3, "12.30000000000000071"),
        (0.1, "0.10000000000000001"),
        (1e-7, "0.00000010000000000"),
        (123456789.125, "123456789.12500000000000000"),
        (0.0, "0.00000000000000000"),
        (float("nan"), "NaN"),
        (float("-inf"), "-Infinity"),
    ],
)
def test_json_numbers_have_17_decimals(value: float, text: str) -> None:
    assert Report([], {}, {"x": Duration(value)}).json().endswith(f'{{"microseconds":{text}}}}}}}')


def test_json_structure_matches_tvm(report: Report) -> None:
    # TVM's test_report_serialization checks.
    doc = json.loads(report.json())
    assert set(doc) == {"calls", "device_metrics", "configuration"}
    for call in doc["calls"]:
        assert isinstance(call["Name"]["string"], str)
        assert isinstance(call["Count"]["count"], int)
        assert isinstance(call["Duration (us)"]["microseconds"], float)
    assert doc["configuration"]["Executor"] == {"string": "Graph"}


def test_from_json_round_trips(report: Report) -> None:
    back = Report.from_json(report.json())
    assert back.table(aggregate=False, col_sums=False) == report.table(
        aggregate=False, col_sums=False
    )
    assert back.calls == report.calls
    assert back.device_metrics == report.device_metrics
    assert back.configuration == report.configuration
    assert back.json() == report.json()


def test_from_json_round_trips_strings_with_quotes() -> None:
    odd = 'say "hi"\\ \n\ttab \x01 ünï'
    r = Report([{odd: odd}], {odd: {"Name": odd}}, {"Executor": odd})
    text = r.json()
    assert '\\"hi\\"' in text
    assert "ünï" in text
    back = Report.from_json(text)
    assert back.calls == [{odd: odd}]
    assert back.device_metrics == {odd: {"Name": odd}}
    assert back.configuration == {"Executor": odd}


def test_from_json_reads_tvm_output_and_ignores_unknown_keys() -> None:
    text = (
        '{"calls":[{"Count":{"count":3},"Flops":{"ratio":0.5}}],"device_metrics":{},'
        '"version":{"x":1}}'
    )
    r = Report.from_json(text)
    assert r.calls == [{"Count": Count(3), "Flops": Ratio(0.5)}]
    assert r.configuration == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '{"calls":[{"Duration (us)":{"seconds":1.0}}]}',
            r"^cannot parse metric calls\[0\]\['Duration \(us\)'\] of type 'seconds'; "
            r"valid types are microseconds, percent, count, ratio, string$",
        ),
        ('{"configuration":{"n":{"count":1.5}}}', r"^report metric configuration\['n'\]: count "),
        ('{"calls":[{"n":{"count":1,"percent":2}}]}', r"^report metric calls\[0\]\['n'\] must be"),
        ('{"device_metrics":[]}', r"^report 'device_metrics' must be an object, got list$"),
        ("[]", r"^report JSON must be an object, got list$"),
        ("{", r"^report is not valid JSON: "),
    ],
)
def test_from_json_rejects_bad_reports(text: str, message: str) -> None:
    with pytest.raises(ReportFormatError, match=message) as info:
        Report.from_json(text)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, TVMError)


# -- csv --------------------------------------------------------------------------------
def test_csv_exact_text(report: Report) -> None:
    assert report.csv() == (
        "Argument Shapes,Count,Device,Duration (us),Hash,Name,Percent\n"
        f'"{DENSE}",1,"cpu0",120.5,"a1","fused_nn_dense",60.25\n'
        f'"{ADD}",1,"cpu0",30,,"fused_add",15\n'
        f'"{DENSE}",1,"cpu0",40.25,"a1","fused_nn_dense_1",20.125\n'
        f'"{SOFTMAX}",1,"cpu0",9.25,,"fused_nn_softmax",4.625\n'
    )


def test_csv_numbers_use_six_significant_digits() -> None:
    r = Report(
        [{"a": Duration(1234567.0), "b": Ratio(1e-5), "c": Count(10**12), "d": 'x"y'}], {}, {}
    )
    assert r.csv() == 'a,b,c,d\n1.23457e+06,1e-05,1000000000000,"x""y"\n'


# -- table ------------------------------------------------------------------------------
def test_table_exact_text(report: Report) -> None:
    lines = [
        "Name              Duration (us)  Percent  Device  Count"
        "                                      Argument Shapes  Hash  ",
        f"                         160.75    80.38    cpu0      2  {DENSE}    a1  ",
        f"fused_add                 30.00    15.00    cpu0      1                     {ADD}"
        "        ",
        f"fused_nn_softmax           9.25     4.62    cpu0      1                       {SOFTMAX}"
        "        ",
        "----------        " + " " * 98,
        "Sum                      200.00   100.00              4  " + " " * 59,
        "Total                    200.00             cpu0      1  " + " " * 59,
        "",
        "Configuration",
        "-------------",
        "Executor: Graph",
        "Number of threads: 8",
        "",
    ]
    assert report.table() == "\n".join(lines)
    assert str(report) == report.table()


def test_table_without_aggregation_sorting_or_sums(report: Report) -> None:
    lines = report.table(sort=False, aggregate=False, col_sums=False).splitlines()
    assert [line.split("  ")[0] for line in lines[:6]] == [
        "Name",
        "fused_nn_dense",
        "fused_add",
        "fused_nn_dense_1",
        "fused_nn_softmax",
        "Total",
    ]
    assert "   20.12  " in lines[3]  # 20.125 rounds half to even, like printf
    assert lines[6:] == [
        "",
        "Configuration",
        "-------------",
        "Executor: Graph",
        "Number of threads: 8",
    ]


def test_table_sorts_by_duration_descending(report: Report) -> None:
    lines = report.table(aggregate=False, col_sums=False).splitlines()
    names = [line.split()[0] for line in lines[1:5]]
    assert names == ["fused_nn_dense", "fused_nn_dense_1", "fused_add", "fused_nn_softmax"]


def _rows(r: Report, **kwargs: bool) -> list[list[str]]:
    """Cells of the table body (before the blank line), split on runs of 2+ spaces."""
    body = r.table(**kwargs).split("\n\n")[0].splitlines()
    return [[c.strip() for c in line.split("  ") if c.strip()] for line in body]


def test_table_aggregates_by_hash_shapes_and_device() -> None:
    def call(name: str, us: float, **extra: Metric) -> dict[str, Metric]:
        return {"Name": name, "Duration (us)": Duration(us), "Count": Count(1), **extra}

    conv: dict[str, Metric] = {
        "Hash": "h",
        "Argument Shapes": "s",
        "Device": "cpu0",
        "Layout": "NCHW",
    }
    calls = [
        call("a", 1, **conv, Percent=Percent(1), Ratio=Ratio(0.2)),
        call("b", 2, **conv, Percent=Percent(2), Ratio=Ratio(0.4)),
        call("a", 4, Hash="h", **{"Argument Shapes": "t"}, Device="cpu0"),
        call("a", 8, Hash="h", **{"Argument Shapes": "s"}, Device="cuda0"),
        call("z", 16),
        call("z", 32),
    ]
    rows = _rows(Report(calls, {}, {}), col_sums=False)
    assert rows[0] == [
        "Name", "Duration (us)", "Percent", "Device", "Count", "Argument Shapes", "Hash", "Layout",
        "Ratio",
    ]  # fmt: skip
    assert rows[1:] == [
        ["z", "48.00", "2"],
        ["a", "8.00", "cuda0", "1", "s", "h"],
        ["a", "4.00", "cpu0", "1", "t", "h"],
        ["3.00", "3.00", "cpu0", "2", "s", "h", "NCHW", "0.3"],  # names differ -> ""
    ]


def test_table_col_sums_skip_ratios_and_strings() -> None:
    calls: list[dict[str, Metric]] = [
        {"Name": "a", "Duration (us)": Duration(1.5), "Count": Count(2), "Percent": Percent(10),
         "Ratio": Ratio(0.5)},
        {"Name": "b", "Duration (us)": Duration(2.25), "Count": Count(3), "Percent": Percent(20),
         "Ratio": Ratio(0.5)},
    ]  # fmt: skip
    rows = _rows(Report(calls, {}, {}), aggregate=False)
    assert rows[-2:] == [["----------"], ["Sum", "3.75", "30.00", "5"]]


def test_table_adds_a_total_row_per_device() -> None:
    devices: dict[str, dict[str, Metric]] = {
        "cpu0": {"Duration (us)": Duration(10)},
        "cuda0": {"Name": "whatever", "Duration (us)": Duration(20), "Device": "cuda0"},
    }
    rows = _rows(Report([], devices, {}))
    assert rows[-2:] == [["Total", "10.00"], ["Total", "20.00", "cuda0"]]
    assert rows[-4:-2] == [["----------"], ["Sum"]]


def test_table_configuration_block() -> None:
    r = Report([], {}, {"Executor": "VM", "Number of threads": Count(12345), "r": Ratio(0.125)})
    assert r.table().split("\n\n")[1] == (
        "Configuration\n-------------\nExecutor: VM\nNumber of threads: 12345\nr: 0.12\n"
    )


def test_table_uses_the_locale_for_separators(monkeypatch: pytest.MonkeyPatch) -> None:
    conv = dict(locale.localeconv(), thousands_sep=",", grouping=[3, 0], decimal_point=".")
    monkeypatch.setattr(locale, "localeconv", lambda: conv)
    r = Report([{"Name": "a", "Duration (us)": Duration(1234567.5), "Count": Count(1234)}], {}, {})
    rows = _rows(r, col_sums=False)
    assert rows[1][:2] == ["a", "1,234,567.50"]
    assert rows[1][-1] == "1,234"


def test_table_errors() -> None:
    no_duration = Report([{"Name": "a"}], {}, {})
    with pytest.raises(ValueError, match=r"^row 'a' has no Duration 'Duration \(us\)'; table"):
        no_duration.table()
    assert "a  " in no_duration.table(sort=False)
    with pytest.raises(ValueError, match=r"^calls\[0\] has neither 'Hash' nor 'Name'"):
        Report([{"Count": Count(1)}], {}, {}).table(sort=False)
    mixed = Report([{"Name": "a", "x": Count(1)}, {"Name": "a", "x": Ratio(1.0)}], {}, {})
    with pytest.raises(TypeError, match=r"^metric 'x' mixes Count, Ratio values; cannot aggregate"):
        mixed.table(sort=False)


# -- profiler ---------------------------------------------------------------------------
def _clock(*ticks: int) -> Iterator[int]:
    return iter(ticks)


def test_profiler_builds_report_with_exact_durations(monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[Device] = []

    class FakeAPI:
        def sync(self, dev: Device) -> None:
            synced.append(dev)

    monkeypatch.setattr(profiling.profiler, "find_device_api", lambda device_type: FakeAPI())
    ticks = _clock(0, 100, 1_000, 4_000, 5_000, 11_000, 20_100, 30_000)
    config: dict[str, Metric] = {"Executor": "Graph", "Number of threads": Count(4)}
    prof = Profiler([cpu(0), cuda(0)], config, clock=lambda: next(ticks))
    prof.start()
    assert prof.is_running
    prof.start_call("fused_add", cpu(0), {"Hash": "h1", "Argument Shapes": ADD})
    prof.stop_call()
    prof.start_call("fused_conv", cuda(0))
    prof.stop_call({"Flops": Count(7)})
    prof.stop()
    assert not prof.is_running
    r = prof.report()

    assert r.calls == [
        {"Duration (us)": Duration(3.0), "Count": Count(1), "Name": "fused_add", "Device": "cpu0",
         "Hash": "h1", "Argument Shapes": ADD, "Percent": Percent(3.0 / 30.0 * 100)},
        {"Duration (us)": Duration(6.0), "Count": Count(1), "Name": "fused_conv", "Device": "cuda0",
         "Flops": Count(7), "Percent": Percent(20.0)},
    ]  # fmt: skip
    total: dict[str, Metric] = {"Count": Count(1), "Name": "Total"}
    assert r.device_metrics == {
        "cpu0": {"Duration (us)": Duration(30.0), **total, "Device": "cpu0"},
        "cuda0": {"Duration (us)": Duration(20.0), **total, "Device": "cuda0"},
    }
    assert list(r.device_metrics["cpu0"]) == ["Duration (us)", "Count", "Name", "Device"]
    assert r.configuration == config
    assert synced == [cuda(0)] * 4  # only non-CPU frames sync: Total and fused_conv, start and stop
    assert "fused_conv" in str(r)
    assert "Number of threads: 4" in str(r)


def test_profiler_percent_is_ieee_when_total_is_zero() -> None:
    prof = Profiler([cpu(0)], clock=lambda: 7)
    prof.start()
    prof.start_call("a", cpu(0))
    prof.stop_call()
    prof.stop()
    percent = prof.report().calls[0]["Percent"]
    assert isinstance(percent, Percent)
    assert percent.percent != percent.percent  # nan, like C++ 0.0 / 0.0


@pytest.mark.parametrize(
    ("device", "text"),
    [
        (Device(1, 0), "cpu0"),
        (Device(2, 1), "cuda1"),
        (Device(4, 0), "opencl0"),
        (Device(7, 0), "vulkan0"),
        (Device(8, 0), "metal0"),
        (Device(9, 0), "vpi0"),
        (Device(10, 2), "rocm2"),
        (Device(12, 0), "ext_dev0"),
        (Device(15, 0), "webgpu0"),
        (Device(16, 0), "hexagon0"),
        (Device(1 + 128 * 3, 0), "remote[2]:cpu0"),  # a device of RPC session 2 (tvmrt)
    ],
)
def test_device_string(device: Device, text: str) -> None:
    assert profiling.device_string(device) == text


def test_profiler_misuse_raises() -> None:
    with pytest.raises(ValueError, match=r"^devices must list at least one device to profile$"):
        Profiler([])
    prof = Profiler([cpu(0)], clock=lambda: 0)
    with pytest.raises(RuntimeError, match=r"^start_call\(\) needs a running profiler"):
        prof.start_call("a", cpu(0))
    with pytest.raises(RuntimeError, match=r"^profiler is not running; call start\(\) first$"):
        prof.stop()
    with pytest.raises(RuntimeError, match=r"^report\(\) needs a finished profile"):
        prof.report()
    prof.start()
    with pytest.raises(RuntimeError, match=r"^profiler is already running; call stop\(\) first$"):
        prof.start()
    with pytest.raises(RuntimeError, match=r"^stop_call\(\) has no matching start_call\(\)$"):
        prof.stop_call()
    prof.start_call("a", cpu(0))
    with pytest.raises(
        RuntimeError, match=r"^calls \['a'\] are still open; call stop_call\(\) first$"
    ):
        prof.stop()
    with pytest.raises(RuntimeError, match=r"^report\(\) needs a finished profile"):
        prof.report()
