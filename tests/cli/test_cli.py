"""The tvmrt command line, run as users run it (subprocess): every verb, bad input too."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from support.cli import tvmrt


@pytest.fixture(scope="module")
def golden_input(artifacts: Path, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "data.npy"
    np.save(path, np.load(artifacts / "mobilenet_v1" / "golden.npz")["data"])
    return path


def test_help_lists_verbs_and_examples():
    out = tvmrt("--help")
    assert out.returncode == 0
    for verb in ("run", "bench", "profile", "inspect"):
        assert verb in out.stdout
    for verb in ("run", "bench", "profile", "inspect"):
        sub = tvmrt(verb, "--help")
        assert sub.returncode == 0
        assert "examples:" in sub.stdout


def test_no_verb_prints_help_and_fails():
    out = tvmrt()
    assert out.returncode == 2
    assert "usage: tvmrt" in out.stdout


def test_run_reproduces_tvm_and_saves_outputs(artifacts, golden_input, tmp_path):
    out_file = tmp_path / "out.npz"
    out = tvmrt(
        "run", str(artifacts / "mobilenet_v1"), "-i", str(golden_input), "-o", str(out_file)
    )
    assert out.returncode == 0, out.stderr
    assert "data: (1, 3, 224, 224) float32" in out.stdout
    assert "top-5: 995" in out.stdout
    saved = np.load(out_file)
    golden = np.load(artifacts / "mobilenet_v1" / "golden.npz")["output_0"]
    np.testing.assert_allclose(saved["fused_nn_softmax_0"], golden, rtol=1e-6, atol=1e-7)


def test_run_factory_tar_with_named_input_and_fill(artifacts, tmp_path):
    sample = tmp_path / "x.npy"
    golden = np.load(artifacts / "iris-factory" / "golden.npz")
    np.save(sample, golden["float_input"][:1])
    tar = str(artifacts / "iris-factory" / "deploy_lib.tar")
    out = tvmrt("run", tar, "-i", f"float_input={sample}", "--top-k", "3")
    assert out.returncode == 0, out.stderr
    assert "top-3:" in out.stdout
    filled = tvmrt("run", tar, "--fill", "zeros")
    assert filled.returncode == 0, filled.stderr
    assert "float_input: (1, 4) float32 [0, 0, 0, 0]" in filled.stdout


def test_run_with_explicit_files(artifacts):
    folder = artifacts / "mobilenet_v2"
    out = tvmrt(
        "run",
        "--graph", str(folder / "deploy_graph.json"),
        "--lib", str(folder / "deploy_lib.so"),
        "--params", str(folder / "deploy_param.params"),
        "--fill", "ones",
        "--threads", "1",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "outputs:" in out.stdout


def test_bench_json(artifacts):
    out = tvmrt(
        "bench", str(artifacts / "mobilenet_v1"), "--repeat", "5", "--warmup", "1", "--json"
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["measurements"] == 5
    stats = result["latency_ms"]
    assert stats["min"] <= stats["median"] <= stats["p90"] <= stats["p99"] <= stats["max"]
    assert result["load_ms"] > 0
    assert result["peak_rss_mb"] > 17  # the weights alone are 17 MB


def test_bench_text_duration_and_end_to_end(artifacts):
    tar = str(artifacts / "iris-factory" / "deploy_lib.tar")
    out = tvmrt("bench", tar, "--duration", "0.3", "--end-to-end", "--number", "10")
    assert out.returncode == 0, out.stderr
    for key in ("load time", "mean", "median", "p90", "p99", "std", "peak memory", "end to end"):
        assert key in out.stdout


def test_profile_table_csv_json_trace_dump(artifacts, tmp_path):
    tar = str(artifacts / "iris-factory" / "deploy_lib.tar")
    table = tvmrt("profile", tar, "--number", "2")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[:4] == ["Node", "Name", "Ops", "Time(us)"]
    assert any(line.startswith("Total_time") for line in lines)
    assert "Summary by operator type" in table.stdout  # after the node table
    csv = tvmrt("profile", tar, "--csv", "--number", "1")
    assert csv.returncode == 0, csv.stderr
    assert csv.stdout.splitlines()[0].startswith("Argument Shapes,Count,Device,Duration (us)")
    report = json.loads(tvmrt("profile", tar, "--json", "--number", "1").stdout)
    assert {"calls", "device_metrics", "configuration"} <= set(report)
    trace = tmp_path / "trace.json"
    dump = tmp_path / "dump"
    out = tvmrt("profile", tar, "--trace", str(trace), "--dump", str(dump), "--number", "1")
    assert out.returncode == 0, out.stderr
    assert json.loads(trace.read_text())["displayTimeUnit"] == "ns"
    dumped = {p.name for p in (dump / "_tvmdbg_device_CPU_0").iterdir()}
    assert {
        "_tvmdbg_graph_dump.json",
        "_tvmdbg_execution_trace.json",
        "output_tensors.params",
    } <= dumped


def test_inspect_runnable_and_json(artifacts):
    out = tvmrt("inspect", str(artifacts / "mobilenet_v1"))
    assert out.returncode == 0, out.stderr
    assert "legacy packed functions" in out.stdout
    assert "runs here" in out.stdout
    report = json.loads(
        tvmrt("inspect", str(artifacts / "iris-factory" / "deploy_lib.tar"), "--json").stdout
    )
    assert report["runnable"] is True
    assert report["graph"]["inputs"] == [
        {"name": "float_input", "shape": [1, 4], "dtype": "float32"}
    ]
    assert report["params"]["count"] == 4


@pytest.mark.parametrize(
    ("artifact", "message"),
    [
        ("aarch64/deploy_lib.so", "built for aarch64"),
        ("windows-dll", "Windows DLL"),
        ("face-macos", "macOS Mach-O"),
        ("wrn-arm32", "built for arm"),
    ],
)
def test_inspect_foreign_artifacts(artifacts, artifact, message):
    out = tvmrt("inspect", str(artifacts / artifact))
    assert out.returncode == 1
    assert "cannot run here" in out.stdout
    assert message in out.stdout


def test_bad_arguments_and_files(artifacts, tmp_path):
    missing = tvmrt("run", str(tmp_path / "nope"))
    assert missing.returncode == 2
    assert missing.stderr.startswith("tvmrt: error: artifact")
    assert "does not exist" in missing.stderr
    garbage = tmp_path / "model.so"
    garbage.write_bytes(b"not a library at all")
    bad = tvmrt("run", str(garbage))
    assert bad.returncode == 2
    assert "tvmrt: error: cannot load" in bad.stderr
    assert "Traceback" not in bad.stderr
    verbose = tvmrt("--verbose", "run", str(garbage))
    assert "Traceback" in verbose.stderr
    foreign = tvmrt("run", str(artifacts / "windows-dll"))
    assert foreign.returncode == 2
    assert "Windows DLL" in foreign.stderr
    wrong_input = tmp_path / "x.npy"
    np.save(wrong_input, np.zeros((2, 2), "float32"))
    shape = tvmrt("run", str(artifacts / "iris-factory" / "deploy_lib.tar"), "-i", str(wrong_input))
    assert shape.returncode == 2
    assert "input 'float_input' has shape (2, 2), the model expects (1, 4)" in shape.stderr
    unknown = tvmrt(
        "run", str(artifacts / "iris-factory" / "deploy_lib.tar"), "-i", f"nope={wrong_input}"
    )
    assert unknown.returncode == 2
    assert "are not inputs of the model" in unknown.stderr
    usage = tvmrt("bench", str(artifacts / "mobilenet_v1"), "--repeat", "0")
    assert usage.returncode == 2
    assert "--repeat must be at least 1" in usage.stderr
    no_artifact = tvmrt("run")
    assert no_artifact.returncode == 2
    assert "give an ARTIFACT" in no_artifact.stderr
    argparse_error = tvmrt("run", "--fill", "purple")
    assert argparse_error.returncode == 2
    assert "invalid choice" in argparse_error.stderr


def test_ambiguous_folder_asks_for_a_choice(tmp_path, artifacts):
    for name in ("a.so", "b.so"):
        (tmp_path / name).write_bytes((artifacts / "mobilenet_v1" / "deploy_lib.so").read_bytes())
    out = tvmrt("inspect", str(tmp_path))
    assert out.returncode == 2
    assert "has several kernel library files (a.so, b.so); pick one with --lib" in out.stderr
