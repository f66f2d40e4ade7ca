"""``tvmrt serve`` of Relax VM executables: a real server process, KServe v2 requests.

One ``tvmrt serve`` process serves TVM 0.27's ``mlp_dyn`` (x: (n, 16), the weights main's
parameters too), ``tuple_out`` (a nested tuple result with a shape in it) and ``cnn`` (static
inputs, outputs known only once it ran). The answers equal TVM's own VM's bitwise, at two
batch sizes for the MLP; metadata and the Triton config report -1 for the dynamic batch and
the outputs once the model has answered.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np
import pytest

from support import relax_cases as rc
from support.relayvm_cases import same_bits
from support.serve import Served, post_json, tvmrt_serve
from tvmrt.serve.protocol import DATATYPES

pytest.importorskip("uvicorn")

MODELS = {"mlp": "mlp_dyn", "tup": "tuple_out", "cnn": "cnn"}
_NUMPY = {str(dtype): name for name, dtype in DATATYPES.items()}


@pytest.fixture(scope="module")
def served(artifacts) -> Iterator[Served]:
    args = [str(rc.folder(artifacts, "027", model) / "model.so") for model in MODELS.values()]
    for name in MODELS:
        args += ["--name", name]
    with tvmrt_serve(*args, "--workers", "2") as srv:
        yield srv


def _get(srv: Served, path: str) -> dict:
    status, _, body = srv.request("GET", path)
    assert status == 200, body
    return json.loads(body)  # type: ignore[no-any-return]


def _infer(srv: Served, name: str, inputs: dict[str, np.ndarray]) -> tuple[int, dict]:
    doc = {
        "inputs": [
            {
                "name": key,
                "shape": list(arr.shape),
                "datatype": _NUMPY[str(arr.dtype.newbyteorder("<"))],
                "data": arr.ravel().tolist(),
            }
            for key, arr in inputs.items()
        ]
    }
    url = f"http://127.0.0.1:{srv.port}"
    status, _, answer = post_json(url, f"/v2/models/{name}/infer", doc)
    return status, answer


def _outputs(answer: dict) -> dict[str, np.ndarray]:
    return {
        out["name"]: np.asarray(out["data"], DATATYPES[out["datatype"]]).reshape(out["shape"])
        for out in answer["outputs"]
    }


def test_mlp_at_two_batch_sizes_equals_tvm_and_metadata_says_minus_one(served, artifacts):
    meta = _get(served, "/v2/models/mlp")
    assert meta["platform"] == "tvmrt_relax_vm"
    assert meta["inputs"] == [
        {"name": "x", "datatype": "FP32", "shape": [-1, 16]},
        {"name": "fc1_weight", "datatype": "FP32", "shape": [32, 16]},
        {"name": "fc1_bias", "datatype": "FP32", "shape": [32]},
        {"name": "fc2_weight", "datatype": "FP32", "shape": [10, 32]},
        {"name": "fc2_bias", "datatype": "FP32", "shape": [10]},
    ]
    config = _get(served, "/v2/models/mlp/config")
    assert config["platform"] == "tvmrt_relax_vm"
    assert config["max_batch_size"] == 0
    assert config["input"][0]["dims"] == [-1, 16]
    assert config["instance_group"][0]["kind"] == "KIND_CPU"
    assert config["instance_group"][0]["count"] == 2
    runs = rc.runs(rc.folder(artifacts, "027", "mlp_dyn"))
    batches = sorted({run.inputs["x"].shape[0] for run in runs})
    assert len(batches) == 2, batches  # the golden runs are at two batch sizes
    for run in runs:
        status, answer = _infer(served, "mlp", run.inputs)
        assert status == 200, answer
        got = _outputs(answer)
        assert list(got) == ["output_0"]
        assert same_bits(got["output_0"], run.outputs["output_0"]), run.name
    meta = _get(served, "/v2/models/mlp")
    assert meta["outputs"] == [{"name": "output_0", "datatype": "FP32", "shape": [-1, -1]}]
    assert _get(served, "/v2/models/mlp/config")["output"][0]["dims"] == [-1, -1]


def test_a_shape_that_does_not_fit_is_a_400_naming_the_input(served, artifacts):
    (run, *_) = rc.runs(rc.folder(artifacts, "027", "mlp_dyn"))
    status, answer = _infer(served, "mlp", {**run.inputs, "x": np.zeros((2, 15), "float32")})
    assert status == 400, answer
    assert "input 'x' has shape [2, 15], expected [N, 16]" in answer["error"]


def test_tuple_result_flattened_with_its_shape(served, artifacts):
    assert _get(served, "/v2/models/tup")["outputs"] == []  # known once it has answered
    (run,) = rc.runs(rc.folder(artifacts, "027", "tuple_out"))
    status, answer = _infer(served, "tup", run.inputs)
    assert status == 200, answer
    got = _outputs(answer)
    assert list(got) == ["output_0", "output_1", "output_2", "output_3"]
    for name, want in run.outputs.items():
        assert same_bits(got[name], want), name
    assert answer["outputs"][3]["datatype"] == "INT64"  # the result's shape (2, 3)
    outputs = _get(served, "/v2/models/tup")["outputs"]
    assert [o["datatype"] for o in outputs] == ["FP32", "FP32", "FP32", "INT64"]


def test_static_inputs_answer_with_their_outputs(served, artifacts):
    meta = _get(served, "/v2/models/cnn")
    assert meta["inputs"] == [{"name": "data", "datatype": "FP32", "shape": [1, 3, 16, 16]}]
    (run,) = rc.runs(rc.folder(artifacts, "027", "cnn"))
    status, answer = _infer(served, "cnn", run.inputs)
    assert status == 200, answer
    assert same_bits(_outputs(answer)["output_0"], run.outputs["output_0"])


def test_a_compiled_mode_build_needs_its_input_types_and_then_answers_as_tvm(artifacts) -> None:
    # a compiled-mode executable records no parameter types: its metadata published
    # "datatype": "" (Triton's config "TYPE_"); it is refused without --input, naming them
    from support.cli import tvmrt

    model = rc.folder(artifacts, "027", "compiled")
    refused = tvmrt("serve", model / "model.so", "--port", "0", timeout=120)
    assert refused.returncode == 2, refused.stderr
    assert "records no type for some inputs" in refused.stderr, refused.stderr
    assert "--input x:DTYPE:DIMS --input fc1_weight:DTYPE:DIMS" in refused.stderr
    with np.load(model / "run0_inputs.npz") as npz:
        given = [npz[f"arg{i}"] for i in range(5)]
    with np.load(model / "run0_golden.npz") as npz:
        want = npz["out0"]
    names = ["x", "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"]
    flags = []
    for name, arr in zip(names, given, strict=True):
        dims = ",".join(["-1", *map(str, arr.shape[1:])] if name == "x" else map(str, arr.shape))
        flags += ["--input", f"{name}:float32:{dims}"]
    with tvmrt_serve(str(model / "model.so"), "--name", "c", *flags) as srv:
        meta = _get(srv, "/v2/models/c")
        assert meta["inputs"][0] == {"name": "x", "datatype": "FP32", "shape": [-1, 16]}
        config = _get(srv, "/v2/models/c/config")
        assert {t["data_type"] for t in config["input"]} == {"TYPE_FP32"}
        assert config["platform"] == "tvmrt_relax_vm"
        status, answer = _infer(srv, "c", dict(zip(names, given, strict=True)))
        assert status == 200, answer
        (out,) = answer["outputs"]
        got = np.asarray(out["data"], np.float32).reshape(out["shape"])
        assert same_bits(got, want)
