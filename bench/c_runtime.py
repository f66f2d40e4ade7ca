"""MobileNet v1 from C++ with tvmrt's C runtime, against TVM 0.16's own C++ runtime and
against ``tvmrt run``: latency of one inference and cold start (process start to first
output), paired.

Method
------
``bench/c_runtime_main.cc`` (the deployment guide's flow: load the library, create the graph
executor, load params, set the input, run, get the output) is compiled twice from the same
source: against tvmrt's headers and ``libtvmrt_runtime.so`` (``tvmrt config --cflags
--libs``), and against TVM 0.16's headers and ``libtvm_runtime.so`` from the hhb-tvm 3.2.3
wheel (``-D_GLIBCXX_USE_CXX11_ABI=0``). Each round runs, in a rotated order:

* **cold start**: each program once (no extra runs), and ``tvmrt run FOLDER -i data.npz``
  (Python start, import, load, one inference, print); the wall time of the whole process,
  from spawn to exit, with the page cache warm;
* **latency**: each program with ``--runs`` more ``run()`` calls timed in C++ (median), and
  ``tvmrt bench FOLDER --number 1 --repeat RUNS`` (median of ``run()`` in Python).

Ratios are taken per round against TVM 0.16's C++ program, then the median over the
rounds is reported. Every C++ output is checked byte for byte against ``golden.npz``.
All three use ``--threads`` threads (``TVM_NUM_THREADS``).

Usage::

    .venv/bin/python bench/c_runtime.py [--rounds 5] [--runs 10] [--threads 2]
        [--tvm016 PEER_VENV]   # default: $TVMRT_PEERS_DIR/tvm016 or build/peers/tvm016

The TVM 0.16 peer venv is the one the tests make (tests/support/peers.py).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(os.environ.get("TVMRT_ARTIFACTS", REPO.parent / "shared" / "artifacts"))
SOURCE = Path(__file__).with_name("c_runtime_main.cc")


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = (time.perf_counter() - start) * 1e3
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return wall, done.stdout


def _value(stdout: str, key: str) -> float:
    for line in stdout.splitlines():
        if line.startswith(key + "="):
            return float(line.split("=", 1)[1])
    sys.exit(f"no {key}= in output:\n{stdout}")


def tvm016_package(venv: Path) -> Path:
    """The ``tvm`` package folder (with libtvm_runtime.so) of the hhb-tvm venv ``venv``."""
    found = sorted(venv.glob("lib/python3*/site-packages/tvm/libtvm_runtime.so"))
    if not found:
        sys.exit(f"no hhb-tvm install in {venv} (run the native tests once, or pass --tvm016)")
    return found[0].parent


def _build(work: Path, tvm016: Path) -> dict[str, Path]:
    native = work / "native"
    subprocess.run(["make", "-s", "native", f"NATIVE_DIR={native}"], cwd=REPO, check=True)
    env = dict(os.environ, TVMRT_LIBDIR=str(native), PYTHONPATH=str(REPO / "src"))
    flags = subprocess.run(
        [sys.executable, "-m", "tvmrt.config", "--cflags", "--libs"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    exes = {"C++ tvmrt": work / "cxx_tvmrt", "C++ TVM 0.16": work / "cxx_tvm016"}
    subprocess.run(
        ["g++", "-std=c++17", "-O2", str(SOURCE), *flags, "-o", str(exes["C++ tvmrt"])],
        check=True,
    )
    includes = [f"-I{tvm016 / d}" for d in ("include", "dlpack/include", "dmlc-core/include")]
    subprocess.run(
        ["g++", "-std=c++17", "-O2", "-w", "-D_GLIBCXX_USE_CXX11_ABI=0", str(SOURCE), *includes,
         f"-L{tvm016}", f"-Wl,-rpath,{tvm016}", "-ltvm_runtime", "-o",
         str(exes["C++ TVM 0.16"])],
        check=True,
    )  # fmt: skip
    return exes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    peers = Path(os.environ.get("TVMRT_PEERS_DIR", REPO / "build" / "peers"))
    parser.add_argument("--tvm016", type=Path, default=peers / "tvm016")
    args = parser.parse_args()

    source = ARTIFACTS / "mobilenet_v1"
    golden = np.load(source / "golden.npz")
    tvm016 = tvm016_package(args.tvm016)
    with tempfile.TemporaryDirectory(prefix="tvmrt-c-runtime-") as tmp:
        work = Path(tmp)
        exes = _build(work, tvm016)
        model = work / "mobilenet_v1"
        model.mkdir()
        for name in ("deploy_lib.so", "deploy_graph.json", "deploy_param.params"):
            shutil.copy(source / name, model / name)
        golden["data"].astype("<f4").tofile(model / "cat.bin")
        np.savez(model / "data.npz", data=golden["data"])
        env = dict(os.environ, TVM_NUM_THREADS=str(args.threads), PYTHONPATH=str(REPO / "src"))
        env.pop("LD_LIBRARY_PATH", None)
        python = [sys.executable, "-m", "tvmrt"]
        threads = ["--threads", str(args.threads)]
        names = ["C++ tvmrt", "C++ TVM 0.16", "tvmrt run"]
        cold: dict[str, list[float]] = {n: [] for n in names}
        latency: dict[str, list[float]] = {n: [] for n in names}
        for r in range(args.rounds):
            for name in names[r % 3 :] + names[: r % 3]:
                if name == "tvmrt run":
                    cmd = [*python, "run", str(model), "-i", str(model / "data.npz"), *threads]
                    cold[name].append(_run(cmd, model, env)[0])
                    cmd = [*python, "bench", str(model), "-i", str(model / "data.npz"),
                           "--number", "1", "--repeat", str(args.runs), "--warmup", "1",
                           "--json", *threads]  # fmt: skip
                    stdout = _run(cmd, model, env)[1]
                    latency[name].append(float(stdout.split('"median": ')[1].split(",")[0]))
                    continue
                wall, _ = _run([str(exes[name]), "0", "out.bin"], model, env)
                cold[name].append(wall)
                out = (model / "out.bin").read_bytes()
                if out != golden["output_0"].astype("<f4").tobytes():
                    sys.exit(f"{name}: output differs from golden.npz output_0")
                _, stdout = _run([str(exes[name]), str(args.runs), "out.bin"], model, env)
                latency[name].append(_value(stdout, "run_ms"))
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)

    ref = "C++ TVM 0.16"
    print(f"MobileNet v1, {args.threads} threads, {args.rounds} rounds x {args.runs} runs")
    print("| program | cold start ms | ratio vs TVM 0.16 | latency ms | ratio vs TVM 0.16 |")
    print("|---|---:|---:|---:|---:|")
    for name in names:
        cold_ratio = statistics.median(a / b for a, b in zip(cold[name], cold[ref], strict=True))
        lat_ratio = statistics.median(
            a / b for a, b in zip(latency[name], latency[ref], strict=True)
        )
        print(
            f"| {name} | {statistics.median(cold[name]):.0f} | {cold_ratio:.2f}x "
            f"| {statistics.median(latency[name]):.1f} | {lat_ratio:.2f}x |"
        )
    print("outputs of both C++ programs equal golden.npz output_0 byte for byte")


if __name__ == "__main__":
    main()
