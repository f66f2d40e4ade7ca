"""Rebuild the committed example artifact ``examples/digits/model/`` from scratch.

Trains the digits MLP (``train.py``), compiles it with today's TVM for any x86-64 machine
(``--target x86-64``: no AVX, so every 64-bit PC runs it) and keeps the held-out digits
beside it, so ``make demo`` can run, bench, profile and inspect a real compiled artifact
with nothing but numpy and tvmrt. Needs the ``demo`` extra (``pip install -e '.[demo]'``
from a checkout: today's TVM, onnx and scikit-learn).

    python examples/digits/build.py [OUT_DIR]     # default: examples/digits/model
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET = "x86-64"
KEEP = ("deploy.json", "deploy.so", "deploy.params", "standalone.so")


def build(out: Path) -> None:
    """Train, compile and copy what the demo needs into ``out``."""
    with tempfile.TemporaryDirectory(prefix="tvmrt_digits_") as tmp:
        work = Path(tmp)
        subprocess.run([sys.executable, str(HERE / "train.py"), str(work)], check=True)
        compiled = work / "compiled"
        onnx_model = str(work / "digits.onnx")
        command = [sys.executable, "-m", "tvmrt", "compile", onnx_model, "-o", str(compiled)]
        subprocess.run([*command, "--target", TARGET], check=True)
        out.mkdir(parents=True, exist_ok=True)
        for name in KEEP:
            shutil.copyfile(compiled / name, out / name)
        shutil.copyfile(work / "heldout.npz", out / "heldout.npz")
    print(f"wrote {out}: {', '.join(KEEP)}, heldout.npz")


if __name__ == "__main__":
    build(Path(sys.argv[1] if len(sys.argv) > 1 else HERE / "model"))
