"""Short fuzzing of every untrusted-bytes parser on each CI run (long runs: fuzz/run.py).

The targets are shared with the atheris harness; each may raise only a tvmrt error.
Inputs are real artifacts and hand-made seeds with random byte edits and truncations.
"""

from __future__ import annotations

import os
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.paths import REPO

sys.path.insert(0, str(REPO / "fuzz"))

import contextlib

import fuzz_targets
from run import seeds

from tvmrt.error import TVMError


@st.composite
def mutated(draw: st.DrawFn, seed_list: list[bytes]) -> bytes:
    data = bytearray(draw(st.sampled_from(seed_list)))
    for _ in range(draw(st.integers(0, 8))):
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        action = draw(st.sampled_from(["flip", "set", "cut", "dup"]))
        if action == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif action == "set":
            data[at] = draw(st.sampled_from([0, 1, 0x7F, 0x80, 0xFF]))
        elif action == "cut":
            del data[at:]
        else:
            data[at:at] = data[at : at + draw(st.integers(1, 16))]
    return bytes(data)


@pytest.mark.parametrize("target", sorted(fuzz_targets.TARGETS))
def test_parsers_raise_only_tvmrt_errors(target, artifacts):
    seed_list = seeds(target) or [b"\x00"]
    func = fuzz_targets.TARGETS[target]

    @settings(
        max_examples=150,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(mutated(seed_list) | st.binary(max_size=512))
    def check(data: bytes) -> None:
        with contextlib.suppress(TVMError):
            func(data)

    check()


def test_peak_rss_of_inspect_and_load_stays_under_256_mb(artifacts):
    """fuzz/rss.py: the hostile files of issue 11, then mutations, in a fresh process each."""
    import subprocess

    seconds = os.environ.get("TVMRT_FUZZ_RSS_SECONDS", "2")
    script = REPO / "fuzz" / "rss.py"
    result = subprocess.run(
        [sys.executable, str(script), "--seconds", seconds, "inspect", "load_module"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [line.split() for line in result.stdout.splitlines()[1:]]
    assert [row[0] for row in rows] == ["inspect", "load_module"]
    for row in rows:
        assert int(row[1]) >= 7  # every hostile file at least
        assert float(row[4]) < 256
