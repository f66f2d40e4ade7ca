"""``GET /v2/models/{name}/config``: the model's configuration as Triton answers it.

Triton clients (``tritonclient``'s ``get_model_config``, perf_analyzer, model navigators)
read Triton's model configuration (``model_config.proto``, in its JSON form): the inputs and
outputs with ``TYPE_*`` data types and their dims, ``max_batch_size`` (0: no batching, dims
are the full shape; > 0: dims leave out the batch dimension), the instance groups and, when
requests are batched, ``dynamic_batching``. tvmrt answers with its model's real values: one
instance per worker executor, on the device the executors run on.
"""

from __future__ import annotations

from typing import Any

from tvmrt.runtime.device_type import RPC_SESS_MASK
from tvmrt.serve.model import ServedModel
from tvmrt.serve.protocol import TensorSpec

__all__ = ["model_config"]

# KServe v2 datatypes -> Triton's DataType enum names (BYTES is Triton's TYPE_STRING); every
# served input has a datatype (tvmrt.serve.dynamic refuses a model that leaves one unknown)
_SPECIAL = {"BYTES": "TYPE_STRING"}


def _tensor(spec: TensorSpec, batched: bool) -> dict[str, Any]:
    dims = list(spec.shape[1:] if batched else spec.shape)
    return {
        "name": spec.name,
        "data_type": _SPECIAL.get(spec.datatype, f"TYPE_{spec.datatype}"),
        "format": "FORMAT_NONE",
        "dims": dims,
        "reshape": None,
        "is_shape_tensor": False,
        "allow_ragged_batch": False,
        "optional": False,
    }


def model_config(model: ServedModel) -> dict[str, Any]:
    """Triton's model configuration JSON for ``model``."""
    batched = model.batch > 0
    device = model.device
    if device is None and model.outputs and not model.dynamic:
        device = model.executors[0].get_output(0).device
    on_cpu = device is None or device.device_type % RPC_SESS_MASK == 1  # a server's CPU too
    group: dict[str, Any] = {
        "name": f"{model.name}_0",
        "kind": "KIND_CPU" if on_cpu else "KIND_GPU",
        "count": model.workers,
        "gpus": [] if on_cpu or device is None else [device.device_id],
    }
    config: dict[str, Any] = {
        "name": model.name,
        "platform": model.platform,
        "backend": "tvmrt",
        "version_policy": {"latest": {"num_versions": 1}},
        "max_batch_size": model.batch,
        "input": [_tensor(s, batched) for s in model.inputs],
        "output": [_tensor(s, batched) for s in model.outputs],
        "instance_group": [group],
    }
    if batched:
        config["dynamic_batching"] = {
            "preferred_batch_size": [model.batch],
            "max_queue_delay_microseconds": round(model.batch_delay * 1e6),
        }
    return config
