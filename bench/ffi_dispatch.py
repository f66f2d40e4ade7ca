"""Per-node overhead of ``GraphModule.run()`` over tvm-ffi kernels against a bare Python loop.

Kernels are built by ``apache-tvm`` in a subprocess (this process never imports ``tvm``):
``relu`` over 16 float32s, chained ``--nodes`` times (dispatch dominates), plus the
kernels ``--decision`` needs. Measured in one process, interleaved, medians of
``--repeat`` runs, microseconds per node:

* ``GraphModule.run()``: the executor (a straight-line program of prepared calls);
* bare Python loop: ``for fn, args in steps: fn(*args)`` over the executor's own prepared
  calls (the same native call objects, arguments and buffers);
* native replay: the same kernels with the same arguments called back to back from C
  (``tvmrt_time_ffi_call_sequence``), i.e. the kernels' own time;
* ctypes loop: the same kernels through ``ctypes`` with prebuilt argument arrays (the path
  tvmrt did not take);
* tvm_ffi loop (if ``apache-tvm-ffi`` is installed): ``tvm_ffi.load_module`` of the same
  file, functions called with prebuilt ``tvm_ffi.Tensor`` views of the same buffers.

``--decision`` also runs the checks behind tvmrt's choice of its own call path over
``apache-tvm-ffi``, each in a fresh subprocess: kernels whose error path goes through the
``__TVMFFIErrorSetRaisedFromCStr`` slot (TVM 0.22-0.23), ``target="c"`` kernels that import
``TVMBackendAllocWorkspace``, parallel kernels; and the import cost of both.

    python bench/ffi_dispatch.py [--nodes 200] [--repeat 300] [--decision] [--kernels DIR]
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np

from tvmrt import runtime
from tvmrt.contrib import graph_executor
from tvmrt.runtime import kernel_services
from tvmrt.runtime._ctypes_api import TVMFFIAny
from tvmrt.runtime.loaders import ffi
from tvmrt.testing import graphs

BUILD = r"""
import sys
import tvm
from tvm import te, topi

OUT, TARGET = sys.argv[1], {"kind": "llvm", "mcpu": "x86-64-v2"}


def relu():
    x = te.placeholder((16,), "float32", name="x")
    y = te.compute((16,), lambda i: te.max(x[i], 0.0), name="y")
    return te.create_prim_func([x, y]).with_attr("global_symbol", "relu")


def conv_relu():
    data = te.placeholder((1, 8, 16, 16), "float32", name="data")
    weight = te.placeholder((16, 8, 3, 3), "float32", name="weight")
    conv = topi.nn.relu(topi.nn.conv2d_nchw(data, weight, 1, 1, 1))
    f = te.create_prim_func([data, weight, conv]).with_attr("global_symbol", "conv_relu")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"conv_relu": f}))
    sch.work_on("conv_relu")
    sch.compute_inline(sch.get_sblock("pad_temp"))
    n, co = sch.get_loops(sch.get_sblock("conv2d_nchw"))[:2]
    sch.parallel(sch.fuse(n, co))
    return sch.mod["conv_relu"]


def bigbuf():
    a = te.placeholder((512, 1024), "float32", name="A")
    t = te.compute((512, 1024), lambda i, j: a[i, j] * 2.0, name="T")
    b = te.compute((512, 1024), lambda i, j: t[511 - i, j] + 1.0, name="B")
    return te.create_prim_func([a, b]).with_attr("global_symbol", "cbig")


