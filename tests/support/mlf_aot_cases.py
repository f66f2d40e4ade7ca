"""The MLF AOT fixture cases (tests/mlf_aot/build_mlf_aot_fixtures.py makes each as tar and folder)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from support.built import built
from support.paths import REPO

__all__ = ["CASES", "fixture_root", "golden", "package_path", "same_bits"]

CASES = [
    f"{model}_{api}_{params}"
    for model in ("float", "int8")
    for api in ("c", "packed")
    for params in ("linked", "separate")
]


def fixture_root() -> Path:
    """The built fixtures (tests/mlf_aot/build_mlf_aot_fixtures.py, built now if missing)."""
    return built(REPO / "tests" / "mlf_aot" / "build_mlf_aot_fixtures.py", "mlf_aot")


def package_path(root: Path, case: str, packed_as: str) -> Path:
    """The tar or the unpacked folder of ``case``."""
    model = case.split("_")[0]
    return root / model / (f"{case}.tar" if packed_as == "tar" else case)


def golden(root: Path, case: str) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    """TVM's inputs and outputs (host-driven AOT of the same model in TVM 0.16)."""
    data = np.load(root / case.split("_")[0] / "golden.npz")
    inputs = {k[3:]: data[k] for k in data.files if k.startswith("in_")}
    outputs = [data[f"out_{i}"] for i in range(sum(k.startswith("out_") for k in data.files))]
    return inputs, outputs


def same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    """Bitwise equal: same dtype, same element count, same bytes (shapes may be flat)."""
    return got.dtype == want.dtype and got.size == want.size and got.tobytes() == want.tobytes()
