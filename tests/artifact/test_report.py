"""The typed inspection report serializes as ``tvmrt inspect --json`` always printed it."""

from __future__ import annotations

import json

from tvmrt.artifact.report import (
    CpuNeeds,
    GraphReport,
    HostReport,
    InspectionReport,
    LibraryReport,
    ParamsReport,
)
from tvmrt.runtime.loaders.dispatch import FileKind


def test_library_facts_keep_the_order_they_were_found_in() -> None:
    lib = LibraryReport(form=FileKind.LEGACY_SO, kind="shared library")
    lib.needs = None  # unset stays out
    lib.embedded = "an AOT executor factory"
    lib.abi = "legacy"
    lib.embedded = "set again: keeps its place"
    lib.extra["recipe"] = True
    assert list(lib.to_dict()) == ["form", "kind", "embedded", "abi", "recipe"]
    assert lib.to_dict()["form"] == "legacy-so"
    assert lib.to_dict()["embedded"] == "set again: keeps its place"


def test_optional_sections_are_left_out_or_null_as_before() -> None:
    report = InspectionReport(
        files={"lib": "x.so"},
        form="factory",
        library=LibraryReport(kind="empty file"),
        graph=None,
        params=ParamsReport(count=0, bytes=0),
        host=HostReport(machine="x86-64", os="linux"),
        problems=["p"],
        runnable=False,
    )
    assert "graph" not in report.to_dict()  # no graph: no key
    report.graph = GraphReport([], [], 0, 0, [], 0, None, [1])
    assert json.loads(report.to_json())["graph"]["storage"] is None  # a refused plan: null
    assert list(report.to_dict()) == [
        "files",
        "form",
        "library",
        "graph",
        "params",
        "host",
        "problems",
        "runnable",
    ]
    assert "missing_here" not in CpuNeeds([], 0, 0).to_dict()
    assert CpuNeeds(["avx512f"], 3, 0, ["avx512f"]).to_dict()["missing_here"] == ["avx512f"]
