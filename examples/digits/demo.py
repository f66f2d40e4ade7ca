"""The tvmrt demo: a digits classifier from training to a profiled graph-executor artifact.

1. ``train.py`` trains an MLP on scikit-learn's bundled digits and exports ONNX;
2. ``tvmrt compile`` turns it into deploy.json + deploy.so + deploy.params with today's TVM;
3. ``tvmrt run`` classifies the held-out digits (no TVM needed for this step);
4. the accuracy is computed from the saved outputs, then ``tvmrt bench`` and
   ``tvmrt profile`` show latency and the per-node profile.

Every step is a command you can run yourself; the demo prints each one first.

    python examples/digits/demo.py [BUILD_DIR]
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def sh(*args: str) -> None:
    """Print a command like a shell would show it, then run it; stop on failure."""
    shown = " ".join(shlex.quote(a) for a in args).replace(f"{sys.executable} -m tvmrt", "tvmrt")
    print(f"\n$ {shown}", flush=True)
    subprocess.run(list(args), check=True)


def main() -> int:
    """Run every step."""
    build = Path(sys.argv[1] if len(sys.argv) > 1 else "build/digits")
    tvmrt = [sys.executable, "-m", "tvmrt"]
    print(f"$ {sys.executable} {HERE / 'train.py'} {build}", flush=True)
    subprocess.run([sys.executable, str(HERE / "train.py"), str(build)], check=True)

    held_out = np.load(build / "heldout.npz")
    images = build / "images.npz"
    np.savez(images, image=held_out["image"])
    compiled = build / "compiled"
    outputs = build / "predictions.npz"

    sh(*tvmrt, "compile", str(build / "digits.onnx"), "-o", str(compiled))
    sh(*tvmrt, "run", str(compiled), "-i", str(images), "-o", str(outputs), "--top-k", "0")
    with np.load(outputs) as saved:
        probabilities = saved[saved.files[0]]
    predicted = probabilities.argmax(axis=1)
    accuracy = float((predicted == held_out["label"]).mean())
    print(
        f"\naccuracy on {len(predicted)} held-out digits: {accuracy:.4f} "
        f"({int((predicted == held_out['label']).sum())} correct)"
    )
    sh(*tvmrt, "bench", str(compiled), "-i", str(images), "--repeat", "200")
    sh(*tvmrt, "profile", str(compiled), "-i", str(images))
    if accuracy < 0.9:
        print(f"accuracy {accuracy:.4f} is lower than expected (> 0.9)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
