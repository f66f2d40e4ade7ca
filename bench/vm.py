"""The Relay VM's own overhead: per instruction, on cnn-static against the graph executor,
and on dyn-batch-mlp at batch 1, 3 and 64.

Three measurements, each paired (the two sides alternate in one loop, medians reported):

* ``dispatch``: an executable of ``--moves`` ``Move`` instructions (no kernels) against a
  plain Python loop doing the same list copies: the interpreter's cost per instruction.
* ``cnn-static``: ``relayvm/cnn-static`` through the VM (``vm.so``) against the same CNN
  (same weights, same input) built by ``relay.build`` and run by tvmrt's graph executor
  (``relay016/systemlib-so``). Both call 8 kernels; the difference is the VM's overhead
  (its 55 other instructions and its per-call argument packing).
* ``dyn-batch-mlp``: VM latency at each batch size, and the time inside the kernels
  (timed by the profiler hook in a separate pass), so ``VM - kernels`` is the overhead.

    python bench/vm.py [--repeat 300] [--moves 2000] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tvmrt import runtime
from tvmrt.artifact import find_artifact, load_artifact
from tvmrt.artifact.devices import set_kernel_threads
from tvmrt.runtime import vm as vm_rt
from tvmrt.runtime.vm import opcodes as op
from tvmrt.runtime.vm.format import ExecutableData, VMFunction, write_executable

HERE = Path(__file__).resolve().parent
ARTIFACTS = Path(os.environ.get("TVMRT_ARTIFACTS", HERE.parents[1] / "shared" / "artifacts"))


def paired(a: Callable[[], object], b: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median seconds of ``a`` and of ``b``, run alternately ``repeat`` times each."""
    for _ in range(max(5, repeat // 10)):
        a()
        b()
    ta, tb = [], []
    for _ in range(repeat):
        start = time.perf_counter_ns()
        a()
        ta.append(time.perf_counter_ns() - start)
        start = time.perf_counter_ns()
        b()
        tb.append(time.perf_counter_ns() - start)
    return statistics.median(ta) / 1e9, statistics.median(tb) / 1e9


def dispatch(moves: int, repeat: int) -> None:
    code = [(op.LOAD_CONSTI, 1, 0)] + [(op.MOVE, i % 2, 1 - i % 2) for i in range(moves)]
    func = VMFunction("main", 2, [], [], [*code, (op.RET, 0)])
    data = ExecutableData("0.16.dev0", [(1, 0, "")], 0, ["main"], [], [], [], {}, [func])
    exe = vm_rt.Executable.load_exec(write_executable(data), runtime.PyModule({}))
    invoke = vm_rt.VirtualMachine(exe, runtime.cpu()).module["invoke"]
    regs: list[object] = [1, None]

    def bare() -> None:
        for i in range(moves):
            regs[1 - i % 2] = regs[i % 2]

    t_vm, t_bare = paired(lambda: invoke("main"), bare, repeat)
    n = moves + 2
    print(f"dispatch ({n} instructions)")
    print(f"  VM        {t_vm / n * 1e9:8.1f} ns/instruction")
    print(f"  bare loop {t_bare / moves * 1e9:8.1f} ns/move   ratio {t_vm / t_bare:.2f}x")


def cnn_static(repeat: int) -> None:
    folder = ARTIFACTS / "relayvm" / "cnn-static"
    with np.load(folder / "golden.npz") as g:
        data, want = g["data"], g["output_0"]
    vm = vm_rt.VirtualMachine(runtime.load_module(str(folder / "vm.so")), runtime.cpu())
    vm.set_input("main", data)
    invoke = vm.module["invoke"]
    graph = load_artifact(find_artifact(ARTIFACTS / "relay016" / "systemlib-so" / "deploy.so"))
    graph.executor.set_input("data", data)
    run = graph.executor.run
    assert np.array_equal(invoke("main").numpy(), want)
    run()
    close = np.abs(graph.executor.get_output(0).numpy() - want).max()
    t_vm, t_graph = paired(lambda: invoke("main"), run, repeat)
    print("cnn-static (8 kernels; VM: 63 instructions)")
    print(f"  VM              {t_vm * 1e6:8.1f} us")
    print(f"  graph executor  {t_graph * 1e6:8.1f} us   (max |diff| to VM golden {close:.1e})")
    print(
        f"  ratio {t_vm / t_graph:.2f}x, VM overhead {(t_vm - t_graph) * 1e6:.1f} us "
        f"= {(t_vm - t_graph) / 63 * 1e6:.2f} us per instruction"
    )


def dyn_batch(repeat: int) -> None:
    folder = ARTIFACTS / "relayvm" / "dyn-batch-mlp"
    vm = vm_rt.VirtualMachine(runtime.load_module(str(folder / "vm.so")), runtime.cpu())
    machine = vm.module
    invoke = machine["invoke"]
    rng = np.random.default_rng(0)
    inputs = {b: rng.standard_normal((b, 16)).astype("float32") for b in (1, 3, 64)}
    kernel_ns: list[int] = []

    def hook(index: int, fn: Callable[..., object], fn_args: tuple[object, ...], _: object) -> None:
        start = time.perf_counter_ns()
        fn(*fn_args)
        kernel_ns.append(time.perf_counter_ns() - start)

    print("dyn-batch-mlp (VM: 96 instructions, 12 kernel calls)")
    print(f"  {'batch':>5} {'VM us':>9} {'kernels us':>11} {'overhead us':>12} {'us/row':>8}")
    times: dict[int, list[int]] = {b: [] for b in inputs}
    kernels: dict[int, list[int]] = {b: [] for b in inputs}
    interp = machine.interp  # type: ignore[attr-defined]
    for _ in range(repeat):  # batch sizes and the two passes alternate: load hits all alike
        for b, x in inputs.items():
            vm.set_input("main", x)
            start = time.perf_counter_ns()
            invoke("main")
            times[b].append(time.perf_counter_ns() - start)
            interp.kernel_hook = hook  # a second invoke, timing only the kernels
            kernel_ns.clear()
            invoke("main")
            interp.kernel_hook = None
            kernels[b].append(sum(kernel_ns))
    for b in inputs:
        t = statistics.median(times[b]) / 1e3
        k = statistics.median(kernels[b]) / 1e3
        print(f"  {b:>5} {t:>9.1f} {k:>11.1f} {t - k:>12.1f} {t / b:>8.2f}")


def main() -> None:
    """Measure and print the three tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=300)
    parser.add_argument("--moves", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=1, help="kernel threads (default 1)")
    args = parser.parse_args()
    set_kernel_threads(args.threads)
    dispatch(args.moves, args.repeat)
    cnn_static(args.repeat)
    dyn_batch(args.repeat)


if __name__ == "__main__":
    main()
