"""``tvmrt run/bench ARTIFACT --rpc HOST:PORT`` and ``--rpc-tracker HOST:PORT --rpc-key KEY``
against TVM 0.16's own server and tracker: the same printout and outputs as a local run."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from support.cli import tvmrt
from support.paths import REPO
from support.rpc_server import tvmrt_rpc
from support.tvm016_rpc import HOST, tvm016_rpc_server, tvm016_rpc_tracker
from tvmrt import rpc


@pytest.fixture(scope="module", params=["tvm016", "tvmrt"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[int]:
    """The port of TVM 0.16's own RPC server, or of ``tvmrt rpc server``."""
    if request.param == "tvm016":
        with tvm016_rpc_server(tmp_path_factory.mktemp("tvm016-cli")) as peer:
            yield peer.port
    else:
        with tvmrt_rpc("server") as (_, port):
            yield port


def _summary(stdout: str) -> list[str]:
    """The printout less its first line (the load time differs from run to run)."""
    lines = stdout.splitlines()
    assert lines[0].startswith("loaded ")
    return lines[1:]


@pytest.mark.parametrize("form", ["factory", "folder"])
def test_run_prints_what_a_local_run_prints(
    server: int, artifacts: Path, tmp_path: Path, form: str
) -> None:
    if form == "factory":
        artifact = artifacts / "relay016" / "linkparams-so" / "deploy.so"
        golden = np.load(artifact.parent / "golden.npz")
    else:
        artifact = artifacts / "mobilenet_v1"
        golden = np.load(artifact / "golden.npz")
    given = tmp_path / "in.npz"
    np.savez(given, data=golden["data"])
    local = tvmrt("run", artifact, "-i", given)
    assert local.returncode == 0, local.stderr
    out = tmp_path / "out.npz"
    remote = tvmrt("run", artifact, "-i", given, "--rpc", f"{HOST}:{server}", "-o", out)
    assert remote.returncode == 0, remote.stderr
    assert _summary(remote.stdout)[:-1] == _summary(local.stdout)  # last: "saved ... to"
    outputs = np.load(out)
    (only,) = outputs.files
    np.testing.assert_allclose(outputs[only], golden["output_0"], rtol=1e-6, atol=1e-7)


def test_bench_over_rpc(server: int, artifacts: Path) -> None:
    artifact = artifacts / "relay016" / "linkparams-so" / "deploy.so"
    done = tvmrt("bench", artifact, "--rpc", f"{HOST}:{server}", "--warmup", "1", "--repeat", "3")
    assert done.returncode == 0, done.stderr
    assert "3 x 1 run(s)" in done.stdout
    assert "median" in done.stdout


@pytest.mark.parametrize("form", ["factory", "folder"])
def test_profile_over_rpc(server: int, artifacts: Path, form: str) -> None:
    if form == "factory":
        artifact = artifacts / "relay016" / "linkparams-so" / "deploy.so"
    else:
        artifact = artifacts / "mobilenet_v1"
    address = f"{HOST}:{server}"
    table = tvmrt("profile", artifact, "--rpc", address, "--number", "1")
    assert table.returncode == 0, table.stderr
    assert "Summary by operator type" in table.stdout
    assert "softmax" in table.stdout
    report = tvmrt("profile", artifact, "--rpc", address, "--number", "1", "--json")
    assert report.returncode == 0, report.stderr
    calls = json.loads(report.stdout)["calls"]
    assert any("softmax" in call["Name"]["string"] for call in calls)


def test_tracker_flags(tmp_path: Path, artifacts: Path) -> None:
    artifact = artifacts / "relay016" / "linkparams-so" / "deploy.so"
    golden = np.load(artifact.parent / "golden.npz")
    given = tmp_path / "in.npz"
    np.savez(given, data=golden["data"])
    with (
        tvm016_rpc_tracker(tmp_path) as tracker,
        tvm016_rpc_server(tmp_path, tracker=tracker.port, key="board"),
    ):
        client = rpc.connect_tracker(HOST, tracker.port)
        deadline = time.monotonic() + 30
        while "board" not in client.summary()["queue_info"]:
            assert time.monotonic() < deadline, client.summary()
            time.sleep(0.2)
        client.close()
        out = tmp_path / "out.npz"
        done = tvmrt(
            "run",
            artifact,
            "-i",
            given,
            "-o",
            out,
            "--rpc-tracker",
            f"{HOST}:{tracker.port}",
            "--rpc-key",
            "board",
        )
        assert done.returncode == 0, done.stderr
    np.testing.assert_allclose(
        np.load(out)[np.load(out).files[0]], golden["output_0"], rtol=1e-6, atol=1e-7
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--rpc", "nohost"], "--rpc must be HOST:PORT"),
        (["--rpc", "127.0.0.1:0"], "--rpc must be HOST:PORT"),
        (["--rpc-tracker", "127.0.0.1:9190"], "needs --rpc-key"),
        (["--rpc", "127.0.0.1:1", "--rpc-tracker", "127.0.0.1:2"], "not both"),
    ],
)
def test_flag_errors_are_usage_errors(artifacts: Path, flags: list[str], message: str) -> None:
    done = tvmrt("run", artifacts / "relay016" / "linkparams-so" / "deploy.so", *flags)
    assert done.returncode == 2
    assert message in done.stderr


def test_unreachable_server_is_a_clear_failure(artifacts: Path) -> None:
    from tvmrt.serve.server import free_port

    port = free_port(HOST)  # nothing listens there
    done = tvmrt(
        "run", artifacts / "relay016" / "linkparams-so" / "deploy.so", "--rpc", f"{HOST}:{port}"
    )
    assert done.returncode == 1
    assert f"cannot connect to the RPC server at {HOST}:{port}" in done.stderr


