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

import ctypes
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tvmrt import runtime
from tvmrt.contrib import graph_executor
from tvmrt.error import TVMError
from tvmrt.runtime.backends.cuda import CUDADeviceAPI, backend
from tvmrt.runtime.device_api import find_storage, get_device_api
from tvmrt.runtime.graph_executor.debug import create_debug_executor
from tvmrt.runtime.loaders import cuda_launch
from tvmrt.runtime.loaders.cuda import kernel_timer

TOLERANCE = 1e-4


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
                err = float(np.max(np.abs(got - expected)))
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
    err = float(np.max(np.abs(b.numpy() - golden["expected"])))
    ok &= err <= TOLERANCE
    print(f"  {'add_one.ptx + meta':24s} {mod.image.summary():34s} max err {err:.3g}")
    # a graph-executor factory (Conv, Relu, Gemm, Softmax) on the GPU
    module = _graph(folder)
    golden = np.load(folder / "cnn_golden.npz")
    module.set_input("x", golden["x"])
    module.run()
    err = float(np.max(np.abs(module.get_output(0).numpy() - golden["expected"])))
    ok &= err <= TOLERANCE
    print(f"  {'cnn_ptx.so (graph)':24s} {'3 kernels, PTX':34s} max err {err:.3g}")
    if (folder / "mobilenet_cuda").exists():  # tvmrt compile --target cuda, MobileNet-class
        mobile = _mobilenet(folder)
        golden = np.load(folder / "mobilenet_golden.npz")
        mobile.set_input("x", golden["x"])
        mobile.run()
        got = mobile.get_output(0).numpy()
        err = float(np.max(np.abs(got - golden["expected"])))
        rel = err / float(np.max(np.abs(golden["expected"])))
        ok &= rel <= 1e-3 and int(got.argmax()) == int(golden["expected"].argmax())
        print(f"  {'mobilenet_cuda (graph)':24s} {'tvmrt compile --target cuda':34s} "
              f"max err {err:.3g} ({rel:.2g} of the largest), top-1 "
              f"{int(got.argmax())} vs {int(golden['expected'].argmax())}")  # fmt: skip
    if (folder / "relay019_ptx.so").exists():  # TVM 0.19's host code, legacy blob
        lib = runtime.load_module(str(folder / "relay019_ptx.so"))
        relay = graph_executor.GraphModule(lib["default"](runtime.cuda()))
        golden = np.load(folder / "relay019_golden.npz")
        relay.set_input("x", golden["x"])
        relay.run()
        err = float(np.max(np.abs(relay.get_output(0).numpy() - golden["expected"])))
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
        err = float(np.max(np.abs(got - golden["expected"])))
        ok &= err <= TOLERANCE
        print(f"  {'relay019_vm_ptx.so (VM)':24s} {'TVM 0.19 relay.vm.compile, PTX':34s} "
              f"max err {err:.3g}")  # fmt: skip
    return ok


def _graph(folder: Path) -> graph_executor.GraphModule:
    lib = runtime.load_module(str(folder / "cnn_ptx.so"))
    return graph_executor.GraphModule(lib["default"](runtime.cuda()))


def _mobilenet(folder: Path) -> Any:
    """The MobileNet-class folder's graph executor on cuda(0) (TVM's GraphModule face)."""
    from tvmrt.artifact import find_artifact, load_artifact

    return load_artifact(find_artifact(folder / "mobilenet_cuda"), runtime.cuda()).executor


def _wall(module: Any, runs: int) -> float:
    """us per run(), back to back, the stream synchronised at the end."""
    dev = runtime.cuda()
    for _ in range(20):
        module.run()
    dev.sync()
    start = time.perf_counter()
    for _ in range(runs):
        module.run()
    dev.sync()
    return (time.perf_counter() - start) / runs * 1e6


def _gpu_times(api: CUDADeviceAPI, work: Any, runs: int = 50) -> tuple[float, float, int]:
    """``work()`` queued ``runs`` times, each time behind a held stream (nothing runs on the
    GPU until all of it is queued, so no host gap lands inside its events). Returns, per
    call: its span on the GPU in us (an event pair around it, its kernels and the GPU's own
    gaps between them); the sum of its kernels' times in us (an event pair around each
    launch, which adds the events' own time, about 2 us a kernel on an H200); the number of
    kernels it launches."""
    dev = runtime.cuda()
    drv = api.driver
    stream = ctypes.c_void_p(api.stream(dev))
    span = 0.0
    for _ in range(runs):
        start, end, ms = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_float()
        drv.call("cuEventCreate", ctypes.byref(start), 0)
        drv.call("cuEventCreate", ctypes.byref(end), 0)
        with api.hold_stream(dev):
            drv.call("cuEventRecord", start, stream)
            work()
            drv.call("cuEventRecord", end, stream)
        drv.call("cuEventElapsedTime", ctypes.byref(ms), start, end)
        span += ms.value
        for event in (start, end):
            drv.call("cuEventDestroy_v2", event)
    with kernel_timer() as timer:
        for _ in range(runs):
            with api.hold_stream(dev):
                work()
    kernels = sum(ms for _, ms in timer.times) * 1e3
    return span / runs * 1e3, kernels / runs, len(timer.times) // runs


