"""Latency of models compiled by ``tvmrt.compile``: tvmrt vs Relax VM vs ONNX Runtime.

For each test model (``tvmrt.compiler.testing``), the same fused Relax module is run

* by tvmrt's graph executor, from ``deploy.json`` + ``deploy.so`` + ``deploy.params``;
* by TVM's Relax VM: ``tvm.compile`` of that module with only the VM's lowering passes
  (reshape views, memory planning, VM codegen), so both run the very same PrimFuncs;
* by ONNX Runtime on the ONNX model (1 intra-op thread, and its default).

Untuned, and with ``--tune N`` also after MetaSchedule tuning with N trials per model
(both tvmrt and the VM then use the same tuning database).

Each side runs in its own process: compiling (and tuning) in one that exits before any
timing, since MetaSchedule leaves worker processes and threads behind; the Relax VM, loaded
from the exported ``vm.so``, in another; tvmrt in one that never imports TVM (as in a
deployment); ONNX Runtime in the parent. The tvmrt and VM processes are measured in
alternating rounds, so both see the same machine state. Latency is
the median over ``--repeat`` measurements of the mean of ``--number`` runs, with the
inputs already set: tvmrt ``GraphModule.benchmark`` (``run``), the VM ``time_evaluator``
of ``invoke_stateful`` after ``set_input``, ONNX Runtime ``InferenceSession.run``.

    .venv/bin/python bench/compile.py                 # untuned
    .venv/bin/python bench/compile.py --tune 64       # and tuned, 64 trials per model
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

MODELS = ["cnn", "mlp", "residual", "transformer", "two_outputs"]


def _timings(fn: Any, number: int, repeat: int, min_repeat_ms: float) -> float:
    """Median over ``repeat`` of the mean time of ``number`` calls (grown to last at least
    ``min_repeat_ms``), in seconds."""
    fn()
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    number = max(number, int(min_repeat_ms / 1e3 / once) + 1)
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number)
    return statistics.median(samples)


# -- worker: compile with tvmrt.compile and time the Relax VM (imports TVM) ------------------


def _vm_pipeline(target: Any) -> Any:
    """The VM lowering passes only: the module is legalized and fused already."""
    import tvm
    from tvm import relax

    passes = [
        relax.transform.RewriteDataflowReshape(),
        relax.transform.ToNonDataflow(),
        relax.transform.RemovePurityChecking(),
        relax.transform.CallTIRRewrite(),
        relax.transform.StaticPlanBlockMemory(),
        relax.transform.LowerAllocTensor(),
        relax.transform.KillAfterLastUse(),
        relax.transform.LowerRuntimeBuiltin(),
        relax.transform.ComputePrimValue(),
        relax.transform.VMShapeLower(),
        relax.transform.AttachGlobalSymbol(),
    ]

    @tvm.transform.module_pass(opt_level=0)
    def pipeline(mod: Any, _ctx: Any) -> Any:
        with target:
            return tvm.transform.Sequential(passes)(mod)

    return pipeline


def compile_model(job: dict[str, Any]) -> dict[str, Any]:
    """tvmrt.compile (and tune), and the Relax VM executable of the same module (``vm.so``).

    Runs in a process of its own that exits afterwards: MetaSchedule leaves worker
    processes and threads behind, which must not share the CPUs with the timing.
    """
    import io

    import tvm

    import tvmrt
    from tvmrt.compiler import testing

    name, out_dir, trials = job["name"], job["out_dir"], job["tune"]
    model_path = os.path.join(out_dir, f"{name}.onnx")
    shapes = testing.INPUT_SHAPES.get(name)
    result = tvmrt.compile(
        model_path,
        input_shapes=shapes,
        tune=trials or None,
        output_dir=out_dir,
        progress=sys.stderr if trials else io.StringIO(),
    )
    # the very module tvmrt.compile emitted the graph from: the same PrimFuncs
    target = tvm.target.Target(result.target)
    ex = tvm.compile(result.relax_module, target=target, relax_pipeline=_vm_pipeline(target))
    ex.export_library(os.path.join(out_dir, "vm.so"))
    return {
        "name": name,
        "input_names": list(result.input_names),
        "compile_s": result.timings.get("total", 0.0),
        "tune_s": result.timings.get("tune", 0.0),
        "kernels": len(result.kernels),
        "kept_untuned": len(result.tuning.kept_untuned) if result.tuning else 0,
        "nodes": result.num_nodes,
        "graph_json": result.graph_json,
        "lib": result.lib,
        "params": result.params,
    }


def worker_tvm(job: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """Load ``vm.so`` into a Relax VM; time ``invoke_stateful`` on request."""
    import tvm
    from tvm import relax

    out_dir = job["out_dir"]
    dev = tvm.cpu()
    vm = relax.VirtualMachine(tvm.runtime.load_module(os.path.join(out_dir, "vm.so")), dev)
    data = np.load(os.path.join(out_dir, "inputs.npz"))
    vm.set_input("main", *[tvm.runtime.tensor(data[n], dev) for n in job["input_names"]])
    evaluator = vm.time_evaluator(
        "invoke_stateful",
        dev,
        number=job["number"],
        repeat=job["repeat"],
        min_repeat_ms=int(job["min_repeat_ms"]),
    )
    vm.invoke_stateful("main")
    outputs = vm.get_outputs("main")
    outs = outputs if isinstance(outputs, tvm.ir.Array | list | tuple) else [outputs]
    np.savez(os.path.join(out_dir, "vm_outputs.npz"), *[o.numpy() for o in outs])
    return {}, lambda: float(np.median(evaluator("main").results))


# -- worker: time tvmrt (never imports TVM) --------------------------------------------------


def worker_tvmrt(job: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    from tvmrt.contrib import graph_executor
    from tvmrt.runtime import cpu, load_module

    module = graph_executor.create(
        Path(job["graph_json"]).read_text(), load_module(job["lib"]), cpu()
    )
    module.load_params(Path(job["params"]).read_bytes())
    data = np.load(os.path.join(job["out_dir"], "inputs.npz"))
    module.set_input(**{k: data[k] for k in data.files})
    module.run()
    vm_out = np.load(os.path.join(job["out_dir"], "vm_outputs.npz"))
    same = all(
        np.allclose(module.get_output(i).numpy(), vm_out[f"arr_{i}"], rtol=1e-5, atol=1e-6)
        for i in range(module.get_num_outputs())
    )
    leaked = sorted(m for m in sys.modules if m.split(".")[0] in ("tvm", "tvm_ffi"))

    def measure() -> float:
        result = module.benchmark(
            cpu(), repeat=job["repeat"], number=job["number"], min_repeat_ms=job["min_repeat_ms"]
        )
        return float(result.median)

    return {"same_as_vm": same, "tvm_imported": leaked}, measure


class Worker:
    """A worker process: set up once (prints a JSON line), then one timing per request."""

    def __init__(self, kind: str, job: dict[str, Any]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", kind],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.info = self._ask(json.dumps(job))

    def _ask(self, line: str) -> Any:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline()
        if not reply:
            raise SystemExit(f"worker {self.proc.args} died (exit {self.proc.wait()})")
        return json.loads(reply)

    def measure(self) -> float:
        return float(self._ask("time"))

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def serve(kind: str) -> int:
    """Worker side of :class:`Worker`: the job on the first stdin line, then ``time`` lines."""
    job = json.loads(sys.stdin.readline())
    # replies go through a copy of stdout; anything else printed (TVM logs) goes to stderr
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if kind == "compile":
        print(json.dumps(compile_model(job)), file=replies, flush=True)
        return 0
    info, measure = worker_tvm(job) if kind == "tvm" else worker_tvmrt(job)
    print(json.dumps(info), file=replies, flush=True)
    for line in sys.stdin:
        if line.strip() == "time":
            print(json.dumps(measure()), file=replies, flush=True)
    return 0


# -- parent: ONNX Runtime and the table -----------------------------------------------------


def time_ort(model: Any, inputs: dict[str, np.ndarray], threads: int, args: Any) -> float:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    if threads:
        opts.intra_op_num_threads = threads
    session = ort.InferenceSession(
        model.SerializeToString(), opts, providers=["CPUExecutionProvider"]
    )
    return _timings(lambda: session.run(None, inputs), args.number, args.repeat, args.min_repeat_ms)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=MODELS, choices=MODELS)
    parser.add_argument("--tune", type=int, default=0, metavar="N", help="also tuned, N trials")
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--number", type=int, default=20)
    parser.add_argument("--out", metavar="DIR", help="keep the artifacts here (default: temp)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    parser.add_argument("--rounds", type=int, default=9, help="alternating tvmrt/VM rounds")
    parser.add_argument("--min-repeat-ms", type=int, default=20)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return serve(args.worker)

    import onnx

    from tvmrt.compiler import testing

    root = Path(args.out or tempfile.mkdtemp(prefix="tvmrt-bench-compile-"))
    rows = []
    for name in args.models:
        model = testing.MODELS[name]()
        inputs = testing.random_inputs(model, testing.INPUT_SHAPES.get(name))
        ort1 = time_ort(model, inputs, 1, args)
        ort_default = time_ort(model, inputs, 0, args)
        for trials in [0] + ([args.tune] if args.tune else []):
            out_dir = root / f"{name}-{'tuned' if trials else 'untuned'}"
            out_dir.mkdir(parents=True, exist_ok=True)
            onnx.save(model, str(out_dir / f"{name}.onnx"))
            np.savez(out_dir / "inputs.npz", **inputs)
            job = {"name": name, "out_dir": str(out_dir), "tune": trials, "repeat": args.repeat,
                   "number": args.number, "min_repeat_ms": args.min_repeat_ms}  # fmt: skip
            compiler = Worker("compile", job)  # tvmrt.compile (+ tuning) and vm.so; exits
            compiled = compiler.info
            compiler.close()
            job = {**job, **compiled}
            vm = Worker("tvm", job)  # times the Relax VM on request
            rt = Worker("tvmrt", job)
            if rt.info["tvm_imported"]:
                raise SystemExit(f"the tvmrt worker imported {rt.info['tvm_imported']}")
            vm_times, rt_times = [], []
            for k in range(args.rounds):  # alternate, so both see the same machine state
                first, second = (vm, rt) if k % 2 == 0 else (rt, vm)
                a, b = first.measure(), second.measure()
                vm_times.append(a if first is vm else b)
                rt_times.append(b if first is vm else a)
            vm.close()
            rt.close()
            rows.append({"model": name, "tuned": trials, **compiled, **rt.info,
                         "vm": statistics.median(vm_times), "tvmrt": statistics.median(rt_times),
                         "ort1": ort1, "ort": ort_default})  # fmt: skip
            r = rows[-1]
            print(
                f"{name:12s} {'tuned ' + str(trials) if trials else 'untuned':10s} "
                f"tvmrt {r['tvmrt'] * 1e6:9.1f} us  vm {r['vm'] * 1e6:9.1f} us  "
                f"ort(1t) {ort1 * 1e6:8.1f} us  ort {ort_default * 1e6:8.1f} us  "
                f"tvmrt/vm {r['tvmrt'] / r['vm']:.2f}  same outputs {r['same_as_vm']}",
                flush=True,
            )
    print()
    print("| model | tuning | nodes | kernels (untuned kept) | tvmrt µs | Relax VM µs | "
          "ORT 1 thread µs | ORT default µs | tvmrt / VM | tvmrt / ORT 1t |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        tuning = f"{r['tuned']} trials" if r["tuned"] else "untuned"
        kernels = f"{r['kernels']} ({r['kept_untuned']})" if r["tuned"] else str(r["kernels"])
        print(
            f"| {r['model']} | {tuning} | {r['nodes']} | {kernels} | "
            f"{r['tvmrt'] * 1e6:.1f} | {r['vm'] * 1e6:.1f} | {r['ort1'] * 1e6:.1f} | "
            f"{r['ort'] * 1e6:.1f} | {r['tvmrt'] / r['vm']:.2f} | {r['tvmrt'] / r['ort1']:.2f} |"
        )
    slower = [r["model"] for r in rows if r["tvmrt"] > r["vm"]]
    print(
        f"\ntvmrt <= Relax VM on every model: {not slower}"
        + (f" (not: {slower})" if slower else "")
    )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
