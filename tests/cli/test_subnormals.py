"""Subnormal weights: the committed examples hold none, and ``inspect``/``bench`` warn
about a model whose params hold some, stating what they cost."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from support.cli import tvmrt
from support.paths import REPO
from tvmrt.artifact.subnormals import count_subnormals
from tvmrt.runtime.params import load_param_dict_from_file, save_param_dict_to_file

DIGITS = REPO / "examples" / "digits"
PARAMS = [DIGITS / "model" / "deploy.params", DIGITS / "tvm016" / "deploy_param.params"]


def _subnormal_by_bits(arr: np.ndarray) -> int:
    """Independent count: float32 with a zero exponent field and a nonzero mantissa."""
    bits = arr.astype(np.float32).view(np.uint32)
    return int(np.count_nonzero(((bits >> 23) & 0xFF == 0) & (bits & 0x7FFFFF != 0)))


@pytest.mark.parametrize("path", PARAMS, ids=lambda p: p.parent.name)
def test_the_committed_digits_weights_hold_no_subnormals(path: Path) -> None:
    for name, arr in load_param_dict_from_file(str(path)).items():
        values = arr.numpy()
        assert _subnormal_by_bits(values) == 0, name
        assert count_subnormals(values, values.dtype) == 0, name


def test_the_standalone_library_holds_the_flushed_weights() -> None:
    blob = (DIGITS / "model" / "standalone.so").read_bytes()
    for arr in load_param_dict_from_file(str(PARAMS[0])).values():
        assert blob.count(arr.numpy().tobytes()) == 1


def test_count_agrees_with_the_bit_pattern() -> None:
    rng = np.random.default_rng(0)
    tiny = np.finfo(np.float32).tiny
    values = np.concatenate(
        [
            rng.standard_normal(1000).astype(np.float32),
            (rng.random(300) * tiny).astype(np.float32),  # some round to 0
            np.array([0.0, -0.0, tiny, -tiny, np.inf, np.nan], np.float32),
            -(rng.random(50) * tiny).astype(np.float32),
        ]
    )
    assert count_subnormals(values, values.dtype) == _subnormal_by_bits(values)
    assert count_subnormals(values.tobytes(), values.dtype) == _subnormal_by_bits(values)
    assert count_subnormals(np.arange(5), np.dtype("int64")) == 0


@pytest.fixture
def subnormal_model(tmp_path: Path) -> Path:
    """The digits model with 40 of its first layer's zero weights made subnormal."""
    folder = tmp_path / "model"
    shutil.copytree(DIGITS / "model", folder)
    params = {k: v.numpy() for k, v in load_param_dict_from_file(str(PARAMS[0])).items()}
    flat = params["p0"].reshape(-1).copy()
    zeros = np.flatnonzero(flat == 0)[:40]
    assert len(zeros) == 40
    flat[zeros] = np.finfo(np.float32).smallest_subnormal * np.arange(1, 41, dtype=np.float32)
    params["p0"] = flat.reshape(params["p0"].shape)
    save_param_dict_to_file(params, folder / "deploy.params")
    return folder


def test_inspect_and_bench_warn_about_subnormal_weights(subnormal_model: Path) -> None:
    expected = "the params hold 40 subnormal float(s) (p0: 40)"
    cost = "1.3 ms against 0.87 ms"
    shown = tvmrt("inspect", subnormal_model)
    assert shown.returncode == 0, shown.stdout  # it runs: slow, not broken
    assert expected in shown.stdout
    assert cost in shown.stdout
    report = json.loads(tvmrt("inspect", subnormal_model, "--json").stdout)
    assert report["params"]["subnormals"] == 40
    timed = tvmrt("bench", subnormal_model, "--warmup", "0", "--repeat", "1")
    assert timed.returncode == 0, timed.stderr
    assert expected in timed.stderr
    assert cost in timed.stderr
    clean = tvmrt("bench", DIGITS / "model", "--warmup", "0", "--repeat", "1")
    assert clean.returncode == 0, clean.stderr
    assert "subnormal" not in clean.stderr
    assert "subnormal" not in tvmrt("inspect", DIGITS / "model").stdout