def _debug(folder: Path, name: str) -> Any:
    """The debug executor (TVM's ``GraphExecutorDebug`` module) of a CUDA fixture."""
    dev = runtime.cuda()
    if name == "cnn":
        return runtime.load_module(str(folder / "cnn_ptx.so"))["debug_create"]("default", dev)
    root = folder / "mobilenet_cuda"
    lib = runtime.load_module(str(root / "deploy.so"))
    debug = create_debug_executor((root / "deploy.json").read_text(), lib, dev)
    debug["load_params"]((root / "deploy.params").read_bytes())
    return debug


def _bench_graph(
    label: str, module: Any, x: np.ndarray[Any, Any], api: CUDADeviceAPI, debug: Any
) -> None:
    """run() wall time back to back vs its time on the GPU (see _gpu_times); the debug
    executor's profile of one run (its nodes' event times) against the same; and the wall
    time with every launch through Python (the C launcher off), paired."""
    module.set_input("x", x)
    wall = _wall(module, 300)
    span, kernels, count = _gpu_times(api, module.run)
    print(f"  {label} run(): wall {wall:.1f} us/run (back to back); on the GPU {span:.1f} us "
          f"(events around the run); overhead {wall - span:.1f} us = "
          f"{max(wall - span, 0) / wall:.1%} of the run")  # fmt: skip
    print(f"    its {count} kernels by events around each: {kernels:.1f} us in all; wall - "
          f"that sum: {wall - kernels:.1f} us")  # fmt: skip
    debug["set_input"]("x", runtime.array(x))
    debug["profile"](None)  # a first profile loads what the debug executor's module needs
    calls = debug["profile"](None).calls
    nodes = sum(float(call["Duration (us)"].microseconds) for call in calls)
    print(f"    profile (debug executor): {len(calls)} calls, {nodes:.1f} us in all "
          f"(events around each node's kernels, stream held)")  # fmt: skip
    if cuda_launch.enable(False):
        try:
            python_wall = _wall(module, 300)
        finally:
            cuda_launch.enable(True)
        again = _wall(module, 300)
        print(f"    with Python launches (C launcher off): wall {python_wall:.1f} us/run; with "
              f"it on again: {again:.1f} us/run")  # fmt: skip


def bench(folder: Path, api: CUDADeviceAPI) -> None:
    dev = runtime.cuda()
    x = np.load(folder / "cnn_golden.npz")["x"]
    _bench_graph("cnn graph", _graph(folder), x, api, _debug(folder, "cnn"))
    if (folder / "mobilenet_cuda").exists():
        x = np.load(folder / "mobilenet_golden.npz")["x"]
        _bench_graph(
            "mobilenet_cuda graph", _mobilenet(folder), x, api, _debug(folder, "mobilenet")
        )
    lib = runtime.load_module(str(folder / "dense_relu_ptx.so"))
    golden = np.load(folder / "dense_relu_golden.npz")
    x, w = (runtime.array(golden[k], dev) for k in ("arr_0", "arr_1"))
    out = runtime.empty((8, 32), "float32", dev)
    func = lib["dense_relu"]
    for _ in range(20):
        func(x, w, out)
    dev.sync()
    runs = 2000
    start = time.perf_counter()
    for _ in range(runs):
        func(x, w, out)
    dev.sync()
    wall = (time.perf_counter() - start) / runs * 1e6
    span, kernel, _ = _gpu_times(api, lambda: func(x, w, out), runs=200)
    print(f"  dense_relu call: wall {wall:.1f} us/call (back to back, {runs} calls); on the GPU "
          f"{span:.1f} us (kernel {kernel:.1f} us by events around it); overhead "
          f"{wall - span:.1f} us = {max(wall - span, 0) / wall:.0%} of the call (one small "
          "kernel: the host's cost of a call from Python shows)")  # fmt: skip
    _bench_copies(api)