def test_wrong_tracker_key_says_what_it_waits_for_and_honours_the_timeout() -> None:
    """A key no server has: the command says it waits, for which key, which keys the
    tracker has, and gives up after ``--rpc-timeout`` (it used to wait forever, silently)."""
    model = REPO / "examples" / "digits" / "model"
    with (
        tvmrt_rpc("tracker") as (_, tport),
        tvmrt_rpc("server", "--tracker", f"{HOST}:{tport}", "--key", "board"),
    ):
        client = rpc.connect_tracker(HOST, tport)
        deadline = time.monotonic() + 30
        while not client.summary()["server_info"]:
            assert time.monotonic() < deadline, client.summary()
            time.sleep(0.2)
        client.close()
        flags = ["--rpc-tracker", f"{HOST}:{tport}", "--rpc-timeout", "2"]
        started = time.monotonic()
        done = tvmrt("run", model, *flags, "--rpc-key", "wrong", timeout=60)
        took = time.monotonic() - started
        assert done.returncode == 1, done.stderr
        assert "waiting up to 2 s for a free RPC server of key 'wrong'" in done.stderr
        assert "no RPC server of key 'wrong' came free within 2 s" in done.stderr
        assert "its servers' keys: board" in done.stderr
        assert took < 30
        right = tvmrt("run", model, *flags, "--rpc-key", "board", timeout=60)
        assert right.returncode == 0, right.stderr
        assert "probabilities_0" in right.stdout


def _readme_recipe() -> list[str]:
    """The README's commands for a board driven from a PC (the block after "Driven from a PC")."""
    readme = (REPO / "README.md").read_text()
    block = readme.split("Driven from a PC", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    return [line.split("#")[0].split() for line in block.splitlines() if line.strip()]


def test_the_readmes_direct_board_recipe_runs_as_written(tmp_path: Path) -> None:
    # the board's server had a key: `--rpc board:9090` was refused ("has a different key
    # than ''") and --rpc-key was refused with --rpc; TVM's rpc.connect(host, port, key=...)
    # passes it, and so does the recipe now
    model = REPO / "examples" / "digits" / "model"
    given = tmp_path / "inputs.npz"
    with np.load(model / "heldout.npz") as held:
        np.savez(given, image=held["image"])
    direct, tracked = _readme_recipe()
    assert direct[:3] == ["tvmrt", "run", "deploy.so"]
    assert "--rpc-key" in direct, direct
    with (  # the board's server as the README starts it, and one registered at a tracker
        tvmrt_rpc("server", "--key", "rasp4") as (_, port),
        tvmrt_rpc("tracker") as (_, tport),
        tvmrt_rpc("server", "--tracker", f"{HOST}:{tport}", "--key", "rasp4"),
    ):
        client = rpc.connect_tracker(HOST, tport)
        deadline = time.monotonic() + 30
        while not client.summary()["server_info"]:
            assert time.monotonic() < deadline, client.summary()
            time.sleep(0.2)
        client.close()
        for argv in (direct, tracked):
            args = [
                str(model)
                if a == "deploy.so"
                else f"{HOST}:{port}"
                if a == "board:9090"
                else f"{HOST}:{tport}"
                if a == "pc:9190"
                else str(given)
                if a == "inputs.npz"
                else str(tmp_path / "outputs.npz")
                if a == "outputs.npz"
                else a
                for a in argv[1:]
            ]
            done = tvmrt(*args, timeout=120)
            assert done.returncode == 0, (argv, done.stderr)
        bare = tvmrt("run", model, "-i", given, "--rpc", f"{HOST}:{port}", timeout=60)
    assert bare.returncode == 1
    assert "has a different key than ''" in bare.stderr, bare.stderr
    assert "pass the key the server was started with: --rpc-key KEY" in bare.stderr


def test_a_port_that_is_no_rpc_server_is_named_within_the_timeout() -> None:
    # a listener that accepts and says nothing: the handshake waited 60 s whatever
    # --rpc-timeout said, then printed "timed out"; now each step waits --rpc-timeout (10 s
    # by default) and the error names the peer and the step
    import socket

    model = REPO / "examples" / "digits" / "model"
    with socket.create_server((HOST, 0)) as silent:
        port = silent.getsockname()[1]
        for flags, limit in ((["--rpc-timeout", "1"], 1), ([], 10)):
            started = time.monotonic()
            done = tvmrt("run", model, "--rpc", f"{HOST}:{port}", *flags, timeout=60)
            took = time.monotonic() - started
            assert done.returncode == 1, done.stderr
            assert f"{HOST}:{port} accepted the connection but sent no handshake reply" in (
                done.stderr
            ), done.stderr
            assert f"within {limit:g} s" in done.stderr, done.stderr
            assert took < limit + 15, took
        done = tvmrt(
            "run", model, "--rpc-tracker", f"{HOST}:{port}", "--rpc-key", "k", "--rpc-timeout", "1"
        )
        assert done.returncode == 1
        assert f"the RPC tracker at {HOST}:{port} sent no handshake reply within 1 s" in done.stderr


def test_a_tracker_key_no_server_has_gives_up_after_the_default_wait(monkeypatch) -> None:
    from tvmrt.cli import rpc_flags

    model = REPO / "examples" / "digits" / "model"
    with tvmrt_rpc("tracker") as (_, tport):
        started = time.monotonic()
        done = tvmrt(
            "run", model, "--rpc-tracker", f"{HOST}:{tport}", "--rpc-key", "nobody", timeout=120
        )
        took = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    assert f"waiting up to {rpc_flags.TRACKER_WAIT:g} s" in done.stderr
    assert "no server of key 'nobody' is registered there (its servers' keys: none)" in done.stderr
    assert took < rpc_flags.TRACKER_WAIT + 20
