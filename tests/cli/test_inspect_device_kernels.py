"""``tvmrt inspect`` folds the kernels a library's device module provides into one line.

A GPU build's host code looks up every kernel by name; listing each as its own ``calls:``
line buried the report (152 lines for one real CUDA model). The text shows the count and
the first names; ``--json`` keeps every name with its state.
"""

from __future__ import annotations

from tvmrt.artifact.report import (
    CpuNeeds,
    HostReport,
    InspectionReport,
    LibraryNeeds,
    LibraryReport,
    ParamsReport,
)
from tvmrt.cli.inspect_cmd import _text
from tvmrt.runtime.loaders.needs import DEVICE_PROVIDED


def _report(functions: dict[str, str]) -> InspectionReport:
    library = LibraryReport(needs=LibraryNeeds(functions, CpuNeeds([], 0, 0)))
    return InspectionReport(
        files={"lib": "deploy.so"}, form="factory", library=library, graph=None,
        params=ParamsReport(0, 0), host=HostReport("x86-64", "linux"), problems=[],
        runnable=True,
    )  # fmt: skip


def test_many_device_kernels_are_one_line() -> None:
    kernels = {f"k{i}_kernel": DEVICE_PROVIDED for i in range(20)}
    report = _report({"__tvm_set_device": "provided", **kernels, "tvm.x": "missing"})
    calls = [line for line in _text(report).splitlines() if line.startswith("  calls:")]
    shown = ", ".join(f"k{i}_kernel" for i in range(8))
    assert calls == [
        "  calls:  __tvm_set_device (provided)",
        "  calls:  tvm.x (missing)",
        f"  calls:  20 kernel(s) of its device module ({shown}, ... and 12 more)",
    ]
    assert '"k19_kernel": "provided by a device module"' in report.to_json()


def test_no_device_kernels_no_device_line() -> None:
    report = _report({"tvm.contrib.sort.argsort": "provided"})
    calls = [line for line in _text(report).splitlines() if line.startswith("  calls:")]
    assert calls == ["  calls:  tvm.contrib.sort.argsort (provided)"]