def _bench_copies(api: CUDADeviceAPI) -> None:
    """host->device GB/s of one 64 MiB pageable buffer: tvmrt's copy vs the driver's own
    calls on the same buffer, in interleaved rounds (the median of each)."""
    dev = runtime.cuda()
    nbytes = 64 << 20
    host = np.ones(nbytes, np.uint8)
    arr = runtime.empty((nbytes,), "uint8", dev)
    storage = find_storage(2, arr.data_ptr)
    assert storage is not None
    dev_api = get_device_api(dev)
    drv = api.driver

    def copy_async() -> None:
        drv.call("cuMemcpyHtoDAsync_v2", arr.data_ptr, host.ctypes.data, nbytes, None)
        drv.call("cuStreamSynchronize", None)

    copies: dict[str, Callable[[], object]] = {
        "tvmrt copy_from_host": lambda: dev_api.copy_from_host(storage, 0, host),
        "driver cuMemcpyHtoD": lambda: drv.call(
            "cuMemcpyHtoD_v2", arr.data_ptr, host.ctypes.data, nbytes
        ),
        "driver HtoDAsync + sync": copy_async,
    }
    rates: dict[str, list[float]] = {label: [] for label in copies}
    for round_ in range(7):
        order = list(copies) if round_ % 2 == 0 else list(reversed(copies))
        for label in order:
            copies[label]()
            start = time.perf_counter()
            for _ in range(5):
                copies[label]()
            dev.sync()
            rates[label].append(nbytes * 5 / (time.perf_counter() - start) / 1e9)
    for label, values in rates.items():
        print(
            f"  host->device 64 MiB, {label:24s}: {float(np.median(values)):.2f} GB/s "
            f"(median of {len(values)} interleaved rounds)"
        )


