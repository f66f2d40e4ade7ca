"""The micro tests: firmware built with Arm's GNU toolchain, run on QEMU's Cortex-M boards.

Both come from Debian (``.ci/run`` installs them as root); without them the tests skip,
naming the packages. The packages run are TVM 0.16's MLF AOT exports: those of
tests/mlf_aot (float32 and int8; ``c`` and ``packed`` interfaces; params linked or not) and
the microcontroller models of tests/micro/build_micro_fixtures.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from support.built import built
from support.mlf_aot_cases import fixture_root
from support.paths import REPO

TOOLS = {
    "arm-none-eabi-gcc": "gcc-arm-none-eabi libnewlib-arm-none-eabi",
    "qemu-system-arm": "qemu-system-arm",
}


def missing_tools() -> str | None:
    """Why firmware cannot be built and run here, or None."""
    absent = [tool for tool in TOOLS if shutil.which(tool) is None]
    if not absent:
        return None
    packages = " ".join(TOOLS[t] for t in absent)
    return f"{', '.join(absent)} not found (Debian: apt-get install {packages})"


@pytest.fixture(autouse=True)
def _need_tools(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("no_cross") is None and (why := missing_tools()):
        pytest.skip(why)


@pytest.fixture(scope="session")
def mlf_root() -> Path:
    return fixture_root()


@pytest.fixture(scope="session")
def micro_root() -> Path:
    """TVM 0.16's microcontroller packages (tests/micro/build_micro_fixtures.py)."""
    return built(REPO / "tests" / "micro" / "build_micro_fixtures.py", "micro")
