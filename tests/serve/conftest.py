"""Fixtures for tests/serve: MobileNet v1 served by a real ``tvmrt serve`` process."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from support.serve import tvmrt_serve


@pytest.fixture
def mobilenet_server(artifacts: Path) -> Callable[..., object]:
    """A factory: ``with mobilenet_server(*flags) as served`` serves MobileNet v1 as ``mb``."""

    def start(*flags: str) -> object:
        return tvmrt_serve(
            str(artifacts / "mobilenet_v1"), "--name", "mb", "--threads", "1", *flags
        )

    return start