def check_serve(folder: Path) -> bool:
    """``tvmrt serve cnn_ptx.so --device cuda`` answers one KServe v2 request correctly."""
    import http.client
    import importlib.util
    import json
    import os
    import socket
    import subprocess

    if importlib.util.find_spec("uvicorn") is None:
        print("  serve: skipped (uvicorn is not installed here: pip install 'tvmrt[serve]')")
        return True
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cmd = [sys.executable, "-m", "tvmrt", "serve", str(folder / "cnn_ptx.so"), "--device",
           "cuda", "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip
    proc = subprocess.Popen(cmd, env=dict(os.environ), stderr=subprocess.PIPE, text=True)
    golden = np.load(folder / "cnn_golden.npz")

    def request(method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            conn.request(method, path, body=body, headers={"content-type": "application/json"})
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if request("GET", "/v2/health/ready")[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                print(f"  serve: FAILED to start: {proc.stderr.read() if proc.stderr else ''}")
                return False
            time.sleep(0.2)
        name = "cnn_ptx"  # tvmrt serve names a model after its file
        x = golden["x"]
        body = {"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                            "data": x.reshape(-1).tolist()}]}  # fmt: skip
        status, reply = request("POST", f"/v2/models/{name}/infer", json.dumps(body).encode())
        if status != 200:
            print(f"  serve: FAILED: HTTP {status}: {reply[:300]!r}")
            return False
        out = np.array(json.loads(reply)["outputs"][0]["data"], "float32")
        err = float(np.max(np.abs(out - golden["expected"].reshape(-1))))
        print(f"  serve --device cuda: HTTP 200 for model {name!r}, max err {err:.3g}")
        return err <= TOLERANCE
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def check_rpc(folder: Path) -> bool:
    """``remote.cuda(0)`` of a ``tvmrt rpc server`` on this machine (over loopback): the
    Relay-era fixture uploaded, loaded and run on the server's GPU, against its golden."""
    import re

    from tvmrt import rpc

    lib_path = folder / "relay019_ptx.so"
    if not lib_path.exists():
        return True
    with tempfile.TemporaryDirectory() as work, tempfile.TemporaryFile("w+") as log:
        cmd = [sys.executable, "-m", "tvmrt", "rpc", "server", "--port", "0", "--workdir", work]
        server = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
        try:
            assert server.stdout is not None
            found = re.search(r"listening on .*:(\d+)", server.stdout.readline())
            if found is None:
                log.seek(0)
                print(f"  RPC server: FAILED to start: {log.read().strip()}")
                return False
            remote = rpc.connect("127.0.0.1", int(found.group(1)))
            dev = remote.cuda(0)
            name = dev.device_name
            remote.upload(str(lib_path))
            lib = remote.load_module(lib_path.name)
            module = graph_executor.GraphModule(lib["default"](dev))
            golden = np.load(folder / "relay019_golden.npz")
            module.set_input("x", golden["x"])
            module.run()
            err = float(np.max(np.abs(module.get_output(0).numpy() - golden["expected"])))
        except TVMError as exc:
            print(f"  RPC remote cuda(0): FAILED: {type(exc).__name__}: {exc}")
            return False
        finally:
            server.terminate()
            server.wait(30)
    print(f"  {'RPC relay019_ptx.so':24s} {'remote.cuda(0): ' + name:34s} "
          f"max err {err:.3g}")  # fmt: skip
    return err <= TOLERANCE


def check_cli(folder: Path) -> bool:
    """``tvmrt run``, ``bench`` and ``profile`` of the MobileNet-class folder with
    ``--device cuda`` (each exits 0; run's top-1 class is the golden's)."""
    import json

    root = folder / "mobilenet_cuda"
    if not root.exists():
        return True
    golden = np.load(folder / "mobilenet_golden.npz")
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        inputs = Path(tmp) / "x.npy"
        np.save(inputs, golden["x"])
        runs = {
            "run": [
                "run",
                str(root),
                "--device",
                "cuda",
                "-i",
                str(inputs),
                "-o",
                f"{tmp}/out.npz",
            ],
            "bench": ["bench", str(root), "--device", "cuda", "--repeat", "3", "--json"],
            "profile": ["profile", str(root), "--device", "cuda", "--number", "2"],
        }
        for name, args in runs.items():
            proc = subprocess.run([sys.executable, "-m", "tvmrt", *args], capture_output=True,
                                  text=True, timeout=120)  # fmt: skip
            if proc.returncode != 0:
                print(f"  tvmrt {name} --device cuda: FAILED ({proc.returncode}): "
                      f"{(proc.stdout + proc.stderr).strip()[-400:]}")  # fmt: skip
                ok = False
                continue
            if name == "run":
                saved = np.load(f"{tmp}/out.npz")
                top = int(saved[saved.files[0]].argmax())
                ok &= top == int(golden["expected"].argmax())
                detail = f"top-1 {top}"
            elif name == "bench":
                detail = f"mean {json.loads(proc.stdout)['latency_ms']['mean']:.3f} ms per run"
            else:
                detail = f"{len(proc.stdout.splitlines())} lines"
            print(f"  tvmrt {name} mobilenet_cuda --device cuda: ok, {detail}")
    return ok


def check_c_runtime(folder: Path) -> bool:
    """The C runtime (libtvmrt_runtime, no Python) runs each CUDA fixture it can load on
    kDLCUDA: ``run_model`` (tests/native/c/run_model.c, built by the pack beside the fixtures)
    with RUN_MODEL_DEVICE=cuda, its output against the CPU golden. The tvm-ffi fixtures
    (TVM 0.27) are Python-only: the C runtime runs the legacy ABI (TVM <= 0.20)."""
    exe = folder.parent / "native" / "run_model"
    if not exe.exists():
        print("  C runtime: not packed (run make gpu-check-pack)")
        return False
    ok = True
    for lib, golden_file in (("relay019_ptx.so", "relay019_golden.npz"),):
        if not (folder / lib).exists():
            continue
        golden = np.load(folder / golden_file)
        with tempfile.TemporaryDirectory() as tmp:
            x = Path(tmp) / "x.bin"
            np.ascontiguousarray(golden["x"]).tofile(x)
            env = {**os.environ, "RUN_MODEL_DEVICE": "cuda"}
            cmd = [str(exe), "factory", str(folder / lib), "x", str(x), f"{tmp}/out"]
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
            if proc.returncode != 0:
                print(f"  C runtime {lib}: FAILED: {(proc.stdout + proc.stderr).strip()}")
                ok = False
                continue
            want = golden["expected"]
            got = np.fromfile(f"{tmp}/out0.bin", dtype=want.dtype).reshape(want.shape)
        err = float(np.max(np.abs(got - want)))
        ok &= err <= TOLERANCE
        print(f"  {'C runtime ' + lib:24s} {'run_model on kDLCUDA':34s} max err {err:.3g}")
    return ok


def main() -> int:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "build/gpu-check/fixtures")
    api = _device()
    dev = runtime.cuda()
    print(f"device: {dev.device_name}, compute capability {dev.compute_version}, "
          f"driver CUDA {api.driver.version_text}, {api.count} GPU(s)")  # fmt: skip
    print("fixtures (TVM 0.27 host code; golden: the same TIR on the CPU):")
    ok = check_fixtures(folder)
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