tvm.compile(tvm.IRModule({"relu": relu()}), target=TARGET).export_library(f"{OUT}/relu.so")
tvm.compile(tvm.IRModule({"conv_relu": conv_relu()}), target=TARGET).export_library(
    f"{OUT}/conv.so"
)
tvm.compile(tvm.IRModule({"cbig": bigbuf()}), target="c").export_library(f"{OUT}/cbig.so")
"""

# A TVM 0.22-0.23 style kernel: prefixed name, errors through the context slot.
SLOT_ERROR_C = r"""
#include <stdint.h>
typedef struct { int32_t type_index; uint32_t pad; int64_t v; } Any;
__attribute__((weak)) void (*__TVMFFIErrorSetRaisedFromCStr)(const char*, const char*) = 0;
int __tvm_ffi_check(void* self, const Any* args, int n, Any* result) {
  if (n == 1) return 0;
  __TVMFFIErrorSetRaisedFromCStr("ValueError", "check expects one argument");
  return -1;
}
"""


def build_kernels(out: Path) -> None:
    """Build the kernels with apache-tvm in a subprocess."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "build.py").write_text(BUILD)
    subprocess.run([sys.executable, str(out / "build.py"), str(out)], check=True)
    (out / "slot_error.c").write_text(SLOT_ERROR_C)
    cc = ["cc", "-shared", "-fPIC", "-o", str(out / "slot_error.so"), str(out / "slot_error.c")]
    subprocess.run(cc, check=True)


def _median_ns(times: list[int]) -> float:
    return statistics.median(times)


def dispatch(kernels: Path, nodes: int, repeat: int) -> None:
    """Measure the call paths and print the table."""
    module = runtime.load_module(kernels / "relu.so")
    gmod = graph_executor.create(graphs.chain(nodes, (16,), "relu"), module, runtime.cpu())
    gmod.set_input("x", np.linspace(-1, 1, 16, dtype="float32"))
    executor = gmod.executor
    steps = [op.step for op in executor._step_ops]
    parts = [ffi.kernel_call_parts(step) for step in steps]
    assert all(p is not None for p in parts), "the executor did not prepare native calls"
    count = len(steps)
    funcs = (ctypes.c_void_p * count)(*[p[0] for p in parts if p])
    argv = (ctypes.c_void_p * count)(*[p[1] for p in parts if p])
    nargs = (ctypes.c_int * count)(*[p[2] for p in parts if p])
    native = kernel_services.native_library()

    def bare() -> None:
        for fn, args in steps:
            fn(*args)

    safe_call = ctypes.CFUNCTYPE(ctypes.c_int)
    result = TVMFFIAny()
    ctypes_calls = [
        (safe_call(p[0]), (None, ctypes.c_void_p(p[1]), p[2], ctypes.byref(result)))
        for p in parts
        if p
    ]

    def ctypes_loop() -> None:
        for fn, args in ctypes_calls:
            if fn(*args):
                raise RuntimeError("kernel failed")

    paths: dict[str, Any] = {
        "GraphModule.run()": gmod.run,
        "bare Python loop": bare,
        "ctypes loop": ctypes_loop,
    }
    try:
        import tvm_ffi
    except ImportError:
        tvm_ffi = None
    if tvm_ffi is not None:
        relu = tvm_ffi.load_module(str(kernels / "relu.so"))["relu"]
        ffi_calls = [
            (relu, tuple(tvm_ffi.from_dlpack(arg.numpy_view()) for arg in op.args))
            for op in executor._step_ops
        ]

        def tvm_ffi_loop() -> None:
            for fn, args in ffi_calls:
                fn(*args)

        paths["tvm_ffi loop"] = tvm_ffi_loop

    times: dict[str, list[int]] = {name: [] for name in [*paths, "native replay"]}
    for warm in (True, False):
        for _ in range(20 if warm else repeat):
            for name, fn in paths.items():
                start = time.perf_counter_ns()
                fn()
                if not warm:
                    times[name].append(time.perf_counter_ns() - start)
            ns = native.tvmrt_time_ffi_call_sequence(count, funcs, argv, nargs, 1)
            if ns < 0:
                raise RuntimeError("native replay failed")
            if not warm:
                times["native replay"].append(ns)
    per_node = {name: _median_ns(t) / count / 1e3 for name, t in times.items()}
    kernel = per_node["native replay"]
    print(f"{count} nodes (relu over 16 float32), median of {repeat} interleaved runs")
    print(f"{'path':<22}{'us/node':>10}{'overhead us/node':>18}")
    for name, us in per_node.items():
        print(f"{name:<22}{us:>10.3f}{us - kernel:>18.3f}")
    ratio = per_node["GraphModule.run()"] / per_node["bare Python loop"]
    print(f"ratio executor/bare: {ratio:.3f}  (target <= 1.2)")


