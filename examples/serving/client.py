"""Query a running ``tvmrt serve`` with NVIDIA's tritonclient and check its answers.

    pip install -e '.[serve]' tritonclient[http]          # from a checkout
    tvmrt serve examples/digits/model --name digits --port 8000 &
    python examples/serving/client.py                   # or: client.py MODEL_DIR NAME URL

The model is the walkthrough's (``examples/digits/model``: 360 held-out 8x8 digits in
``heldout.npz``). The served probabilities must equal a local run of the same folder, and
classify the held-out digits as their labels say.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import tritonclient.http as httpclient

from tvmrt import runtime
from tvmrt.contrib import graph_executor


def local_run(folder: Path, images: np.ndarray) -> np.ndarray:
    """The same model run in this process: the reference for the served answer."""
    lib = runtime.load_module(str(folder / "deploy.so"))
    module = graph_executor.create((folder / "deploy.json").read_text(), lib, runtime.cpu())
    module.load_params((folder / "deploy.params").read_bytes())
    module.run(image=images)
    return module.get_output(0).numpy()


def main() -> None:
    """One inference with the binary-tensor extension, checked two ways."""
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "examples/digits/model")
    name = sys.argv[2] if len(sys.argv) > 2 else "digits"
    url = sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1:8000"
    held_out = np.load(folder / "heldout.npz")
    client = httpclient.InferenceServerClient(url)
    output = client.get_model_metadata(name)["outputs"][0]["name"]  # probabilities_0
    tensor = httpclient.InferInput("image", list(held_out["image"].shape), "FP32")
    tensor.set_data_from_numpy(held_out["image"], binary_data=True)
    result = client.infer(name, [tensor], outputs=[httpclient.InferRequestedOutput(output)])
    served = result.as_numpy(output)
    np.testing.assert_array_equal(served, local_run(folder, held_out["image"]))
    accuracy = float((served.argmax(axis=1) == held_out["label"]).mean())
    print(f"{output}: {served.shape}, equal to a local run; accuracy {accuracy:.3f}")
    if accuracy < 0.95:
        sys.exit(f"accuracy {accuracy:.3f} on the held-out digits, expected > 0.95")


if __name__ == "__main__":
    main()
