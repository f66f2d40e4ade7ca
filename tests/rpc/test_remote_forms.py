"""Every CPU form TVM runs remotely, on a local ``tvmrt rpc tracker`` + ``server``:
``tvmrt run/bench/profile --rpc-tracker ... --rpc-key ...`` through ``load_artifact`` on the
session's device, the outputs equal to TVM's own (golden.npz: bitwise on the CPU), and
``tvmrt serve`` of a model running on the server answering tritonclient.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from support.cli import tvmrt
from support.rpc_server import tvmrt_rpc
from support.serve import tvmrt_serve
from tvmrt import rpc
from tvmrt.artifact import find_artifact, load_artifact
from tvmrt.error import UnsupportedError

HOST = "127.0.0.1"
KEY = "board"
ATOL = {"rtol": 1e-6, "atol": 1e-7}

# form -> the artifact under the artifacts root (each folder holds TVM's golden.npz)
FORMS = {
    "folder": "mobilenet_v1",  # graph JSON + library + params
    "factory-so": "relay016/linkparams-so/deploy.so",
    "factory-tar": "iris-factory/deploy_lib.tar",  # linked by the server
    "systemlib-so": "relay016/systemlib-so/deploy.so",
    "systemlib-tar": "relay016/systemlib-tar/deploy.tar",
    "aot-so": "relay016/aot-so/deploy.so",
}


@pytest.fixture(scope="module")
def tracker() -> Iterator[int]:
    """A tvmrt tracker with one tvmrt server under :data:`KEY`; yields the tracker's port."""
    with (
        tvmrt_rpc("tracker") as (_, port),
        tvmrt_rpc("server", "--tracker", f"{HOST}:{port}", "--key", KEY),
    ):
        client = rpc.connect_tracker(HOST, port)
        deadline = time.monotonic() + 30
        while KEY not in client.summary()["queue_info"]:
            assert time.monotonic() < deadline, client.summary()
            time.sleep(0.1)
        client.close()
        yield port


def _flags(port: int) -> tuple[str, ...]:
    return ("--rpc-tracker", f"{HOST}:{port}", "--rpc-key", KEY)


def _case(artifacts: Path, form: str) -> tuple[Path, dict[str, np.ndarray]]:
    artifact = artifacts / FORMS[form]
    folder = artifact if artifact.is_dir() else artifact.parent
    with np.load(folder / "golden.npz") as data:
        # iris' golden holds 4 samples of a batch-1 model: the first is compared
        return artifact, {k: data[k][:1] if form == "factory-tar" else data[k] for k in data.files}


def _inputs(golden: dict[str, np.ndarray], tmp_path: Path) -> Path:
    given = tmp_path / "in.npz"
    np.savez(given, **{k: v for k, v in golden.items() if not k.startswith("output_")})
    return given


@pytest.mark.parametrize("form", list(FORMS))
def test_run_equals_golden(tracker: int, artifacts: Path, tmp_path: Path, form: str) -> None:
    artifact, golden = _case(artifacts, form)
    out = tmp_path / "out.npz"
    done = tvmrt("run", artifact, "-i", _inputs(golden, tmp_path), "-o", out, *_flags(tracker))
    assert done.returncode == 0, done.stderr
    with np.load(out) as outputs:
        (only,) = outputs.files
        np.testing.assert_allclose(outputs[only], golden["output_0"], **ATOL)


@pytest.mark.parametrize("form", list(FORMS))
def test_bench(tracker: int, artifacts: Path, form: str) -> None:
    artifact, _ = _case(artifacts, form)
    done = tvmrt("bench", artifact, "--warmup", "1", "--repeat", "2", *_flags(tracker))
    assert done.returncode == 0, done.stderr
    assert "2 x 1 run(s)" in done.stdout
    assert "median" in done.stdout


@pytest.mark.parametrize("form", [f for f in FORMS if f != "aot-so"])
def test_profile_times_every_node_on_the_server(tracker: int, artifacts: Path, form: str) -> None:
    artifact, _ = _case(artifacts, form)
    report = tvmrt("profile", artifact, "--number", "1", "--json", *_flags(tracker))
    assert report.returncode == 0, report.stderr
    calls = json.loads(report.stdout)["calls"]
    assert any("fused" in call["Name"]["string"] for call in calls)


