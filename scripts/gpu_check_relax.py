"""``make gpu-check``'s Relax lines: TVM 0.27's Relax CUDA models on the GPU, against the
outputs of their CPU builds (the pack's ``fixtures/relax/<model>``: model.so, case.json, the
runs' inputs and goldens).

``cuda_mlp_ptx`` holds PTX nvcc made; ``cuda_mlp`` CUDA C source, which the C runtime
compiles with NVRTC for this GPU (found through TVMRT_LIBNVRTC, or libnvrtc on the library
path): without NVRTC that line says so and does not fail the check.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from gpu_check_faces import TOLERANCE, max_err

from tvmrt import relax, runtime
from tvmrt.error import TVMError

MODELS = (("cuda_mlp_ptx", "MLP, dynamic batch, PTX"), ("cuda_mlp", "MLP, CUDA C via NVRTC"))


def _check_model(folder: Path, note: str) -> bool:
    case = json.loads((folder / "case.json").read_text())
    try:
        vm = relax.VirtualMachine(runtime.load_module(str(folder / "model.so")), runtime.cuda())
    except TVMError as exc:
        if "needs NVRTC" in str(exc):
            print(f"  {folder.name + ' (Relax)':24s} {note:34s} skipped: {exc}")
            return True
        print(f"  {folder.name + ' (Relax)':24s} FAILED: {type(exc).__name__}: {exc}")
        return False
    worst = 0.0
    for run in case["runs"]:
        inputs = np.load(folder / run["inputs"])
        golden = np.load(folder / run["golden"])["out0"]
        args = [runtime.array(inputs[f"arg{i}"], runtime.cuda()) for i in range(len(inputs.files))]
        got = vm["main"](*args).numpy()
        worst = max(worst, max_err(got, golden))
    status = "ok" if worst <= TOLERANCE else "WRONG"
    batches = ", ".join(str(np.load(folder / r["inputs"])["arg0"].shape[0]) for r in case["runs"])
    print(f"  {folder.name + ' (Relax)':24s} {note:34s} batches {batches}: max err {worst:.3g} "
          f"{status}")  # fmt: skip
    return worst <= TOLERANCE


def check_relax(folder: Path) -> bool:
    """Every packed Relax CUDA model runs on cuda(0) within TOLERANCE of its CPU golden."""
    root = folder / "relax"
    if not root.is_dir():
        print("  Relax: no models in the pack (make gpu-check-pack builds them)")
        return True
    ok = True
    for name, note in MODELS:
        if (root / name / "model.so").exists():
            ok &= _check_model(root / name, note)
    return ok
