"""tvmrt's Relay VM in C against TVM 0.16's C++ VM, both driven from C, and against tvmrt's
Python VM: per-invoke time on relayvm/cnn-static and relayvm/dyn-batch-mlp (batch 1 and
64), and the per-instruction cost on an executable of Move instructions.

Method
------
``tests/native/c/run_vm.c`` (load vm.so with TVMModLoadFromFile, vm_load_executable,
init(cpu, pooled), set_input, then ``invoke_stateful`` timed in a loop) is compiled twice
from the same source: against tvmrt's ``libtvmrt_runtime.so`` (``make native``, -O2) and
against TVM 0.16's ``libtvm_runtime.so`` from the hhb-tvm 3.2.3 wheel (the peer the tests
make). Each program prints the median of 5 batches of ``--repeat`` invokes. Each round runs
the two programs as separate processes, in alternating order, for every case; the ratio is
taken per round, and the median over ``--rounds`` rounds is reported. One kernel thread
(``TVM_NUM_THREADS=1``). The Python VM (``tvmrt.runtime.vm``, today's) is timed in this
process the same way (median of 5 batches of ``--repeat`` ``invoke`` calls).

The dispatch row runs an executable of ``--moves`` Move instructions (no kernels; its
library is cnn-static's lib.so) through ``runtime.Load_Executable``: time per invoke
divided by the instruction count.

    python bench/vm_native.py [--rounds 5] [--repeat 200] [--moves 2000]
        [--tvm016 PEER_VENV]   # default: $TVMRT_PEERS_DIR/tvm016 or build/peers/tvm016
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
from c_runtime import tvm016_package  # bench/ is the script's folder

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(os.environ.get("TVMRT_ARTIFACTS", REPO.parent / "shared" / "artifacts"))
SOURCE = REPO / "tests" / "native" / "c" / "run_vm.c"


def _build(work: Path, tvm016: Path) -> dict[str, Path]:
    native = work / "native"
    subprocess.run(["make", "-s", "native", f"NATIVE_DIR={native}"], cwd=REPO, check=True)
    exes = {"tvmrt C VM": work / "run_vm_tvmrt", "TVM 0.16 C++ VM": work / "run_vm_tvm016"}
    base = ["cc", "-std=c11", "-D_GNU_SOURCE", "-O2", str(SOURCE)]
    subprocess.run(
        [*base, f"-I{REPO / 'src/tvmrt/include'}", f"-L{native}", "-ltvmrt_runtime",
         f"-Wl,-rpath,{native}", "-lpthread", "-o", str(exes["tvmrt C VM"])],
        check=True,
    )  # fmt: skip
    subprocess.run(
        [*base, f"-I{tvm016 / 'include'}", f"-I{tvm016 / 'dlpack/include'}", f"-L{tvm016}",
         "-ltvm_runtime", f"-Wl,-rpath,{tvm016}", "-o", str(exes["TVM 0.16 C++ VM"])],
        check=True,
    )  # fmt: skip
    return exes


def _tensor_line(path: Path, arr: np.ndarray) -> str:
    """run_vm's line for a float32 input (its bytes written to `path`)."""
    arr = np.array(arr, dtype="float32", order="C")
    path.write_bytes(arr.tobytes())
    return " ".join(["tensor 2 32", str(arr.ndim), *map(str, arr.shape), str(path)])


def _spec(work: Path, name: str, inputs: list[np.ndarray]) -> Path:
    lines = [f"run {name}"]
    lines += [_tensor_line(work / f"{name}_{i}.in", x) for i, x in enumerate(inputs)]
    spec = work / f"{name}.spec"
    spec.write_text("\n".join([*lines, "end"]) + "\n", encoding="utf-8")
    return spec


def _moves_folder(work: Path, moves: int) -> Path:
    from tvmrt.runtime.vm import opcodes as op
    from tvmrt.runtime.vm.format import ExecutableData, VMFunction, write_executable

    code = [(op.LOAD_CONSTI, 1, 0)] + [(op.MOVE, i % 2, 1 - i % 2) for i in range(moves)]
    func = VMFunction("main", 2, [], [], [*code, (op.RET, 0)])
    data = ExecutableData("0.16.dev0", [(1, 0, "")], 0, ["main"], [], [], [], {}, [func])
    folder = work / "moves"
    folder.mkdir()
    (folder / "code.ro").write_bytes(write_executable(data))
    shutil.copy(ARTIFACTS / "relayvm" / "cnn-static" / "lib.so", folder / "lib.so")
    return folder


