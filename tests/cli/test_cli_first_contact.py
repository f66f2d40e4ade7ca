"""What a new user meets first on the command line (issue 46): files named by flags are
checked before the model loads, the same trouble exits the same way in every verb, and a
message says only what helps (no traceback hint where there is no traceback, no tvmrt
source line in a warning about an environment variable, one extra per message)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from support.cli import tvmrt
from support.paths import REPO

MODEL = REPO / "examples" / "digits" / "model"


def test_a_missing_compare_file_is_refused_before_the_model_loads(tmp_path: Path) -> None:
    # checked after the run: a model that takes minutes to load and run failed only then
    damaged = tmp_path / "model.so"
    damaged.write_bytes(b"\x7fELF" + b"\0" * 60)  # a library the loader would refuse
    for flags, words in (
        (["--compare", str(tmp_path / "ref.npz")], "the reference file"),
        (["--compare", str(REPO / "README.md")], "is not a .npz file"),
        (["-i", str(tmp_path / "in.npz")], "input file"),
        (["-o", str(tmp_path / "out.txt")], "-o/--output must name a .npz file"),
    ):
        done = tvmrt("run", damaged, *flags)
        assert done.returncode == 2, done.stderr
        assert words in done.stderr, done.stderr
        assert "bad ELF header" not in done.stderr, done.stderr  # the library was not read


def test_a_busy_port_exits_2_in_every_verb() -> None:
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = str(busy.getsockname()[1])
        for argv in (
            ["serve", MODEL, "--port", port],
            ["rpc", "server", "--port", port, "--port-end", port],
            ["rpc", "tracker", "--port", port, "--port-end", port],
        ):
            done = tvmrt(*argv, timeout=60)
            assert done.returncode == 2, (argv, done.stderr)
            assert port in done.stderr, done.stderr
            assert "choose another --port" in done.stderr, done.stderr


def test_the_traceback_hint_only_where_there_is_a_traceback(tmp_path: Path) -> None:
    usage = tvmrt("run", MODEL, "--threads", "0")
    assert usage.returncode == 2
    assert "--verbose" not in usage.stderr, usage.stderr
    damaged = tmp_path / "model.so"
    damaged.write_bytes(b"\x7fELF" + b"\0" * 60)
    failed = tvmrt("run", damaged)
    assert failed.returncode == 2, failed.stderr
    assert "(run with --verbose for the traceback)" in failed.stderr


def test_a_bad_thread_count_warns_in_one_line() -> None:
    env = dict(os.environ, TVM_NUM_THREADS="abc")
    done = subprocess.run(
        [sys.executable, "-m", "tvmrt", "run", str(MODEL)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    first = done.stderr.splitlines()[0]
    assert first == (
        "tvmrt: warning: TVM_NUM_THREADS='abc' is not a positive whole number of threads; "
        "ignoring it"
    ), done.stderr
    assert ".py:" not in done.stderr, done.stderr  # no source line of tvmrt's


def test_an_onnx_model_names_the_one_extra_compile_needs(tmp_path: Path) -> None:
    model = tmp_path / "net.onnx"
    model.write_bytes(b"\x08\x07")
    done = tvmrt("run", model)
    assert done.returncode == 2
    assert "pip install 'tvmrt[compile]'" in done.stderr, done.stderr
    assert "demo" not in done.stderr, done.stderr


@pytest.mark.parametrize("verb", ["run", "bench", "profile"])
def test_every_verb_checks_its_input_file_before_loading(verb: str, tmp_path: Path) -> None:
    damaged = tmp_path / "model.so"
    damaged.write_bytes(b"\x7fELF" + b"\0" * 60)
    done = tvmrt(verb, damaged, "-i", tmp_path / "missing.npz")
    assert done.returncode == 2, done.stderr
    assert "missing.npz' does not exist" in done.stderr, done.stderr


def test_compile_without_its_extra_exits_2_naming_it(tmp_path: Path) -> None:
    # a missing extra was exit 2 in serve and 1 in compile (a CompileError)
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    model = tmp_path / "relu.onnx"
    onnx.save(helper.make_model(graph), str(model))
    hidden = tmp_path / "hidden" / "tvm"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text('raise ImportError("tvm is hidden for this test")\n')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(hidden.parent), str(REPO / "src")]))
    done = subprocess.run(
        [sys.executable, "-m", "tvmrt", "compile", str(model), "-o", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 2, done.stderr
    assert "pip install 'tvmrt[compile]'" in done.stderr, done.stderr
    assert "demo" not in done.stderr, done.stderr
