"""A pytest plugin for `.ci/run`'s second stage: run only the tests the first stage skipped.

    TVMRT_CI_RERUN_SKIPPED=REPORT.xml python -m pytest -p rerun_skipped   (.ci on PYTHONPATH)

The first stage runs the whole suite on a fresh clone with no ../shared beside it; what it
skipped is mostly third-party data (TVMRT_ARTIFACTS). The second stage has ../shared and
TVMRT_REQUIRE_ARTIFACTS=1, so those tests now run, and a folder still missing fails. Every
other test already ran on the same commit, so running it again would only double CI's time.
A report naming no skipped test, or skipped tests no longer collected, is an error: the stage
would otherwise pass having checked nothing.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET

import pytest

_VARIABLE = "TVMRT_CI_RERUN_SKIPPED"


def _skipped(report: str) -> set[tuple[str, str]]:
    """(classname, name) of every skipped test case, parameters taken off the name: a test
    parametrized by what ../shared holds has other ids once it is there, so all of a skipped
    function's cases run. A module skipped whole has no classname and its dotted path as name."""
    cases = ET.parse(report).getroot().iter("testcase")
    return {
        (case.get("classname", ""), case.get("name", "").partition("[")[0])
        for case in cases
        if any(child.tag == "skipped" for child in case)
    }


def _address(nodeid: str) -> tuple[str, str, str]:
    """(classname, name without parameters, module) as pytest's JUnit report writes the first
    two (junitxml.mangle_test_address)."""
    names = nodeid.partition("[")[0].split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    return ".".join(names[:-1]), names[-1], names[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    report = os.environ.get(_VARIABLE)
    if not report:
        raise pytest.UsageError(f"-p rerun_skipped needs {_VARIABLE}=<first stage's JUnit report>")
    wanted = _skipped(report)
    if not wanted:
        raise pytest.UsageError(f"{report} records no skipped test: nothing to rerun")
    modules = {name for classname, name in wanted if not classname}
    kept, found = [], set()
    for item in items:
        classname, name, module = _address(item.nodeid)
        if (classname, name) in wanted or module in modules:
            kept.append(item)
            found.update({(classname, name), ("", module)})
    lost = sorted(wanted - found)
    if lost:
        names = ", ".join(f"{c}::{n}" for c, n in lost[:5])
        raise pytest.UsageError(f"{len(lost)} skipped tests of {report} are not collected: {names}")
    kept_ids = {item.nodeid for item in kept}
    config.hook.pytest_deselected(items=[item for item in items if item.nodeid not in kept_ids])
    items[:] = kept
    print(f"\nrerun_skipped: {len(kept)} tests of the functions the first stage skipped")
