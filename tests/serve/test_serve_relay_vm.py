"""tvmrt serve with a Relay VM model: request-given shapes, -1 in metadata, hostile shapes.

``relayvm/dyn-batch-mlp`` (x: (?, 16) float32 -> (?, 10)) is served in this process; its
answers at batch 1 and 3 equal TVM's golden bitwise, and at batch 64 tvmrt's own VM run of
the same input (no golden has that batch). One test drives a real ``tvmrt serve`` process
with ``--input`` through tritonclient.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from support.relayvm_cases import same_bits
from support.serve import post_json, tvmrt_serve
from tvmrt.artifact import find_artifact, load_artifact
from tvmrt.serve import BackgroundServer, InferenceApp, load_model
from tvmrt.serve.dynamic import parse_signature
from tvmrt.serve.protocol import BadRequestError, TensorSpec

pytest.importorskip("uvicorn")

CASE = ("relayvm", "dyn-batch-mlp")


def _post(server: BackgroundServer, doc: dict[str, object]) -> tuple[int, dict[str, object]]:
    status, _, answer = post_json(server.url, "/v2/models/mlp/infer", doc)
    return status, answer


def _get(server: BackgroundServer, path: str) -> dict[str, object]:
    import http.client

    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    try:
        conn.request("GET", path)
        return json.loads(conn.getresponse().read())  # type: ignore[no-any-return]
    finally:
        conn.close()


def _x(arr: np.ndarray, datatype: str = "FP32") -> dict[str, object]:
    return {
        "inputs": [
            {
                "name": "x",
                "shape": list(arr.shape),
                "datatype": datatype,
                "data": arr.ravel().tolist(),
            }
        ]
    }


@pytest.fixture(scope="module")
def folder(artifacts: Path) -> Path:
    return artifacts.joinpath(*CASE)


def test_batches_1_3_64_equal_golden_and_own_vm(folder):
    with np.load(folder / "golden.npz") as npz:
        golden = dict(npz)
    specs = [parse_signature("x:float32:-1,16")]
    model = load_model("mlp", find_artifact(folder), workers=2, signature=specs)
    assert model.dynamic
    big = np.random.RandomState(5).standard_normal((64, 16)).astype("float32")
    reference = load_artifact(find_artifact(folder)).executor
    reference.set_input("x", big)
    reference.run()
    expected64 = reference.get_output(0).numpy()
    with BackgroundServer(InferenceApp([model])) as server:
        meta = _get(server, "/v2/models/mlp")
        assert meta["platform"] == "tvmrt_relay_vm"
        assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 16]}]
        assert meta["outputs"] == []
        for x, want in [
            (golden["x__batch1"], golden["output_0__batch1"]),
            (golden["x__batch3"], golden["output_0__batch3"]),
            (big, expected64),
        ]:
            status, doc = _post(server, _x(x))
            assert status == 200, doc
            (out,) = doc["outputs"]  # type: ignore[misc]
            assert out["name"] == "output_0"
            assert out["datatype"] == "FP32"
            assert out["shape"] == list(want.shape)
            got = np.asarray(out["data"], np.float32).reshape(out["shape"])
            assert np.array_equal(got, want)
        meta = _get(server, "/v2/models/mlp")
        # after an answer: every size of the output dynamic
        assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 16]}]
        assert meta["outputs"] == [{"name": "output_0", "datatype": "FP32", "shape": [-1, -1]}]
    model.close()


def test_hostile_shapes_are_refused_with_the_input_named(folder):
    model = load_model("mlp", find_artifact(folder), signature=[TensorSpec("x", (-1, 16), "FP32")])
    app = InferenceApp([model], max_body_bytes=1 << 20)
    with BackgroundServer(app) as server:
        bad = [
            (_x(np.zeros((2, 16, 1), "float32")), 400, "expected [N, 16]"),
            (_x(np.zeros((2, 15), "float32")), 400, "expected [N, 16]"),
            (_x(np.zeros((3, 4), "float32")), 400, "expected [N, 16]"),
            (_x(np.zeros((2, 16), "float64"), "FP64"), 400, "expected 'FP32'"),
            (
                {"inputs": [{"name": "x", "shape": [10**12, 16], "datatype": "FP32", "data": []}]},
                413,
                "would take more than the 1048576 bytes",
            ),
            (
                {"inputs": [{"name": "x", "shape": [0, 2**62], "datatype": "FP32", "data": []}]},
                400,
                "expected [N, 16]",
            ),
        ]
        for doc, status, message in bad:
            got, answer = _post(server, doc)
            assert got == status, answer
            assert "'x'" in str(answer["error"]), answer
            assert message in str(answer["error"]), answer
        status, doc = _post(server, _x(np.zeros((0, 16), "float32")))  # an empty batch is fine
        assert status == 200
        assert doc["outputs"][0]["shape"] == [0, 10]  # type: ignore[index]
    model.close()


def test_without_a_signature_the_model_is_refused_at_load(folder):
    # the executable records no input types and its dense kernel reads 16 values per row of
    # whatever it gets: TVM 0.16's own VM answers a (3, 4) input with a (3, 10) result read
    # past the buffer, so a server cannot answer without knowing the sizes
    with pytest.raises(ValueError, match=r"records no input types.*input\(s\) \['x'\]"):
        load_model("mlp", find_artifact(folder))
    proc = subprocess.run(
        [sys.executable, "-m", "tvmrt", "serve", str(folder), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "--input x:DTYPE:DIMS (e.g. x:float32:-1,16" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_free_inner_size_is_served_with_a_warning(folder, caplog):
    with caplog.at_level(logging.WARNING, logger="tvmrt.serve"):
        model = load_model(
            "mlp", find_artifact(folder), signature=[parse_signature("x:float32:-1,-1")]
        )
    model.close()
    (record,) = [r for r in caplog.records if r.name == "tvmrt.serve"]
    assert "input 'x' leaves dimension(s) [1] of [-1, -1] free" in record.getMessage()
    assert "--input x:float32:-1,SIZE" in record.getMessage()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tvmrt.serve"):  # a free batch is expected
        load_model(
            "mlp", find_artifact(folder), signature=[parse_signature("x:float32:-1,16")]
        ).close()
    assert not [r for r in caplog.records if r.name == "tvmrt.serve"]


def test_batch_delay_is_refused_for_dynamic_models(folder):
    with pytest.raises(ValueError, match="dynamic inputs"):
        load_model(
            "mlp",
            find_artifact(folder),
            batch_delay=0.01,
            signature=[parse_signature("x:float32:-1,16")],
        )


def test_tritonclient_against_tvmrt_serve_process(folder, request):
    httpclient = pytest.importorskip("tritonclient.http")
    with np.load(folder / "golden.npz") as npz:
        golden = dict(npz)
    with tvmrt_serve(str(folder / "vm.so"), "--name", "mlp", "--input", "x:float32:-1,16") as srv:
        client = httpclient.InferenceServerClient(f"127.0.0.1:{srv.port}")
        request.addfinalizer(client.close)
        meta = client.get_model_metadata("mlp")
        assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 16]}]
        for run in ("batch1", "batch3"):
            x = golden[f"x__{run}"]
            for binary in (True, False):
                inp = httpclient.InferInput("x", list(x.shape), "FP32")
                inp.set_data_from_numpy(x, binary_data=binary)
                out = httpclient.InferRequestedOutput("output_0", binary_data=binary)
                result = client.infer("mlp", [inp], outputs=[out])
                assert np.array_equal(result.as_numpy("output_0"), golden[f"output_0__{run}"])
        bad = httpclient.InferRequestedOutput("output_7")
        inp = httpclient.InferInput("x", [1, 16], "FP32")
        inp.set_data_from_numpy(golden["x__batch1"])
        with pytest.raises(Exception, match="unknown output"):
            client.infer("mlp", [inp], outputs=[bad])


@pytest.mark.parametrize(("case", "runs"), [("dyn-shape-op", ["mixed", "empty"])])
def test_data_dependent_and_empty_outputs_equal_golden(artifacts, case, runs):
    folder = artifacts / "relayvm" / case
    with np.load(folder / "golden.npz") as npz:
        golden = dict(npz)
    model = load_model("mlp", find_artifact(folder), signature=[parse_signature("x:float32:-1,-1")])
    with BackgroundServer(InferenceApp([model])) as server:
        for run in runs:
            status, doc = _post(server, _x(golden[f"x__{run}"]))
            assert status == 200, doc
            outs = doc["outputs"]
            assert [o["name"] for o in outs] == ["output_0", "output_1", "output_2"]  # type: ignore[union-attr]
            for i, out in enumerate(outs):  # type: ignore[arg-type]
                want = golden[f"output_{i}__{run}"]
                assert out["shape"] == list(want.shape)
                assert out["datatype"] == {"int32": "INT32", "float32": "FP32"}[str(want.dtype)]
                got = np.asarray(out["data"], want.dtype).reshape(out["shape"])
                assert same_bits(got, want), (run, i)
        meta = _get(server, "/v2/models/mlp")
        assert meta["outputs"] == [
            {"name": "output_0", "datatype": "INT32", "shape": [-1, -1]},
            {"name": "output_1", "datatype": "FP32", "shape": [-1]},
            {"name": "output_2", "datatype": "INT32", "shape": [-1]},
        ]
    model.close()


def test_a_tensor_for_a_tuple_input_is_a_bad_request_not_a_crash(artifacts):
    # tuple inputs are not served (docs/serving.md); the kernel's own check answers 400
    given = ["a:float32:-1,-1", "b:float32:-1,-1", "pair:float32:-1,-1", "k:int32:-1"]
    model = load_model(
        "tio",
        find_artifact(artifacts / "relayvm" / "tuple-io"),
        signature=[parse_signature(g) for g in given],
    )
    arrays = {n: np.zeros((2, 3), "float32") for n in ("a", "b", "pair")}
    arrays["k"] = np.zeros(3, "int32")
    with pytest.raises(BadRequestError, match="the inputs do not fit model 'tio'"):
        model.infer_sync(arrays)
    model.close()
