"""``make gpu-check``'s checks of tvmrt's other faces on the GPU: the C runtime, an RPC
server's ``remote.cuda(0)``, the CLI and ``tvmrt serve`` (scripts/gpu_check.py runs them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from tvmrt.contrib import graph_executor
from tvmrt.error import TVMError

TOLERANCE = 1e-4  # the largest absolute error a fixture may show against its golden


def max_err(got: np.ndarray[Any, Any], want: np.ndarray[Any, Any]) -> float:
    """The largest absolute difference between two arrays of the same shape."""
    return float(np.max(np.abs(got - want)))


def run_graph(module: Any, x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Output 0 of a graph module (``GraphModule``, local or remote) run once on input ``x``."""
    module.set_input("x", x)
    module.run()
    return module.get_output(0).numpy()


def check_serve(folder: Path) -> bool:
    """``tvmrt serve cnn_ptx.so --device cuda`` answers one KServe v2 request correctly."""
    import http.client
    import importlib.util
    import socket

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
        err = max_err(out, golden["expected"].reshape(-1))
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
            err = max_err(run_graph(module, golden["x"]), golden["expected"])
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
    """The C runtime (libtvmrt_runtime, no Python) runs the Relay-era CUDA fixture on
    kDLCUDA from two programs the pack builds beside the fixtures: ``run_model`` (C,
    tests/native/c/run_model.c, RUN_MODEL_DEVICE=cuda) and ``device_deploy`` (C++ with TVM's
    C++ API, tests/native/cxx/device_deploy.cc); each output against the CPU golden. The
    tvm-ffi fixtures (TVM 0.27) are Python-only: the C runtime runs the legacy ABI."""
    native = folder.parent / "native"
    lib = folder / "relay019_ptx.so"
    if not (native / "run_model").exists() or not (native / "device_deploy").exists():
        print("  C runtime: not packed (run make gpu-check-pack)")
        return False
    if not lib.exists():
        return True
    golden = np.load(folder / "relay019_golden.npz")
    want = golden["expected"]
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        x = Path(tmp) / "x.bin"
        np.ascontiguousarray(golden["x"], dtype="<f4").tofile(x)
        programs = {
            "run_model": ([str(native / "run_model"), "factory", str(lib), "x", str(x),
                           f"{tmp}/out"], f"{tmp}/out0.bin"),
            "device_deploy": ([str(native / "device_deploy"), "cuda", str(lib), "x",
                               str(golden["x"].size), str(x), str(want.size), f"{tmp}/cxx.bin"],
                              f"{tmp}/cxx.bin"),
        }  # fmt: skip
        env = {**os.environ, "RUN_MODEL_DEVICE": "cuda"}
        for name, (cmd, out) in programs.items():
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
            if proc.returncode != 0:
                print(f"  C runtime {name}: FAILED: {(proc.stdout + proc.stderr).strip()}")
                ok = False
                continue
            got = np.fromfile(out, dtype=want.dtype).reshape(want.shape)
            err = max_err(got, want)
            ok &= err <= TOLERANCE
            what = "C, run_model" if name == "run_model" else "C++, TVM's C++ API"
            print(
                f"  {'C runtime relay019_ptx.so':24s} {what + ' on kDLCUDA':34s} max err {err:.3g}"
            )
    return ok
