"""The README's walkthrough runs as written (every ``$`` command, in order)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def walkthrough_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text.split("## Walkthrough", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```console\n(.*?)```", section, re.S)
    assert block, "the README walkthrough has no console block"
    return [line[2:] for line in block.group(1).splitlines() if line.startswith("$ ")]


def test_walkthrough_is_documented():
    commands = walkthrough_commands()
    verbs = {shlex.split(c)[1] for c in commands if c.startswith("tvmrt ")}
    assert {"compile", "inspect", "run", "bench", "profile"} <= verbs


@pytest.mark.slow
def test_walkthrough_runs(tmp_path):
    (tmp_path / "examples").symlink_to(REPO / "examples")
    for command in walkthrough_commands():
        argv = shlex.split(command)
        if argv[0] == "python":
            argv[0] = sys.executable
        elif argv[0] == "tvmrt":
            argv[:1] = [sys.executable, "-m", "tvmrt"]
        done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"{command!r} failed:\n{done.stdout}\n{done.stderr}"
