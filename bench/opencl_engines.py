"""TVM 0.16's OpenCL builds on pocl: the C engine (libtvmrt_runtime's graph executor and
OpenCL backend, driven through its C API) against the Python engine (``GraphModule`` over
the pyopencl backend), paired, in one process.

Method
------
Both engines load the same factory and run on ``opencl(0)``. The C engine is reached with
ctypes through TVM's C API of the library the Python runtime itself loaded (one library in
the process: ``kernel_services.library_path()``); the C runtime opens pyopencl's ICD loader
(``TVMRT_LIBOPENCL``), so both use the same pocl. One sample is ``--number`` calls of
``run()`` followed by the device's sync, divided by ``--number``; each round takes one sample
per engine in alternating order, and the ratio C / Python is taken per round. Reported: the
median over rounds of each side and of the ratio. Before timing, each engine's outputs are
checked against TVM's golden (tolerance 1e-5).

Usage::

    .venv/bin/python bench/opencl_engines.py [--rounds 7] [--number 20]
        [--fixtures build/fixtures]   # where tests/fixtures/build_relay016.py put relay016
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from tvmrt.runtime._ctypes_api import TVMValue

_MODELS = {  # name: (folder, library, golden, input, devices)
    "cnn": ("opencl-factory", "deploy.so", "golden.npz", "data", (4,)),
    "dense": ("opencl-factory", "dense.so", "dense_golden.npz", "x", (4,)),
    "cpu+opencl": ("hetero-opencl-cpu", "deploy.so", "golden.npz", "data", (1, 4)),
}


class _CEngine:
    """A graph executor of the C runtime, through TVM's C API."""

    def __init__(self, lib: ctypes.CDLL, path: Path, devices: tuple[int, ...]) -> None:
        self.lib = lib
        self.mod = ctypes.c_void_p()
        self._check(lib.TVMModLoadFromFile(str(path).encode(), b"", ctypes.byref(self.mod)))
        args = (TVMValue * len(devices))()
        codes = (ctypes.c_int * len(devices))(*[6] * len(devices))  # kDLDevice
        for i, device_type in enumerate(devices):
            args[i].v_device.device_type, args[i].v_device.device_id = device_type, 0
        made = self._call(self._get(self.mod, "default"), args, codes)[0]
        self.gmod = ctypes.c_void_p(made.v_handle)
        self.funcs = {n: self._get(self.gmod, n) for n in ("set_input", "run", "get_output")}

    def _check(self, rc: int) -> None:
        if rc != 0:
            self.lib.TVMGetLastError.restype = ctypes.c_char_p
            raise RuntimeError(self.lib.TVMGetLastError().decode())

    def _get(self, mod: object, name: str) -> ctypes.c_void_p:
        f = ctypes.c_void_p()
        self._check(self.lib.TVMModGetFunction(mod, name.encode(), 0, ctypes.byref(f)))
        return f

    def _call(self, f: ctypes.c_void_p, args: ctypes.Array, codes: ctypes.Array) -> tuple:  # type: ignore[type-arg]
        ret, code = TVMValue(), ctypes.c_int()
        self._check(
            self.lib.TVMFuncCall(f, args, codes, len(codes), ctypes.byref(ret), ctypes.byref(code))
        )
        return ret, code.value

    def set_input(self, name: str, array: object) -> None:
        from tvmrt.runtime import _ctypes_api

        arr = np.ascontiguousarray(array)
        self._keep = arr
        shape = (ctypes.c_int64 * arr.ndim)(*arr.shape)
        tensor = _ctypes_api.DLTensor()
        tensor.data = arr.ctypes.data
        tensor.device.device_type, tensor.device.device_id = 1, 0
        tensor.ndim = arr.ndim
        tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes = 2, 32, 1
        tensor.shape = shape
        self._tensor = (tensor, shape)
        args = (TVMValue * 2)()
        args[0].v_str = name.encode()
        args[1].v_handle = ctypes.addressof(tensor)
        self._call(self.funcs["set_input"], args, (ctypes.c_int * 2)(11, 7))  # str, DLTensor*

    def run(self) -> None:
        self._call(self.funcs["run"], (TVMValue * 0)(), (ctypes.c_int * 0)())

    def sync(self) -> None:
        self._check(self.lib.TVMSynchronize(4, 0, None))

    def output(self, index: int, like: np.ndarray) -> np.ndarray:
        args = (TVMValue * 1)()
        args[0].v_int64 = index
        ret, _ = self._call(self.funcs["get_output"], args, (ctypes.c_int * 1)(0))
        out = np.empty_like(like)
        self._check(
            self.lib.TVMArrayCopyToBytes(
                ctypes.c_void_p(ret.v_handle), out.ctypes.data_as(ctypes.c_void_p), out.nbytes
            )
        )
        self._check(self.lib.TVMArrayFree(ctypes.c_void_p(ret.v_handle)))
        return out


def _sample(run: object, sync: object, number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        run()  # type: ignore[operator]
    sync()  # type: ignore[operator]
    return (time.perf_counter() - start) / number


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--number", type=int, default=20)
    parser.add_argument("--fixtures", type=Path, default=Path("build/fixtures"))
    args = parser.parse_args()
    import pyopencl  # sets PYOPENCL_HOME, which its ICD loader reads

    home = Path(pyopencl.__file__).parent
    os.environ.setdefault("TVMRT_LIBOPENCL", str(sorted((home / ".libs").glob("libOpenCL*"))[0]))
    from tvmrt import runtime
    from tvmrt.contrib import graph_executor
    from tvmrt.runtime import kernel_services

    folder = args.fixtures / "relay016" / "relay016"
    lib = ctypes.CDLL(kernel_services.library_path())
    print(
        f"{'model':<12} {'C engine':>10} {'Python':>10} {'C / Python':>11}   ({args.rounds} rounds)"
    )
    for name, (sub, library, golden_file, input_name, devices) in _MODELS.items():
        path = folder / sub / library
        golden = np.load(folder / sub / golden_file)
        want = golden["output_0"]
        c = _CEngine(lib, path, devices)
        c.set_input(input_name, golden[input_name])
        devs = [runtime.cpu(0) if t == 1 else runtime.opencl(0) for t in devices]
        py = graph_executor.GraphModule(runtime.load_module(str(path))["default"](*devs))
        py.set_input(input_name, golden[input_name])
        c.run()
        c.sync()
        py.run()
        np.testing.assert_allclose(c.output(0, want), want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(py.get_output(0).numpy(), want, rtol=1e-5, atol=1e-5)
        sync = runtime.opencl(0).sync
        c_times, py_times, ratios = [], [], []
        for r in range(args.rounds):
            order = [("c", c.run, c.sync), ("py", py.run, sync)]
            got = {}
            for side, run, done in order if r % 2 == 0 else order[::-1]:
                got[side] = _sample(run, done, args.number)
            c_times.append(got["c"])
            py_times.append(got["py"])
            ratios.append(got["c"] / got["py"])
        print(
            f"{name:<12} {statistics.median(c_times) * 1e3:>8.3f}ms "
            f"{statistics.median(py_times) * 1e3:>8.3f}ms {statistics.median(ratios):>11.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
