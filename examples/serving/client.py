"""Query a running ``tvmrt serve`` with NVIDIA's tritonclient and check the golden output.

tvmrt serve ../shared/artifacts/mobilenet_v1 --name mobilenet --port 8000 &
python examples/serving/client.py ../shared/artifacts/mobilenet_v1/golden.npz
"""

from __future__ import annotations

import sys

import numpy as np
import tritonclient.http as httpclient


def main() -> None:
    """One inference with the binary-tensor extension, compared with golden.npz."""
    golden = np.load(sys.argv[1])
    client = httpclient.InferenceServerClient("127.0.0.1:8000")
    tensor = httpclient.InferInput("data", list(golden["data"].shape), "FP32")
    tensor.set_data_from_numpy(golden["data"])
    result = client.infer("mobilenet", [tensor])
    out = result.as_numpy("fused_nn_softmax_0")  # the output's name in every tvmrt verb
    np.testing.assert_allclose(out, golden["output_0"], rtol=1e-6, atol=1e-7)
    print("top-5:", np.argsort(out[0])[::-1][:5], "matches golden")


if __name__ == "__main__":
    main()
