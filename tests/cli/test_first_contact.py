"""What a first-time user meets (issue 22 items 3, 9, 10, 11), on the repository's example model.

* ``bench`` shows progress on a terminal only for runs over ~2 s, and Ctrl-C prints the
  statistics of the measurements done (exit 130) instead of throwing them away;
* ``--help`` advertises only devices tvmrt has backends for, and a device without one is a
  usage error (exit 2) that says what runs here;
* two served models with one name are refused before loading, naming the name (exit 2);
* install hints say how to install an extra from a checkout as well as from an index.
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time

import pytest

from support.cli import tvmrt
from support.paths import REPO
from tvmrt.cli import build_parser

MODEL = REPO / "examples" / "digits" / "model"
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def _drain(leader: int) -> str:
    """Everything left to read on a pseudo-terminal whose child has exited; closes it."""
    seen = b""
    while select.select([leader], [], [], 5)[0]:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    return seen.decode(errors="replace")


def _bench_on_a_terminal(duration: float) -> tuple[int, str]:
    """Run ``tvmrt bench --duration`` with stderr on a pseudo-terminal; its exit and stderr."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tvmrt", "bench", str(MODEL), "--duration", str(duration)],
        stdout=subprocess.DEVNULL,
        stderr=follower,
    )
    os.close(follower)
    seen = b""
    while select.select([leader], [], [], 120)[0]:  # read as it writes: a full pty blocks it
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    return proc.wait(timeout=60), seen.decode(errors="replace")


def test_bench_shows_progress_on_a_terminal_only_for_long_runs():
    status, long_run = _bench_on_a_terminal(3.0)
    assert status == 0
    assert "benchmark [" in long_run
    assert "%" in long_run
    status, short_run = _bench_on_a_terminal(0.5)
    assert status == 0
    assert "benchmark [" not in short_run


def test_bench_interrupted_prints_the_statistics_so_far():
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tvmrt", "bench", str(MODEL), "--duration", "60", "--json"],
        stdout=subprocess.PIPE,
        stderr=follower,
        text=True,
    )
    os.close(follower)
    seen = b""
    deadline = time.monotonic() + 120
    while b"benchmark [" not in seen:  # the bar shows once it has measured for 2 s
        ready, _, _ = select.select([leader], [], [], 5)
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            pytest.fail(f"bench never showed its progress bar: {seen!r}")
        if ready:
            seen += os.read(leader, 4096)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    err = _drain(leader)
    assert proc.returncode == EXIT_INTERRUPTED, err
    result = json.loads(out)
    assert result["interrupted"] is True
    assert result["measurements"] >= 1
    assert 0 < result["latency_ms"]["min"] <= result["latency_ms"]["mean"]
    assert f"statistics of the {result['measurements']} measurement(s) done" in err


@pytest.mark.parametrize("verb", ["run", "bench", "profile", "inspect", "serve"])
def test_help_advertises_only_devices_with_a_backend(verb, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([verb, "--help"])
    text = capsys.readouterr().out
    assert "vulkan" not in text
    if verb != "inspect":  # inspect runs nothing, so it takes no --device
        assert "--device" in text
        assert "cpu (default), cuda[:N] or opencl[:N]" in text


def test_device_without_a_backend_says_what_runs_here():
    done = tvmrt("run", MODEL, "--device", "vulkan:0")
    assert done.returncode == EXIT_USAGE
    line = done.stderr.splitlines()[0]
    assert line.startswith("tvmrt: error: no backend for device vulkan(0): ")
    # the sentence ends with the devices it can use, not mid-way
    assert "here tvmrt runs compiled kernels on cpu" in line
    assert "(it ships backends for cpu, cuda, opencl)" in line
    assert "runs compiled kernels on cpu" in line
    if not os.path.exists("/dev/nvidiactl"):  # no NVIDIA driver: CUDA is not usable here
        assert "kernels on cpu, cuda" not in line


@pytest.mark.skipif(os.path.exists("/dev/nvidiactl"), reason="this machine has an NVIDIA driver")
def test_cuda_without_the_driver_is_a_usage_error_naming_it():
    done = tvmrt("run", MODEL, "--device", "cuda")
    assert done.returncode == EXIT_USAGE
    assert done.stderr.startswith(
        "tvmrt: error: device cuda(0) cannot be used: CUDA: cannot load the NVIDIA driver library"
    )


def test_two_served_models_with_one_default_name_are_a_usage_error(tmp_path):
    other = tmp_path / "model"
    other.symlink_to(MODEL)
    done = tvmrt("serve", MODEL, other, "--port", "0")
    assert done.returncode == EXIT_USAGE, done.stderr
    assert "the same name 'model'" in done.stderr
    assert str(other) in done.stderr
    assert "--name" in done.stderr
    named = tvmrt("serve", MODEL, other, "--name", "a", "--name", "a", "--port", "0")
    assert named.returncode == EXIT_USAGE
    assert "--name gives two models the same name 'a'" in named.stderr


def test_install_hints_name_the_checkout_form():
    from tvmrt.compiler._tvm import INSTALL_HINT

    assert "pip install 'tvmrt[compile]'" in INSTALL_HINT
    assert "pip install -e '.[compile]'" in INSTALL_HINT
    readme = (REPO / "README.md").read_text()
    # every extra the README names is given in the form that works from this checkout
    assert "'tvmrt[serve]'" not in readme.replace("as `pip install 'tvmrt[serve]'`", "")
    assert "pip install -e '.[serve]'" in readme
