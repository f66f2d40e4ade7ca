"""Issue 23 item 4 in CI: single-field damage to a real library never kills the process.

Runs ``fuzz/elf_fields.py`` (program headers, dynamic entries, relocations and dynamic
symbols of ``relay016/linkparams-so/deploy.so``; each mutated file loaded and its graph run
in a forked child against ``golden.npz``) for a fixed-seed sample. Every outcome must be a
refusal or the right answer: no deaths, hangs, wrong answers or non-tvmrt exceptions.
``TVMRT_ELF_FUZZ_COUNT`` sets the sample size (default 500, about 25 s); the figures of the
full runs are in ``fuzz/README.md``.
"""

from __future__ import annotations

import os
import subprocess
import sys

from support.paths import REPO

SCRIPT = REPO / "fuzz" / "elf_fields.py"


def test_sampled_mutations_are_refused_or_answer_right(artifacts):
    count = os.environ.get("TVMRT_ELF_FUZZ_COUNT", "500")
    # the script reads <TVMRT_ARTIFACTS>/relay016/...: the project's own build of it
    root = (artifacts / "relay016").parent
    env = {**os.environ, "TVMRT_ARTIFACTS": str(root), "TVM_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "linkparams", "--count", count, "--seed", "0"],
        capture_output=True,
        text=True,
        timeout=1800,
        env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    tally = dict(line.split(None, 1) for line in result.stdout.splitlines() if line.strip())
    assert int(tally["mutations"]) == int(count)
    for outcome in ("wrong", "death", "hang", "other"):
        assert tally[outcome] == "0", result.stdout
    assert int(tally["refused"]) > 0
