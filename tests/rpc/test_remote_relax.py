"""Relax VM executables on a ``tvmrt rpc server`` started here: ``--rpc`` for run, bench,
profile and serve, and ``load_artifact`` on a session's device.

The server loads the uploaded ``model.so`` and runs the VM; the face drives the remote VM
module's packed functions, and reads a tuple result by index (it stays on the server as an
object; a shape in it through TVM's ``runtime.GetShapeTupleSize``/``GetShapeTupleElem``).
The outputs equal TVM's own VM's bitwise.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from support import relax_cases as rc
from support.cli import tvmrt
from support.relayvm_cases import same_bits
from support.rpc_server import tvmrt_rpc
from support.serve import post_json, tvmrt_serve
from tvmrt import rpc
from tvmrt.artifact import find_artifact, load_artifact
from tvmrt.runtime.relax_vm import VirtualMachine

HOST = "127.0.0.1"


@pytest.fixture(scope="module")
def server() -> Iterator[int]:
    """A ``tvmrt rpc server``; yields its port."""
    with tvmrt_rpc("server") as (_, port):
        yield port


# the 0.19 era is the legacy ABI (__tvm_dev_mblob), 0.27 tvm-ffi
@pytest.mark.parametrize("model", rc.RUNNABLE)
@pytest.mark.parametrize("era", ["019", "027"])
def test_run_on_the_server_equals_tvm_bitwise(server, artifacts, tmp_path, era, model):
    # a child process per run: a server serves one session at a time, and the process's
    # end closes its session
    folder = rc.folder(artifacts, era, model)
    for run in rc.runs(folder):
        out = tmp_path / f"{run.name}.npz"
        given = rc.save_inputs(run, tmp_path / f"{run.name}_in.npz")
        done = tvmrt(
            "run", folder / "model.so", "-i", given, "-o", out, "--rpc", f"{HOST}:{server}"
        )
        assert done.returncode == 0, done.stderr
        with np.load(out) as got:
            assert sorted(got.files) == sorted(run.outputs)
            for name, want in run.outputs.items():
                assert same_bits(got[name], want), f"{era} {model} {run.name} {name}"


def test_load_artifact_on_a_session_device(server, artifacts):
    folder = rc.folder(artifacts, "027", "tuple_out")
    (run,) = rc.runs(folder)
    with rpc.connect(HOST, server) as session:
        model = load_artifact(find_artifact(folder / "model.so"), session.cpu())
        assert model.form == "relax"
        assert model.lib.type_key == "rpc"
        executor = model.executor
        assert isinstance(executor, VirtualMachine)
        assert [(t.name, t.shape) for t in executor.inputs] == [("a", (2, 3)), ("b", (2, 3))]
        for name, arr in run.inputs.items():
            executor.set_input(name, arr)
        executor.run()
        assert executor.get_output(0).device == session.cpu()  # a tensor stays remote
        for i, want in enumerate(run.outputs.values()):
            assert same_bits(executor.get_output(i).numpy(), want)
        (replica,) = model.replicate(1)
        for name, arr in run.inputs.items():
            replica.set_input(name, arr)
        replica.run()
        assert same_bits(replica.get_output(1).numpy(), run.outputs["output_1"])


def test_refusals_come_back_from_the_server(server, artifacts):
    flags = ("--rpc", f"{HOST}:{server}")
    done = tvmrt("run", rc.folder(artifacts, "027", "llm_like") / "model.so", *flags)
    assert done.returncode == 1
    assert "vm.builtin.attention_kv_cache_create (the LLM KV cache" in done.stderr


def test_bench_and_profile_on_the_server(server, artifacts):
    flags = ("--rpc", f"{HOST}:{server}")
    mlp = rc.folder(artifacts, "027", "mlp_dyn") / "model.so"
    done = tvmrt("bench", mlp, "--input-shape", "x=4x16", "--warmup", "1", "--repeat", "2", *flags)
    assert done.returncode == 0, done.stderr
    assert "2 x 1 run(s)" in done.stdout
    tup = rc.folder(artifacts, "027", "tuple_out") / "model.so"
    done = tvmrt("profile", tup, "--number", "1", "--json", *flags)
    assert done.returncode == 0, done.stderr
    names = [call["Name"]["string"] for call in json.loads(done.stdout)["calls"]]
    assert {"add", "multiply", "relu", "vm.builtin.make_tuple"} <= set(names)


def test_serve_a_relax_model_running_on_the_server(server, artifacts, tmp_path: Path):
    pytest.importorskip("uvicorn")
    folder = rc.folder(artifacts, "027", "mlp_dyn")
    args = (str(folder / "model.so"), "--name", "mlp", "--rpc", f"{HOST}:{server}")
    with tvmrt_serve(*args) as served:
        status, _, body = served.request("GET", "/v2/models/mlp")
        assert status == 200
        meta = json.loads(body)
        assert meta["platform"] == "tvmrt_relax_vm"
        assert meta["inputs"][0] == {"name": "x", "datatype": "FP32", "shape": [-1, 16]}
        for run in rc.runs(folder):
            doc = {
                "inputs": [
                    {
                        "name": k,
                        "shape": list(v.shape),
                        "datatype": "FP32",
                        "data": v.ravel().tolist(),
                    }
                    for k, v in run.inputs.items()
                ]
            }
            status, _, answer = post_json(
                f"http://{HOST}:{served.port}", "/v2/models/mlp/infer", doc
            )
            assert status == 200, answer
            (out,) = answer["outputs"]
            got = np.asarray(out["data"], np.float32).reshape(out["shape"])
            assert same_bits(got, run.outputs["output_0"]), run.name
