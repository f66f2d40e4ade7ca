"""Issue 48: what a firmware developer does (README "In your own firmware",
examples/micro/): their own main.c and Makefile around an MLF package, taking only the
include folder, the runtime's C files and the example port from ``tvmrt micro files``; the
firmware's answers equal tvmrt's host run of the same package, bit for bit."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from support.paths import REPO
from tvmrt.runtime.device import cpu
from tvmrt.runtime.executor import AotModule
from tvmrt.runtime.loaders.mlf_aot import load_mlf_aot

EXAMPLE = REPO / "examples" / "micro"
XS = (0.0, 0.5, 1.5, 3.0, 6.0)  # the inputs main.c runs


def test_the_example_project_builds_and_answers_as_the_host(
    micro_root: Path, tmp_path: Path
) -> None:
    package = micro_root / "sine" / "sine_c_usmp"
    tvmrt = f"{sys.executable} -m tvmrt"
    made = subprocess.run(
        ["make", "-C", str(EXAMPLE), f"PACKAGE={package}", f"OUT={tmp_path}", f"TVMRT={tvmrt}"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert made.returncode == 0, made.stderr[-3000:]
    ran = subprocess.run(
        ["make", "-s", "-C", str(EXAMPLE), "run", f"PACKAGE={package}", f"OUT={tmp_path}",
         f"TVMRT={tvmrt}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    bits = [int(b) for b in re.findall(r"^y_bits=(\d+)$", ran.stdout + ran.stderr, re.M)]
    module = AotModule(load_mlf_aot(str(package), "sine_c_usmp")["default"](cpu(0)))
    want = []
    for x in XS:
        module.set_input("input_1", np.array([[x]], "float32"))
        module.run()
        want.append(int(module.get_output(0).numpy().view(np.uint32).ravel()[0]))
    assert bits == want


def test_files_prints_what_the_makefile_takes() -> None:
    from support.cli import tvmrt

    include = tvmrt("micro", "files", "--include").stdout.split()
    sources = tvmrt("micro", "files", "--sources").stdout.split()
    port = tvmrt("micro", "files", "--port").stdout.split()
    assert (Path(include[0]) / "tvm/runtime/crt/platform.h").is_file()
    assert [Path(p).name for p in sources] == ["crt_backend.c", "stack_allocator.c"]
    assert {Path(p).name for p in port} >= {"platform.c", "cortex_m_startup.c", "cortex_m.ld"}
