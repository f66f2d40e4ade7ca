"""CLI conventions (issue 12 item 6): --verbose after the verb, closed pipes, usage exit 2."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from support.cli import tvmrt

EXIT_USAGE = 2


@pytest.mark.parametrize("where", ["before", "after"])
def test_verbose_is_accepted_before_and_after_the_verb(tmp_path, where):
    missing = str(tmp_path / "missing")
    args = ["--verbose", "run", missing] if where == "before" else ["run", missing, "--verbose"]
    done = tvmrt(*args)
    assert done.returncode == EXIT_USAGE, done.stderr
    assert "Traceback (most recent call last)" in done.stderr
    assert "does not exist" in done.stderr
    quiet = tvmrt("run", missing)
    assert "Traceback" not in quiet.stderr
    assert "--verbose" in quiet.stderr


def test_closed_pipe_exits_quietly(artifacts):
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before tvmrt writes anything, as with `| head`
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "tvmrt",
                "profile",
                str(artifacts / "iris-factory" / "deploy_lib.tar"),
                "--number",
                "1",
            ],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
        )
    finally:
        os.close(write_end)
    assert done.stderr == ""
    assert done.returncode == 128 + 13  # as a process killed by SIGPIPE


def test_unusable_device_is_a_usage_error(artifacts):
    done = tvmrt("run", str(artifacts / "mobilenet_v1"), "--device", "cuda")
    assert done.returncode == EXIT_USAGE
    assert "cuda(0)" in done.stderr


def test_symbolic_input_dims_without_input_shape_are_a_usage_error(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, str(tmp_path / "m.onnx"))
    done = tvmrt("compile", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "out"))
    assert done.returncode == EXIT_USAGE, done.stderr
    assert "--input-shape x=1x4" in done.stderr
