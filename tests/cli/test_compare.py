"""``tvmrt run --compare REF.npz`` and reference files given as inputs (issue 22, item 6).

The reference is TVM's own run of MobileNet v1 (``golden.npz``: its input ``data`` and its
output ``output_0``); perturbed copies check that a difference is caught.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pytest

from support.cli import tvmrt


@pytest.fixture(scope="module")
def golden(artifacts: Path) -> dict[str, np.ndarray]:
    with np.load(artifacts / "mobilenet_v1" / "golden.npz") as g:
        return {k: g[k] for k in g.files}


def _bogus_member(shape: tuple[int, ...]) -> bytes:
    """A .npy header for ``shape`` float32 followed by no data: fails if it is ever read."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": "<f4", "fortran_order": False, "shape": shape}
    )
    return buf.getvalue()


def test_a_reference_run_is_reproduced(artifacts: Path) -> None:
    ref = artifacts / "mobilenet_v1" / "golden.npz"
    out = tvmrt("run", artifacts / "mobilenet_v1", "-i", ref, "--compare", ref)
    assert out.returncode == 0, out.stderr
    assert "fused_nn_softmax_0 (as output_0): max abs error" in out.stdout
    assert "outputs match the reference" in out.stdout
    # the reference's output in the input file: a warning, not a refusal
    assert "'output_0' is an output of the model, not an input; not read" in out.stderr


def test_a_difference_past_the_tolerance_exits_1(
    artifacts: Path, golden: dict[str, np.ndarray], tmp_path: Path
) -> None:
    ref = tmp_path / "ref.npz"
    off = golden["output_0"].copy()
    off[0, 7] *= 1.01  # 1% off in one element
    np.savez(ref, data=golden["data"], output_0=off)
    out = tvmrt("run", artifacts / "mobilenet_v1", "-i", ref, "--compare", ref)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "DIFFERS (1 of 1000 elements past tolerance)" in out.stdout
    assert "outputs DIFFER from the reference" in out.stdout
    looser = tvmrt("run", artifacts / "mobilenet_v1", "-i", ref, "--compare", ref, "--rtol", "0.02")
    assert looser.returncode == 0, looser.stdout
    assert "rtol 0.02" in looser.stdout


def test_only_the_members_needed_are_read(
    artifacts: Path, golden: dict[str, np.ndarray], tmp_path: Path
) -> None:
    """A 1 GiB member that is not needed is never decompressed (here: it has no data)."""
    inputs, ref = tmp_path / "inputs.npz", tmp_path / "ref.npz"
    np.savez(inputs, data=golden["data"])
    with zipfile.ZipFile(inputs, "a") as z:  # an output of the model: not an input, not read
        z.writestr("output_0.npy", _bogus_member((1 << 28,)))
    np.savez(ref, output_0=golden["output_0"])
    with zipfile.ZipFile(ref, "a") as z:  # an input: --compare skips it unread
        z.writestr("data.npy", _bogus_member((1 << 28,)))
    out = tvmrt("run", artifacts / "mobilenet_v1", "-i", inputs, "--compare", ref)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "outputs match the reference" in out.stdout


def test_an_input_file_of_the_wrong_shape_is_refused_from_its_header(
    artifacts: Path, tmp_path: Path
) -> None:
    inputs = tmp_path / "inputs.npz"
    with zipfile.ZipFile(inputs, "w") as z:
        z.writestr("data.npy", _bogus_member((1, 3, 32, 32)))
    out = tvmrt("run", artifacts / "mobilenet_v1", "-i", inputs)
    assert out.returncode == 2
    assert "input 'data' has shape (1, 3, 32, 32), the model expects (1, 3, 224, 224)" in out.stderr


def test_names_that_are_neither_inputs_nor_outputs_are_refused_while_an_input_is_missing(
    artifacts: Path, golden: dict[str, np.ndarray], tmp_path: Path
) -> None:
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, dta=golden["data"])  # a misspelt input: data would be filled
    out = tvmrt("run", artifacts / "mobilenet_v1", "-i", inputs)
    assert out.returncode == 2
    assert "input(s) ['dta']" in out.stderr
    assert "are not inputs of the model, and input(s) ['data'] have no array" in out.stderr
    np.savez(inputs, data=golden["data"], dta=golden["data"])  # every input is there
    out = tvmrt("run", artifacts / "mobilenet_v1", "-i", inputs)
    assert out.returncode == 0, out.stderr
    assert "'dta' is neither an input nor an output of the model; ignored" in out.stderr


def test_a_reference_without_outputs_is_a_usage_error(
    artifacts: Path, golden: dict[str, np.ndarray], tmp_path: Path
) -> None:
    ref = tmp_path / "ref.npz"
    np.savez(ref, data=golden["data"], logits=golden["output_0"])
    out = tvmrt("run", artifacts / "mobilenet_v1", "--fill", "zeros", "--compare", ref)
    assert out.returncode == 2
    assert "holds no output of the model" in out.stderr
    assert "['fused_nn_softmax_0'] (or output_0, output_1, ...)" in out.stderr
