"""The C programs of examples/cpp, one per form the C runtime runs, built by its Makefile
against this checkout's runtime and run plain and under ASan + UBSan: graph_model.c on the
digits model's legacy build (TVM 0.16) and its tvm-ffi build (`tvmrt compile`), equal byte
for byte to the Python runtime, aot_model.c on TVM 0.16's AOT export, equal to TVM's
golden, and relax_model.c on Relax models of TVM 0.16 to 0.27, equal to TVM's goldens."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from support.cxx import SANITIZE, cxx_env, native_lib_dir, shell
from support.paths import REPO
from tvmrt import runtime
from tvmrt.contrib import graph_executor

EXAMPLES = REPO / "examples" / "cpp"
DIGITS = REPO / "examples" / "digits"
CFLAGS = {"plain": "-O2 -Wall -Wextra -Werror", "asan": f"-O1 -g {SANITIZE} -Wall -Wextra"}


@pytest.fixture(scope="module", params=sorted(CFLAGS))
def built(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, str]]:
    variant = request.param
    env = cxx_env(native_lib_dir(tmp_path_factory, variant))
    build = tmp_path_factory.mktemp(f"c-examples-{variant}")
    shell(
        f"make -C {EXAMPLES} graph_model aot_model relax_model memory_model BUILD={build} "
        f"CFLAGS='{CFLAGS[variant]}' "
        f"TVMRT_CONFIG='{sys.executable} -m tvmrt.config'",
        env,
        build,
    )
    return build, env


@pytest.mark.parametrize(
    ("folder", "files"),
    [
        ("tvm016", ("deploy_lib.so", "deploy_graph.json", "deploy_param.params")),
        ("model", ("deploy.so", "deploy.json", "deploy.params")),  # tvm-ffi kernels
    ],
)
def test_graph_model_matches_the_python_runtime(
    built: tuple[Path, dict[str, str]], folder: str, files: tuple[str, str, str]
) -> None:
    build, env = built
    lib, graph, params = (DIGITS / folder / name for name in files)
    with np.load(DIGITS / "model" / "heldout.npz") as npz:
        image = npz["image"].astype(np.float32)
    image.tofile(build / "image.bin")
    out = build / f"out-{folder}.bin"
    text = shell(
        f"{build / 'graph_model'} {lib} {graph} {params} image image.bin {out}", env, build
    )
    assert text == f"output 0: shape (360, 10), 14400 bytes written to {out}\n"
    module = graph_executor.create(graph.read_text(), runtime.load_module(str(lib)), runtime.cpu())
    module.load_params(params.read_bytes())
    module.run(image=image)
    assert out.read_bytes() == module.get_output(0).numpy().astype("<f4").tobytes()


@pytest.mark.parametrize(
    ("folder", "files"),
    [
        ("tvm016", ("deploy_lib.so", "deploy_graph.json", "deploy_param.params")),
        ("model", ("deploy.so", "deploy.json", "deploy.params")),
    ],
)
def test_memory_model_runs_a_sealed_model_from_memory_as_graph_model_runs_the_files(
    built: tuple[Path, dict[str, str]], folder: str, files: tuple[str, str, str]
) -> None:
    # TVMModLoadFromMemory through a memfd: the same bytes out as graph_model.c's run of
    # the files, and (strace) no file opened for writing but the output
    build, env = built
    lib, graph, params = (DIGITS / folder / name for name in files)
    with np.load(DIGITS / "model" / "heldout.npz") as npz:
        npz["image"].astype(np.float32).tofile(build / "image.bin")
    sealed = build / f"{folder}.sealed"
    shell(
        f"{sys.executable} {EXAMPLES / 'seal_model.py'} {lib} {graph} {params} k3y {sealed}",
        env,
        build,
    )
    assert (lib.read_bytes()[:64]) not in sealed.read_bytes()  # sealed: no plaintext on disk
    by_file, by_memory = build / f"file-{folder}.bin", build / f"memory-{folder}.bin"
    shell(f"{build / 'graph_model'} {lib} {graph} {params} image image.bin {by_file}", env, build)
    run = f"{build / 'memory_model'} {sealed} k3y image image.bin {by_memory}"
    strace = shutil.which("strace")
    trace = build / f"trace-{folder}.txt"
    if strace is not None and "asan" not in build.name:  # LeakSanitizer refuses ptrace
        run = f"{strace} -f -qq -e trace=open,openat,creat,rename,link,mkdir -o {trace} {run}"
    text = shell(run, env, build)
    assert text == f"output 0: shape (360, 10), 14400 bytes written to {by_memory}\n"
    assert by_memory.read_bytes() == by_file.read_bytes()
    if trace.exists():
        opened = [
            line
            for line in trace.read_text().splitlines()
            if re.search(r"O_WRONLY|O_RDWR|O_CREAT|creat\(|rename\(|link\(|mkdir\(", line)
            and "= -1" not in line
        ]
        assert all(str(by_memory) in line for line in opened), opened
    wrong = build / "wrong.bin"
    done = subprocess.run(
        [str(build / "memory_model"), str(sealed), "other-key", "image", "image.bin", str(wrong)],
        capture_output=True,
        text=True,
        env=env,
        cwd=build,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1  # a wrong key: the bundle's lengths make no sense
    assert "the bundle" in done.stderr or "TVMModLoadFromMemory" in done.stderr, done.stderr


def test_aot_model_matches_tvms_golden(built: tuple[Path, dict[str, str]], artifacts: Path) -> None:
    build, env = built
    case = artifacts / "relay016" / "aot-so"
    with np.load(case / "golden.npz") as npz:
        data, expected = npz["data"], npz["output_0"]
    data.astype(np.float32).tofile(build / "data.bin")
    out = build / "aot.bin"
    text = shell(f"{build / 'aot_model'} {case / 'deploy.so'} data.bin {out}", env, build)
    assert text.splitlines()[0] == "input 0: data"
    assert out.read_bytes() == expected.astype("<f4").tobytes()


@pytest.mark.parametrize(
    ("era", "model"),
    [
        ("016", "cnn"),
        ("019", "tuple_out"),
        ("021", "control"),
        ("025", "onnx_cnn"),
        ("027", "mlp_dyn"),
    ],
)
def test_relax_model_matches_tvms_golden(
    built: tuple[Path, dict[str, str]], artifacts: Path, era: str, model: str
) -> None:
    build, env = built
    folder = artifacts / f"relax{era}" / model
    case = json.loads((folder / "case.json").read_text())
    run = case["runs"][0]
    work = build / f"relax{era}-{model}"
    work.mkdir(exist_ok=True)
    with np.load(folder / run["inputs"]) as npz:
        for k in range(len(case["params"])):
            np.save(work / f"arg{k}.npy", npz[f"arg{k}"])
    inputs = " ".join(str(work / f"arg{k}.npy") for k in range(len(case["params"])))
    text = shell(f"{build / 'relax_model'} {folder / 'model.so'} -o {work}/out {inputs}", env, work)
    with np.load(folder / run["golden"]) as npz:
        goldens = [npz[f"out{k}"] for k in range(len(npz.files))]
    lines = text.splitlines()
    assert len(lines) == len(goldens), text
    for k, want in enumerate(goldens):
        got = np.load(work / f"out{k}.npy")
        assert got.dtype == want.dtype, k
        assert got.shape == want.shape, k
        assert got.tobytes() == want.tobytes(), k
        assert lines[k].startswith(f"output {k}: "), text


def test_relax_model_takes_fills_and_names_mains_parameters(
    built: tuple[Path, dict[str, str]], artifacts: Path
) -> None:
    build, env = built
    so = artifacts / "relax027" / "control" / "model.so"
    assert shell(f"{build / 'relax_model'} {so} 4:float32=1 :bool=1", env, build) == (
        "output 0: float32 (4) 7 7 7 7\n"
    )
    text = shell(f"{build / 'relax_model'} {so} 4:float32=1 2>&1 || echo exit $?", env, build)
    assert text == "main takes 2 inputs: x flag\nexit 2\n"
