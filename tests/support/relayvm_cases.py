"""The six Relay VM executables of ../shared/artifacts/relayvm and their golden runs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

CASES = ("adt-closure", "cnn-static", "control-flow", "dyn-batch-mlp", "dyn-shape-op", "tuple-io")


@dataclass
class GoldenRun:
    """One run of a case: ``main``'s inputs (tuples for tuple params) and TVM's outputs."""

    case: str
    name: str
    inputs: dict[str, object]
    outputs: list[np.ndarray]


def golden_runs(folder: Path, params: list[str]) -> list[GoldenRun]:
    """Every run in ``folder/golden.npz`` for ``main``'s ``params`` (README's key rules)."""
    with np.load(folder / "golden.npz") as g:
        data = {k: g[k] for k in g.files}
    runs = sorted({k.split("__", 1)[1] for k in data if "__" in k}) or [""]
    out = []
    for run in runs:
        suffix = f"__{run}" if run else ""
        inputs: dict[str, object] = {}
        for p in params:
            if p + suffix in data:
                inputs[p] = data[p + suffix]
            else:
                parts = []
                while f"{p}.{len(parts)}{suffix}" in data:
                    parts.append(data[f"{p}.{len(parts)}{suffix}"])
                assert parts, f"golden.npz of {folder.name} has no input {p}"
                inputs[p] = tuple(parts)
        outputs = []
        while f"output_{len(outputs)}{suffix}" in data:
            outputs.append(data[f"output_{len(outputs)}{suffix}"])
        out.append(GoldenRun(folder.name, run or "one", inputs, outputs))
    return out


def same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    """Shapes, dtypes and every bit equal."""
    return (
        got.shape == want.shape
        and got.dtype == want.dtype
        and got.tobytes() == np.ascontiguousarray(want).tobytes()
    )