def _c_time(exe: Path, mode: str, folder: Path, spec: Path, work: Path, repeat: int) -> float:
    env = dict(os.environ, REPEAT=str(repeat), TVM_NUM_THREADS="1")
    out = subprocess.run(
        [str(exe), mode, str(folder), str(spec), str(work)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        sys.exit(f"{exe.name} on {folder.name} failed:\n{out.stderr[-3000:]}")
    line = next(x for x in out.stdout.splitlines() if "ns per invoke" in x)
    return float(line.split(":")[1].split()[0])


def _python_time(folder: Path, inputs: list[np.ndarray], repeat: int) -> float:
    import tvmrt.runtime as rt
    from tvmrt.artifact.devices import set_kernel_threads
    from tvmrt.runtime import vm as vm_rt

    set_kernel_threads(1)
    vm = vm_rt.VirtualMachine(rt.load_module(str(folder / "vm.so")), rt.cpu())
    vm.set_input("main", *inputs)
    invoke = vm.module["invoke_stateful"]
    per = []
    for _ in range(5):
        start = time.perf_counter_ns()
        for _ in range(repeat):
            invoke("main")
        per.append((time.perf_counter_ns() - start) / repeat)
    return statistics.median(per)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    peers = Path(os.environ.get("TVMRT_PEERS_DIR", REPO / "build" / "peers"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--moves", type=int, default=2000)
    parser.add_argument("--tvm016", type=Path, default=peers / "tvm016")
    args = parser.parse_args()
    tvm016 = tvm016_package(args.tvm016)
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        exes = _build(work, tvm016)
        vm_dir = ARTIFACTS / "relayvm"
        with np.load(vm_dir / "cnn-static" / "golden.npz") as g:
            cnn_in = [g["data"]]
        mlp = vm_dir / "dyn-batch-mlp"
        cases = {
            "cnn-static": ("so", vm_dir / "cnn-static", cnn_in),
            "dyn-batch-mlp b1": ("so", mlp, [rng.standard_normal((1, 16)).astype("float32")]),
            "dyn-batch-mlp b64": ("so", mlp, [rng.standard_normal((64, 16)).astype("float32")]),
            f"dispatch ({args.moves + 2} instr)": ("ro", _moves_folder(work, args.moves), []),
        }
        specs = {name: _spec(work, f"case{i}", c[2]) for i, (name, c) in enumerate(cases.items())}
        names = list(exes)
        times: dict[tuple[str, str], list[float]] = {}
        ratios: dict[str, list[float]] = {name: [] for name in cases}
        for r in range(args.rounds):
            order = names if r % 2 == 0 else names[::-1]
            for case, (mode, folder, _) in cases.items():
                got = {}
                for prog in order:
                    got[prog] = _c_time(exes[prog], mode, folder, specs[case], work, args.repeat)
                    times.setdefault((case, prog), []).append(got[prog])
                ratios[case].append(got[names[0]] / got[names[1]])
        py = {
            case: _python_time(folder, inputs, args.repeat)
            for case, (mode, folder, inputs) in cases.items()
            if mode == "so"
        }
    print(f"{args.rounds} rounds, {args.repeat} invokes x 5 batches per program, 1 thread")
    print("| executable | TVM 0.16 C++ VM | tvmrt C VM | ratio | tvmrt Python VM | C/Python |")
    print("|---|---:|---:|---:|---:|---:|")
    for case in cases:
        t_tvm = statistics.median(times[(case, names[1])])
        t_c = statistics.median(times[(case, names[0])])
        ratio = statistics.median(ratios[case])
        if case in py:
            tail = f"{py[case] / 1e3:.1f} us | {t_c / py[case]:.2f}x |"
        else:
            n = args.moves + 2
            tail = f"({t_tvm / n:.1f} vs {t_c / n:.1f} ns/instr) | |"
        print(f"| {case} | {t_tvm / 1e3:.1f} us | {t_c / 1e3:.1f} us | {ratio:.2f}x | {tail}")


if __name__ == "__main__":
    main()