def test_profile_of_an_aot_build_times_its_whole_run_on_the_server(
    tracker: int, artifacts: Path, tmp_path: Path
) -> None:
    # no graph: the AotModule face times the server's run as one call (the entry function)
    artifact, _ = _case(artifacts, "aot-so")
    entry = "tvmgen_default___tvm_main__"
    trace = tmp_path / "trace.json"
    done = tvmrt("profile", artifact, "--number", "1", "--trace", trace, *_flags(tracker))
    assert done.returncode == 0, done.stderr
    assert entry in done.stdout
    assert "Total_time" in done.stdout
    assert {e["name"] for e in json.loads(trace.read_text())["traceEvents"]} == {entry}
    report = tvmrt("profile", artifact, "--number", "1", "--json", *_flags(tracker))
    assert report.returncode == 0, report.stderr
    (call,) = json.loads(report.stdout)["calls"]
    assert call["Name"]["string"] == entry
    assert call["Device"]["string"].startswith("remote[")
    assert call["Device"]["string"].endswith(":cpu0")
    assert call["Argument Shapes"]["string"] == "float32[1, 3, 16, 16], float32[1, 10]"


def test_a_form_that_cannot_run_remotely_says_so_naming_it(tracker: int, artifacts: Path) -> None:
    files = find_artifact(artifacts / "relay016" / "mlf-graph" / "model_llvm.tar")
    with rpc.connect_tracker(HOST, tracker).request(KEY) as session:
        with pytest.raises(UnsupportedError, match="artifact form 'mlf'"):
            load_artifact(files, session.cpu())
        assert session.listdir(".") in ("", ".")  # refused before anything was sent


def test_load_artifact_on_a_session_device(tracker: int, artifacts: Path) -> None:
    artifact, golden = _case(artifacts, "systemlib-tar")
    with rpc.connect_tracker(HOST, tracker).request(KEY) as session:
        model = load_artifact(find_artifact(artifact), session.cpu())
        assert model.form == "factory"
        assert model.lib.type_key == "rpc"
        model.executor.set_input("data", golden["data"])
        model.executor.run()
        out = model.executor.get_output(0)
        assert out.device == session.cpu()
        np.testing.assert_allclose(out.numpy(), golden["output_0"], **ATOL)


@pytest.mark.parametrize("workers", [1, 2])
def test_serve_a_model_running_on_the_server(tracker: int, artifacts: Path, workers: int) -> None:
    httpclient = pytest.importorskip("tritonclient.http")
    pytest.importorskip("uvicorn")
    artifact, golden = _case(artifacts, "factory-so")
    args = (str(artifact), "--name", "board", "--workers", str(workers), *_flags(tracker))
    with tvmrt_serve(*args) as served:
        client = httpclient.InferenceServerClient(f"{HOST}:{served.port}")
        assert client.is_model_ready("board")
        meta = client.get_model_metadata("board")
        assert meta["inputs"] == [{"name": "data", "datatype": "FP32", "shape": [1, 3, 16, 16]}]
        inp = httpclient.InferInput("data", [1, 3, 16, 16], "FP32")
        inp.set_data_from_numpy(golden["data"], binary_data=True)
        (name,) = (o["name"] for o in meta["outputs"])
        result = client.infer("board", [inp])
        np.testing.assert_allclose(result.as_numpy(name), golden["output_0"], **ATOL)


def test_the_runtime_finds_a_devices_session_and_says_when_there_is_none(tracker: int) -> None:
    from tvmrt import runtime
    from tvmrt.error import DeviceUnavailableError, InvalidArgumentError
    from tvmrt.runtime.remote_session import RemoteSession, remote_session

    with pytest.raises(InvalidArgumentError, match="not a device of an RPC session"):
        remote_session(runtime.cpu())
    session = rpc.connect_tracker(HOST, tracker).request(KEY)
    dev = session.cpu()
    assert isinstance(remote_session(dev), RemoteSession)
    session.close()
    with pytest.raises(DeviceUnavailableError, match="belongs to no open RPC session"):
        remote_session(dev)