def _run_child(code: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300
    )
    if proc.returncode < 0:
        return f"killed by signal {-proc.returncode}"
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        return f"exit {proc.returncode}: ...{lines[-1][-60:] if lines else ''}"
    return proc.stdout.strip().splitlines()[-1][:100]


SCENARIOS = {
    "0.22-0.23 error path (slot)": (
        "m = load('slot_error.so'); f = m['check']",
        "f()",
    ),
    "target=c, imports workspace": (
        "m = load('cbig.so'); f = m['cbig']",
        "f(arr((512, 1024)), arr((512, 1024)))",
    ),
    "parallel loop": (
        "m = load('conv.so'); f = m['conv_relu']",
        "f(arr((1, 8, 16, 16)), arr((16, 8, 3, 3)), arr((1, 16, 16, 16)))",
    ),
}


def decision(kernels: Path) -> None:
    """Robustness of tvm_ffi alone against tvmrt on the same kernels, and import costs."""
    prelude = {
        "tvm_ffi": f"""
            import numpy as np, tvm_ffi
            load = lambda n: tvm_ffi.load_module({str(kernels)!r} + '/' + n)
            arr = lambda s: tvm_ffi.from_dlpack(np.zeros(s, 'float32'))
        """,
        # the design not taken: tvm_ffi plus tvmrt's services registered as context symbols
        "tvm_ffi+ctx": f"""
            import ctypes, numpy as np, tvm_ffi
            from tvmrt.runtime import kernel_services
            register = ctypes.CDLL(None).TVMFFIEnvModRegisterContextSymbol
            register.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
            services = kernel_services.ffi_symbol_addresses()
            services["TVMFFIErrorSetRaisedFromCStr"] = ctypes.cast(
                ctypes.CDLL(None).TVMFFIErrorSetRaisedFromCStr, ctypes.c_void_p).value
            for name, address in services.items():
                register(("__" + name).encode(), address)
            load = lambda n: tvm_ffi.load_module({str(kernels)!r} + '/' + n)
            arr = lambda s: tvm_ffi.from_dlpack(np.zeros(s, 'float32'))
        """,
        "tvmrt": f"""
            import tvmrt.runtime as rt
            from tvmrt.runtime import ndarray as nd
            load = lambda n: rt.load_module({str(kernels)!r} + '/' + n)
            arr = lambda s: nd.empty(s, 'float32')
        """,
    }
    print(f"{'scenario':<30}{'runtime':<13}outcome")
    for scenario, (setup, call) in SCENARIOS.items():
        for runtime_name, head in prelude.items():
            code = textwrap.dedent(head) + textwrap.dedent(f"""
                {setup}
                try:
                    {call}
                    print('ok')
                except Exception as exc:
                    print('raised ' + type(exc).__name__ + ': ' + str(exc).splitlines()[0])
            """)
            print(f"{scenario:<30}{runtime_name:<13}{_run_child(code)}")
    print()
    base = _import_seconds("pass")
    ours = _import_seconds("import tvmrt.runtime") - base
    both = _import_seconds("import tvmrt.runtime, tvm_ffi") - base
    print(
        f"import tvmrt.runtime: {ours * 1e3:.0f} ms; adding tvm_ffi: +{(both - ours) * 1e3:.0f} ms"
    )


def _import_seconds(code: str) -> float:
    times = []
    for _ in range(7):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    """Build the kernels, measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=300)
    parser.add_argument("--decision", action="store_true", help="also run the ABI checks")
    parser.add_argument("--kernels", type=Path, help="reuse kernels built here before")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        kernels = args.kernels or Path(tmp)
        if not (kernels / "relu.so").exists():
            build_kernels(kernels)
        dispatch(kernels, args.nodes, args.repeat)
        if args.decision:
            print()
            decision(kernels)


if __name__ == "__main__":
    main()
