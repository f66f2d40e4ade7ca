"""tvmrt's Relax VM against TVM 0.27's own, per invoke, from Python and from C; and the
ONNX-imported CNN end to end against ONNX Runtime.

Method
------
The artifacts are the suite's TVM 0.27 fixtures (``build/fixtures/relax027``, built on
first use by ``tests/fixtures/build_relax.py``): ``mlp_dyn`` (an MLP, batch 1),
``cnn``, ``onnx_cnn`` (the ONNX import, weights as constants), ``tuple_out`` (a nested
tuple result) and ``compiled`` (the MLP built with ``exec_mode="compiled"``), each with
its recorded inputs. One kernel thread everywhere (``TVM_NUM_THREADS=1``,
``OMP_NUM_THREADS=1``, ONNX Runtime's intra/inter-op threads 1).

* **Python**: ``vm["main"](*args)`` with the arguments made once (``tvmrt.nd.array`` /
  ``tvm.runtime.tensor``), timed in ``--batches`` batches of ``--repeat`` calls after a
  warm-up; a process reports its median batch. tvmrt's process imports tvmrt only,
  TVM's imports TVM only.
* **C**: ``bench/c/relax_invoke_tvmrt.c`` (TVM's C API over ``libtvmrt_runtime``, ``make
  native``, -O2) and ``bench/c/relax_invoke_tvm.c`` (tvm-ffi's C API over the wheel's
  ``libtvm_runtime``): load, ``vm_load_executable``, ``vm_initialization(cpu, pooled)``,
  ``main`` with array handles; median of batches. Both print the first output's sum, which
  must agree.
* **ONNX CNN end to end**: numpy in, numpy out: tvmrt ``vm["main"](nd.array(x)).numpy()``,
  ONNX Runtime ``session.run(None, {name: x})`` on the same ``model.onnx``.

Each round runs every contender of a case as a separate process, in alternating order;
the ratio (tvmrt / the other) is taken per round and the median over ``--rounds`` rounds
is reported with its range.

    python bench/relax.py [--rounds 7] [--repeat 2000] [--batches 5] [--only python,c,onnx]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
MODELS = ("mlp_dyn", "cnn", "onnx_cnn", "tuple_out", "compiled")
ONE_THREAD = {"TVM_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}

# the worker: run by a fresh interpreter per measurement
WORKER = r"""
import json, sys, time
import numpy as np
kind, folder, repeat, batches = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
inputs = np.load(folder + "/run0_inputs.npz")
arrays = [inputs[f"arg{i}"] for i in range(len(inputs.files))]
if kind == "ort":
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(folder + "/model.onnx", opts, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    call = lambda: sess.run(None, {name: arrays[0]})[0]
else:
    if kind.startswith("tvmrt"):
        import tvmrt
        from tvmrt import relax
        vm = relax.VirtualMachine(tvmrt.runtime.load_module(folder + "/model.so"), tvmrt.cpu())
        tensor = tvmrt.nd.array
    else:
        import tvm
        from tvm import relax
        vm = relax.VirtualMachine(tvm.runtime.load_module(folder + "/model.so"), tvm.cpu())
        tensor = tvm.runtime.tensor
    main = vm["main"]
    if kind.endswith("-e2e"):
        call = lambda: main(*[tensor(a) for a in arrays]).numpy()
    else:
        args = [tensor(a) for a in arrays]
        call = lambda: main(*args)
for _ in range(max(repeat // 10, 10)):
    call()
times = []
for _ in range(batches):
    start = time.perf_counter()
    for _ in range(repeat):
        call()
    times.append((time.perf_counter() - start) / repeat * 1e6)
print(json.dumps({"us": sorted(times)[len(times) // 2]}))
"""


def _fixtures() -> Path:
    sys.path.insert(0, str(REPO / "tests"))
    from support.fixtures import built_fixtures  # the suite's builder and cache

    return Path(built_fixtures("build_relax.py", "tvm027", "relax027"))


def _python_time(kind: str, folder: Path, repeat: int, batches: int) -> float:
    env = {**os.environ, **ONE_THREAD, "PYTHONPATH": str(REPO / "src")}
    out = subprocess.run(
        [sys.executable, "-c", WORKER, kind, str(folder), str(repeat), str(batches)],
        check=True, capture_output=True, text=True, env=env,
    )  # fmt: skip
    return float(json.loads(out.stdout.strip().splitlines()[-1])["us"])


def _build_c(work: Path) -> dict[str, Path]:
    import tvm
    import tvm_ffi

    native = work / "native"
    subprocess.run(["make", "-s", "native", f"NATIVE_DIR={native}"], cwd=REPO, check=True)
    tvm_lib = Path(tvm.__file__).parent / "lib"
    ffi = Path(tvm_ffi.__file__).parent
    src = REPO / "bench" / "c"
    exes = {"tvmrt": work / "relax_invoke_tvmrt", "tvm": work / "relax_invoke_tvm"}
    base = ["cc", "-std=c11", "-D_GNU_SOURCE", "-O2", "-Wall", "-Wextra"]
    subprocess.run(
        [*base, str(src / "relax_invoke_tvmrt.c"), f"-I{REPO / 'src/tvmrt/include'}",
         f"-L{native}", "-ltvmrt_runtime", f"-Wl,-rpath,{native}", "-o", str(exes["tvmrt"])],
        check=True,
    )  # fmt: skip
    subprocess.run(
        [*base, str(src / "relax_invoke_tvm.c"), f"-I{ffi / 'include'}", f"-L{tvm_lib}",
         f"-L{ffi / 'lib'}", "-Wl,--no-as-needed", "-ltvm_runtime", "-ltvm_ffi",
         f"-Wl,-rpath,{tvm_lib}:{ffi / 'lib'}", "-o", str(exes["tvm"])],
        check=True,
    )  # fmt: skip
    return exes


def _c_inputs(folder: Path, work: Path) -> list[str]:
    specs = []
    with np.load(folder / "run0_inputs.npz") as npz:
        for i in range(len(npz.files)):
            arr = np.ascontiguousarray(npz[f"arg{i}"], dtype=np.float32)
            path = work / f"{folder.name}_arg{i}.raw"
            arr.tofile(path)
            specs.append(f"{path}:{'x'.join(str(d) for d in arr.shape)}")
    return specs


def _c_time(
    exe: Path, folder: Path, specs: list[str], repeat: int, batches: int
) -> tuple[float, str]:
    env = {**os.environ, **ONE_THREAD}
    out = subprocess.run(
        [str(exe), str(folder / "model.so"), str(repeat), str(batches), *specs],
        check=True, capture_output=True, text=True, env=env,
    ).stdout  # fmt: skip
    fields = dict(line.split(" ", 1) for line in out.strip().splitlines())
    return float(fields["per_invoke_us"]), fields["checksum"]


def _paired(rounds: int, measure_a: object, measure_b: object) -> dict[str, float]:
    """Alternate the two measurements for ``rounds`` rounds: medians and the ratio a/b."""
    a_times, b_times, ratios = [], [], []
    for r in range(rounds):
        order = (measure_a, measure_b) if r % 2 == 0 else (measure_b, measure_a)
        got = {id(m): m() for m in order}  # type: ignore[operator]
        a, b = got[id(measure_a)], got[id(measure_b)]
        a_times.append(a)
        b_times.append(b)
        ratios.append(a / b)
    return {
        "a_us": statistics.median(a_times),
        "b_us": statistics.median(b_times),
        "ratio": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
    }


def _row(name: str, got: dict[str, float]) -> str:
    return (
        f"| {name:<10} | {got['a_us']:8.2f} | {got['b_us']:8.2f} | {got['ratio']:.2f}x "
        f"({got['ratio_min']:.2f}-{got['ratio_max']:.2f}) |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=2000)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--only", default="python,c,onnx")
    opts = parser.parse_args()
    parts = set(opts.only.split(","))
    root = _fixtures()
    rep, bat = opts.repeat, opts.batches
    if "python" in parts:
        print("\nPython, per invoke (us): tvmrt.relax.VirtualMachine vs TVM 0.27's")
        print("| model      |    tvmrt |  TVM 0.27 | ratio (range) |")
        for model in MODELS:
            folder = root / model
            got = _paired(
                opts.rounds,
                lambda f=folder: _python_time("tvmrt", f, rep, bat),
                lambda f=folder: _python_time("tvm", f, rep, bat),
            )
            print(_row(model, got), flush=True)
    if "c" in parts:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            exes = _build_c(work)
            print("\nC, per invoke (us): libtvmrt_runtime vs TVM 0.27's libtvm_runtime")
            print("| model      |    tvmrt |  TVM 0.27 | ratio (range) |")
            for model in MODELS:
                folder = root / model
                specs = _c_inputs(folder, work)
                sums: set[str] = set()

                def run(
                    kind: str, f: Path = folder, s: list[str] = specs, seen: set[str] = sums
                ) -> float:
                    us, checksum = _c_time(exes[kind], f, s, rep, bat)
                    seen.add(checksum)
                    return us

                got = _paired(opts.rounds, lambda: run("tvmrt"), lambda: run("tvm"))
                if len(sums) != 1:
                    raise SystemExit(f"{model}: the two runtimes' outputs differ: {sums}")
                print(_row(model, got), flush=True)
    if "onnx" in parts:
        folder = root / "onnx_cnn"
        print("\nONNX CNN end to end (us, numpy in and out): tvmrt vs ONNX Runtime 1 thread")
        print("| runtime    |    tvmrt |    other | ratio (range) |")
        got = _paired(
            opts.rounds,
            lambda: _python_time("tvmrt-e2e", folder, rep, bat),
            lambda: _python_time("ort", folder, rep, bat),
        )
        print(_row("ORT", got), flush=True)
        got = _paired(
            opts.rounds,
            lambda: _python_time("tvmrt-e2e", folder, rep, bat),
            lambda: _python_time("tvm-e2e", folder, rep, bat),
        )
        print(_row("TVM 0.27", got), flush=True)


if __name__ == "__main__":
    main()
