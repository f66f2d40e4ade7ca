"""A data set's .npz (``examples/digits/model/heldout.npz``: ``image`` and ``label``) feeds
``-i`` and ``--compare`` of run, bench and profile alike: members that are neither inputs
nor outputs are ignored with a warning, and ``NAME=FILE.npz:MEMBER`` picks one member."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from support.cli import tvmrt
from support.paths import REPO

MODEL = REPO / "examples" / "digits" / "model"
HELDOUT = MODEL / "heldout.npz"
IGNORED = "'label' is neither an input nor an output of the model; ignored"


def _first_row(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if "row 0 top-5" in line)


@pytest.mark.parametrize(
    "command", [["run"], ["bench", "--warmup", "0", "--repeat", "1"], ["profile", "--number", "1"]]
)
def test_a_data_set_npz_feeds_every_command(command: list[str]) -> None:
    done = tvmrt(*command, MODEL, "-i", HELDOUT)
    assert done.returncode == 0, done.stderr
    assert IGNORED in done.stderr


def test_a_member_picked_by_name_is_the_input(tmp_path: Path) -> None:
    image = np.load(HELDOUT)["image"]
    np.save(tmp_path / "image.npy", image)
    reference = tvmrt("run", MODEL, "-i", f"image={tmp_path / 'image.npy'}")
    assert reference.returncode == 0, reference.stderr
    for spec in (f"image={HELDOUT}:image", f"image={HELDOUT}"):
        picked = tvmrt("run", MODEL, "-i", spec, "-o", tmp_path / "out.npz")
        assert picked.returncode == 0, picked.stderr
        assert IGNORED not in picked.stderr  # only the picked member is read
        assert _first_row(picked.stdout) == _first_row(reference.stdout)
    wrong = tvmrt("run", MODEL, "-i", f"image={HELDOUT}:imgae")
    assert wrong.returncode == 2
    assert "has no member 'imgae': ['image', 'label']" in wrong.stderr


def test_compare_picks_a_member_for_an_output(tmp_path: Path) -> None:
    out = tmp_path / "out.npz"
    assert tvmrt("run", MODEL, "-i", HELDOUT, "-o", out).returncode == 0
    ref = tmp_path / "ref.npz"
    np.savez(ref, probs=np.load(out)["probabilities_0"], label=np.load(HELDOUT)["label"])
    whole = tvmrt("run", MODEL, "-i", HELDOUT, "--compare", HELDOUT)
    assert whole.returncode == 2
    assert "--compare OUTPUT=REF.npz:MEMBER" in whole.stderr
    picked = tvmrt("run", MODEL, "-i", HELDOUT, "--compare", f"probabilities_0={ref}:probs")
    assert picked.returncode == 0, picked.stderr
    assert "probabilities_0 (as probs): max abs error 0" in picked.stdout
    labels = tvmrt("run", MODEL, "-i", HELDOUT, "--compare", f"probabilities_0={ref}:label")
    assert labels.returncode == 1
    assert "shape (360, 10), reference (360,): MISMATCH" in labels.stdout
    other = tvmrt("run", MODEL, "-i", HELDOUT, "--compare", f"nope={ref}:probs")
    assert other.returncode == 2
    assert "'nope' is not an output of the model" in other.stderr
