"""The tvmrt demo: inspect, run, bench and profile a real compiled artifact with numpy alone.

The artifact is a digits classifier (an MLP trained on scikit-learn's bundled 8x8 digits)
compiled by today's TVM into a graph JSON, a kernel library and a params blob; the
repository carries it in ``examples/digits/model/`` with 360 held-out digits
(``build.py`` rebuilds it; ``make demo-compile`` does that, then runs this demo on the
result). The demo:

1. ``tvmrt inspect`` reads the artifact without running any of it;
2. ``tvmrt run`` classifies the held-out digits, and the accuracy is computed from the
   saved outputs;
3. ``tvmrt bench`` measures latency, ``tvmrt profile`` times every kernel and writes an
   HTML report;
4. ``tvmrt run`` runs the same model as TVM 0.16 built it (``examples/digits/tvm016/``:
   the legacy kernel ABI and TVM's tutorial file names), and the demo checks that both
   builds classify every digit alike.

Every step is a command you can run yourself; the demo prints each one first.

    python examples/digits/demo.py [ARTIFACT_DIR] [OUT_DIR]
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
    model = Path(sys.argv[1] if len(sys.argv) > 1 else HERE / "model")
    out = Path(sys.argv[2] if len(sys.argv) > 2 else "build/digits")
    out.mkdir(parents=True, exist_ok=True)
    tvmrt = [sys.executable, "-m", "tvmrt"]
    held_out = np.load(model / "heldout.npz")
    images = out / "images.npz"
    np.savez(images, image=held_out["image"])
    outputs = out / "predictions.npz"

    sh(*tvmrt, "inspect", str(model))
    sh(*tvmrt, "run", str(model), "-i", str(images), "-o", str(outputs), "--top-k", "0")
    with np.load(outputs) as saved:
        probabilities = saved[saved.files[0]]
    predicted = probabilities.argmax(axis=1)
    correct = int((predicted == held_out["label"]).sum())
    accuracy = correct / len(predicted)
    print(f"\naccuracy on {len(predicted)} held-out digits: {accuracy:.4f} ({correct} correct)")
    sh(*tvmrt, "bench", str(model), "-i", str(images), "--repeat", "200")
    html = out / "profile.html"
    sh(*tvmrt, "profile", str(model), "-i", str(images), "--html", str(html))
    legacy = HERE / "tvm016"
    legacy_outputs = out / "predictions_tvm016.npz"
    sh(*tvmrt, "run", str(legacy), "-i", str(images), "-o", str(legacy_outputs), "--top-k", "0")
    with np.load(legacy_outputs) as saved:
        legacy_predicted = saved[saved.files[0]].argmax(axis=1)
    same = int((legacy_predicted == predicted).sum())
    print(f"\nTVM 0.16's build and today's agree on {same} of {len(predicted)} digits")
    if same != len(predicted):
        print("the two builds of one model disagree", file=sys.stderr)
        return 1
    if accuracy < 0.9:
        print(f"accuracy {accuracy:.4f} is lower than expected (> 0.9)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
