"""Zero the subnormal weights of the committed digits models, in place, byte for byte.

The committed ``model/`` was trained before ``train.py`` flushed its weights: 228 of the
first layer's float32 weights were subnormal (below ``numpy.finfo("float32").tiny``, not
zero), and x86 CPUs compute with those slowly (``tvmrt bench`` 1.3 ms against 0.87 ms,
``bench/subnormal_params.py``). Rebuilding with ``build.py`` (the demo extra: TVM, onnx,
scikit-learn) now gives weights without them; this script gives the committed files the
same fix without a rebuild: each weight array's bytes are found in each file that holds
them (``deploy.params``, ``standalone.so``, TVM 0.16's ``deploy_param.params``) and
rewritten with the subnormals zeroed, so nothing else in the files changes. The outputs
on the held-out digits stayed bit for bit the same (``tvmrt run -i model/heldout.npz
--compare`` against a run saved before). ``--check`` counts what is left (0 now).

    python examples/digits/flush_subnormals.py [--check]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from tvmrt.runtime.params import load_param_dict_from_file

HERE = Path(__file__).resolve().parent
MODEL = HERE / "model"
LEGACY = HERE / "tvm016"


def flushed(arr: np.ndarray) -> np.ndarray:
    """``arr`` with every subnormal set to zero."""
    return np.where(np.abs(arr) < np.finfo(arr.dtype).tiny, np.zeros_like(arr), arr)


def patch(path: Path, arrays: list[np.ndarray]) -> int:
    """Rewrite each array's bytes in ``path`` flushed; returns how many values changed."""
    data = bytearray(path.read_bytes())
    changed = 0
    for arr in arrays:
        new = flushed(arr)
        count = int(np.count_nonzero(new != arr))
        if not count:
            continue
        raw = arr.tobytes()
        if data.count(raw) != 1:
            raise SystemExit(f"{path}: a weight array's bytes occur {data.count(raw)} times")
        start = data.find(raw)
        data[start : start + len(raw)] = new.tobytes()
        changed += count
    path.write_bytes(data)
    return changed


def weights(path: Path) -> list[np.ndarray]:
    return [arr.numpy() for arr in load_param_dict_from_file(str(path)).values()]


def main(check: bool) -> int:
    model = weights(MODEL / "deploy.params")
    legacy = weights(LEGACY / "deploy_param.params")
    left = sum(int(np.count_nonzero(flushed(a) != a)) for a in model + legacy)
    if check:
        print(f"{left} subnormal weight(s) in the committed digits models")
        return 1 if left else 0
    for path, arrays in (
        (MODEL / "deploy.params", model),
        (MODEL / "standalone.so", model),
        (LEGACY / "deploy_param.params", legacy),
    ):
        print(f"{path.relative_to(HERE)}: {patch(path, arrays)} subnormal value(s) zeroed")
    return 0


if __name__ == "__main__":
    sys.exit(main("--check" in sys.argv[1:]))
