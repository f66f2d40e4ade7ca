"""The C parsers of outside bytes (graph JSON, params blobs, the module blob, AOT metadata,
the Relay VM's code.ro, a Relax VM executable's payload, then run), fuzzed with a fixed seed under ASan + UBSan
(tests/native/c/fuzz_parsers.c, linked with the static library): every mutated input
parses or fails with an error message; no crash, leak or
undefined behaviour. TVMRT_NATIVE_FUZZ_ITERATIONS sets the inputs per target (default
1000); `fuzz/native_parsers.py` runs longer."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.native.conftest import NativeBuild
from tests.support.paths import REPO

sys.path.insert(0, str(REPO / "fuzz"))

import native_parsers  # the targets and their seeds: one table for both runs

ITERATIONS = int(os.environ.get("TVMRT_NATIVE_FUZZ_ITERATIONS", "1000"))


@pytest.mark.parametrize("target", sorted(native_parsers.TARGETS))
def test_parser_survives_mutations(
    target: str,
    native_asan: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    artifacts: Path,
    tmp_path: Path,
) -> None:
    kind, seed = native_parsers.TARGETS[target]
    path = native_parsers.seed_file(seed, tmp_path, artifacts)
    exe = compile_c(native_asan, "fuzz_parsers", True)
    proc = native_asan.run(exe, kind, path, str(ITERATIONS), "0", timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert proc.stdout.startswith(f"{kind}: {ITERATIONS} inputs"), proc.stdout
    assert "ERROR: AddressSanitizer" not in proc.stderr
    assert "runtime error" not in proc.stderr  # UBSan
    if kind == "relax":  # mutated executables that loaded also ran (or failed with an error)
        ran = proc.stdout.splitlines()[1]
        assert ran.startswith("relax: main returned "), proc.stdout
        assert ran != "relax: main returned 0 times, failed with an error 0 times", ran
