"""``make gpu-check``: the CUDA fixtures on a real GPU, against their CPU goldens, and timings.

Run from a packed tree (``make gpu-check-pack`` here; the GPU machine needs only Python 3
with numpy and the NVIDIA driver; the pack brings the serve extra in ``deps/``)::

    PYTHONPATH=build/gpu-check/src:build/gpu-check/deps python3 scripts/gpu_check.py \
        build/gpu-check/fixtures

Without a driver or a GPU it prints why and exits 2. Otherwise it prints the device and
driver, then for every fixture (TVM 0.27 host code + PTX / cubin / fatbin, and the
separate ``.ptx`` + ``.tvm_meta.json``) the max abs error against the golden the same TIR
gave on the CPU, the C runtime's run of the Relay-era fixture on ``kDLCUDA`` (the pack's
``native/run_model`` over ``native/libtvmrt_runtime.so``), ``tvmrt serve --device cuda``
answering one request, then the timings: a graph's ``run()`` back to back (wall time per
run, the stream synchronised at the end) vs its time on the GPU (CUDA events, taken with
the stream held so that no host gap lands inside them), the overhead per run in us and as
a share, the same with Python launches; and host->device copy GB/s through tvmrt vs the
driver's own calls on the same buffer. Exit 1 if any result is off (1e-4 absolute).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from gpu_check_bench import bench, graph_module, mobilenet_module
from gpu_check_faces import (
    TOLERANCE,
    check_c_runtime,
    check_cli,
    check_rpc,
    check_serve,
    max_err,
    run_graph,
)
from gpu_check_relax import check_relax

from tvmrt import runtime
from tvmrt.contrib import graph_executor
from tvmrt.error import TVMError
from tvmrt.runtime.backends.cuda import CUDADeviceAPI, backend


def _device() -> CUDADeviceAPI:
    api = backend()
    if not isinstance(api, CUDADeviceAPI):
        print(f"gpu-check: no CUDA here: {getattr(api, 'reason', api)}")
        sys.exit(2)
    if api.count == 0:
        print(f"gpu-check: the NVIDIA driver (CUDA {api.driver.version_text}) sees no GPU")
        sys.exit(2)
    return api


def _run(
    lib: runtime.Module, name: str, inputs: list[np.ndarray], shape: tuple[int, ...]
) -> np.ndarray:
    dev = runtime.cuda()
    args = [runtime.array(x, dev) for x in inputs]
    out = runtime.empty(shape, "float32", dev)
    lib[name](*args, out)
    return out.numpy()


def check_fixtures(folder: Path) -> bool:
    ok = True
    for name in ("add_one", "dense_relu"):
        golden = np.load(folder / f"{name}_golden.npz")
        inputs = [golden[k] for k in sorted(golden.files) if k.startswith("arr_")]
        expected = golden["expected"]
        for fmt in ("ptx", "cubin", "fatbin"):
            label = f"{name}_{fmt}.so"
            try:
                lib = runtime.load_module(str(folder / label))
                got = _run(lib, name, inputs, expected.shape)
                err = max_err(got, expected)
                status = "ok" if err <= TOLERANCE else "WRONG"
                ok &= err <= TOLERANCE
                summary = lib.imported_modules[0].image.summary()
                print(f"  {label:24s} {summary:34s} max err {err:.3g} {status}")
            except TVMError as exc:
                ok = False
                print(f"  {label:24s} FAILED: {type(exc).__name__}: {exc}")
    # separate files: the PTX + tvm_meta.json, launched with TVM's convention by hand
    mod = runtime.load_module(str(folder / "add_one.ptx"))
    golden = np.load(folder / "add_one_golden.npz")
    a = runtime.array(golden["arr_0"], runtime.cuda())
    b = runtime.empty(golden["expected"].shape, "float32", runtime.cuda())
    n = golden["arr_0"].shape[0]
    threads = 1024  # the kernel's schedule binds 1024 threads a block (add_one.cu)
    mod["add_one_kernel"](a.data_ptr, b.data_ptr, n, -(-n // threads), threads)
    err = max_err(b.numpy(), golden["expected"])
    ok &= err <= TOLERANCE
    print(f"  {'add_one.ptx + meta':24s} {mod.image.summary():34s} max err {err:.3g}")
    # a graph-executor factory (Conv, Relu, Gemm, Softmax) on the GPU
    golden = np.load(folder / "cnn_golden.npz")
    err = max_err(run_graph(graph_module(folder), golden["x"]), golden["expected"])
    ok &= err <= TOLERANCE
    print(f"  {'cnn_ptx.so (graph)':24s} {'3 kernels, PTX':34s} max err {err:.3g}")
    if (folder / "mobilenet_cuda").exists():  # tvmrt compile --target cuda, MobileNet-class
        golden = np.load(folder / "mobilenet_golden.npz")
        got = run_graph(mobilenet_module(folder), golden["x"])
        err = max_err(got, golden["expected"])
        rel = err / float(np.max(np.abs(golden["expected"])))
        ok &= rel <= 1e-3 and int(got.argmax()) == int(golden["expected"].argmax())
        print(f"  {'mobilenet_cuda (graph)':24s} {'tvmrt compile --target cuda':34s} "
              f"max err {err:.3g} ({rel:.2g} of the largest), top-1 "
              f"{int(got.argmax())} vs {int(golden['expected'].argmax())}")  # fmt: skip
    if (folder / "relay019_ptx.so").exists():  # TVM 0.19's host code, legacy blob
        lib = runtime.load_module(str(folder / "relay019_ptx.so"))
        relay = graph_executor.GraphModule(lib["default"](runtime.cuda()))
        golden = np.load(folder / "relay019_golden.npz")
        err = max_err(run_graph(relay, golden["x"]), golden["expected"])
        ok &= err <= TOLERANCE
        print(f"  {'relay019_ptx.so (graph)':24s} {'TVM 0.19 host, 2 kernels, PTX':34s} "
              f"max err {err:.3g}")  # fmt: skip
    if (folder / "relay019_vm.ro").exists():  # the same model as TVM 0.19's Relay VM executable
        from tvmrt.runtime import vm as vm_rt

        lib = runtime.load_module(str(folder / "relay019_vm_ptx.so"))
        exe = vm_rt.Executable.load_exec((folder / "relay019_vm.ro").read_bytes(), lib)
        machine = vm_rt.VirtualMachine(exe, runtime.cuda())
        golden = np.load(folder / "relay019_golden.npz")
        got = machine.invoke("main", runtime.array(golden["x"])).numpy()
        err = max_err(got, golden["expected"])
        ok &= err <= TOLERANCE
        print(f"  {'relay019_vm_ptx.so (VM)':24s} {'TVM 0.19 relay.vm.compile, PTX':34s} "
              f"max err {err:.3g}")  # fmt: skip
    return ok


def main() -> int:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "build/gpu-check/fixtures")
    api = _device()
    dev = runtime.cuda()
    print(f"device: {dev.device_name}, compute capability {dev.compute_version}, "
          f"driver CUDA {api.driver.version_text}, {api.count} GPU(s)")  # fmt: skip
    print("fixtures (TVM 0.27 host code; golden: the same TIR on the CPU):")
    ok = check_fixtures(folder)
    ok &= check_relax(folder)
    ok &= check_c_runtime(folder)
    ok &= check_rpc(folder)
    ok &= check_cli(folder)
    ok &= check_serve(folder)
    print("benchmark:")
    bench(folder, api)
    print("gpu-check:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
