"""Serve an artifact on a Ray cluster with N replicas (Ray Serve), then query it.

    ray start --head --node-ip-address 127.0.0.1 --num-cpus 2 --include-dashboard false
    PYTHONPATH=src python examples/serving/ray_serve.py examples/digits/model
    ray stop

Each replica is ``tvmrt.serve.ray.TvmrtDeployment``: the same model class and request
handler as ``tvmrt serve``, so the Open Inference Protocol clients work unchanged against
Ray's HTTP proxy.
"""

from __future__ import annotations

import sys

import numpy as np
import ray
import tritonclient.http as httpclient
from ray import serve

from tvmrt.serve.ray import deployment


def main() -> None:
    """Deploy two replicas of the artifact named on the command line and run one request."""
    artifact = sys.argv[1]
    ray.init(address="auto")  # the running cluster
    serve.start(http_options={"host": "127.0.0.1", "port": 8000})
    app = deployment(num_replicas=2, num_cpus=0.5).bind({"model": artifact}, workers=1)
    serve.run(app, name="tvmrt", route_prefix="/")
    client = httpclient.InferenceServerClient("127.0.0.1:8000")
    meta = client.get_model_metadata("model")
    inputs = []
    for spec in meta["inputs"]:
        tensor = httpclient.InferInput(spec["name"], spec["shape"], spec["datatype"])
        tensor.set_data_from_numpy(np.zeros(spec["shape"], "float32"))
        inputs.append(tensor)
    result = client.infer("model", inputs)
    for spec in meta["outputs"]:
        print(spec["name"], result.as_numpy(spec["name"]).shape)
    serve.shutdown()


if __name__ == "__main__":
    main()
