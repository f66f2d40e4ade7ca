"""Issue 33 item 2: a DLR user's script runs Neo models on tvmrt with only the import
changed, or unchanged under ``python -m tvmrt.dlr``; outputs bitwise TVM's.

The Neo folders are TVM 0.16 builds renamed as Neo names them, with a ``compiled.meta`` as
Neo writes it (tests/dlr/build_neo_fixtures.py): a graph model (float32 and int32 inputs,
float32 and int32 outputs) and a Relay VM model with a dynamic batch. Each folder also
gets a ``libdlr.so`` of the test's own whose constructor would leave a marker file: DLR
loads the one beside the model; tvmrt never may.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from support.paths import REPO

SCRIPT = Path(__file__).with_name("dlr_script.py")
TRAP = r"""
#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void loaded(void) {
  const char* path = getenv("DLR_TRAP_MARKER");
  FILE* f = path ? fopen(path, "w") : NULL;
  if (f) { fputs("libdlr.so was loaded\n", f); fclose(f); }
}
int CreateDLRModel(void) { return -1; }
"""


def _trap(folder: Path, tmp_path: Path) -> None:
    source = tmp_path / "trap.c"
    source.write_text(TRAP)
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-o", str(folder / "libdlr.so"), str(source)], check=True
    )
    (folder / "dlr.h").write_text("/* DLR's header, shipped with Neo models */\n")


def _run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO / "src"),
        "DLR_TRAP_MARKER": str(tmp_path / "trap-marker"),
    }
    done = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "trap-marker").exists(), "the model folder's libdlr.so was loaded"
    return done


def _cases(neo_root: Path) -> list[tuple[str, dict[str, np.ndarray], list[np.ndarray]]]:
    cpu = np.load(neo_root / "neo-cpu.npz")
    vm = np.load(neo_root / "neo-relayvm.npz")
    cases = [("neo-cpu", {"data": cpu["data"], "mask": cpu["mask"]}, [cpu["out_0"], cpu["out_1"]])]
    for batch in (1, 5):
        want = [vm[f"features_{batch}"], vm[f"total_{batch}"]]
        cases.append(("neo-relayvm", {"x": vm[f"x_{batch}"]}, want))
    return cases


@pytest.mark.parametrize("how", ["import changed", "python -m tvmrt.dlr"])
def test_a_dlr_script_runs_neo_models_bitwise(
    neo_copy, neo_root: Path, tmp_path: Path, how: str
) -> None:
    text = SCRIPT.read_text()
    if how == "import changed":
        assert text.count("\nimport dlr\n") == 1
        script = tmp_path / "script.py"
        script.write_text(text.replace("\nimport dlr\n", "\nfrom tvmrt import dlr\n"))
        prefix = [str(script)]
    else:
        prefix = ["-m", "tvmrt.dlr", str(SCRIPT)]
    for i, (name, inputs, want) in enumerate(_cases(neo_root)):
        folder = tmp_path / f"{name}-{i}"
        if not folder.exists():
            folder = neo_copy(name).rename(folder)
        _trap(folder, tmp_path)
        np.savez(tmp_path / "in.npz", **inputs)
        out = tmp_path / f"out{i}.npz"
        done = _run([*prefix, str(folder), str(tmp_path / "in.npz"), str(out)], tmp_path)
        got = np.load(out)
        expected_names = "probabilities,class_id" if name == "neo-cpu" else "features,total"
        assert done.stdout.split() == ["1.10.0", "1.10.0", expected_names]
        assert list(got.files) == expected_names.split(",")
        for label, expected in zip(got.files, want, strict=True):
            assert got[label].dtype == expected.dtype
            assert got[label].shape == expected.shape
            assert got[label].tobytes() == expected.tobytes(), (name, label)
