"""What a first-time user met in issue 30's pass, on the repository's example model.

* ``serve`` on a busy port says so and exits 2 before loading (it logged "serving" and
  exited 3, a code the README does not list);
* ``run -o out.txt`` is refused before the model runs;
* ``run model.onnx`` says to compile it; ``run deploy.json``/``deploy.params`` says to pass
  the folder.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from support.cli import tvmrt
from support.paths import REPO

MODEL = REPO / "examples" / "digits" / "model"
EXIT_USAGE = 2


def test_serve_on_a_busy_port_says_so_before_loading() -> None:
    pytest.importorskip("uvicorn")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = tvmrt("serve", MODEL, "--host", "127.0.0.1", "--port", str(port), timeout=60)
    assert done.returncode == EXIT_USAGE, done.stderr
    assert f"port {port} on 127.0.0.1 is busy: another process listens there" in done.stderr
    assert "choose another --port (0 picks a free one)" in done.stderr
    assert '"serving"' not in done.stderr
    assert '"loaded"' not in done.stderr  # refused before any model loads


def test_an_output_file_that_is_not_npz_is_refused_before_the_run() -> None:
    done = tvmrt("run", MODEL, "-o", "out.txt")
    assert done.returncode == EXIT_USAGE
    assert "-o/--output must name a .npz file, got 'out.txt'" in done.stderr
    assert done.stdout == ""  # nothing loaded, nothing ran


def test_an_onnx_model_is_sent_to_tvmrt_compile(tmp_path: Path) -> None:
    onnx = tmp_path / "model.onnx"
    onnx.write_bytes(b"\x08\x07")  # any bytes: the name says what it is
    done = tvmrt("run", onnx)
    assert done.returncode == EXIT_USAGE
    assert "is an ONNX model, not a compiled artifact: compile it first" in done.stderr
    assert f"tvmrt compile {onnx} -o build/model" in done.stderr


@pytest.mark.parametrize(
    ("name", "role"), [("deploy.json", "graph JSON"), ("deploy.params", "params file")]
)
@pytest.mark.parametrize("verb", ["run", "bench", "profile"])
def test_one_file_of_a_folder_names_the_folder(verb: str, name: str, role: str) -> None:
    done = tvmrt(verb, MODEL / name)
    assert done.returncode == EXIT_USAGE
    assert f"is a {role}, one file of an artifact: pass the folder that holds it" in done.stderr
    assert repr(str(MODEL)) in done.stderr
