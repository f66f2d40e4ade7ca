"""One native library in a process: a graph, a Relay VM in C and a CUDA model share it.

The services compiled kernels call (workspace, thread pool, error slots) and the C runtime
are one library, ``libtvmrt_runtime.so``: Python loads it with ctypes, the C engines run
in it, and nothing loads a second copy. A child process (``TVM_NUM_THREADS=3``) runs the
relay016 CNN factory on the Python graph engine, a Relay VM executable on the C engine and a CUDA
factory on the libcuda stand-in, then counts what it holds:

* mapped files that define ``TVMBackendParallelLaunch`` (kernel-service copies): 1;
* threads started by the runs (the pool's workers, the launching thread not among them): 2,
  where two pools of 3 would start 4;
* the C VM's kernels' parallel launches and workspace blocks appear in the one set of
  counters Python reads (``kernel_services.stats``): one thread pool, one workspace pool.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.cuda_fixtures import cuda_fixtures
from support.fake_cuda import build
from support.fixtures import artifact_folder
from support.paths import REPO

CHILD = r"""
import json, os, sys
import numpy as np
from tvmrt import runtime
from tvmrt.binfmt.binary import ElfFile
from tvmrt.contrib import graph_executor
from tvmrt.runtime import kernel_services
from tvmrt.runtime import vm as relay_vm

graph_so, vm_so, cuda_so = sys.argv[1:4]


def threads():
    return len(os.listdir("/proc/self/task"))


def service_copies():
    paths = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split()
            if len(parts) >= 6 and parts[-1].startswith("/") and ".so" in parts[-1]:
                paths.add(parts[-1])
    found = []
    for path in sorted(paths):
        try:
            names = {s.name for s in ElfFile.from_path(path).symbols() if s.defined}
        except Exception:
            continue
        if "TVMBackendParallelLaunch" in names:
            found.append(os.path.basename(path))
    return found


before = threads()
kernel_services.reset_stats()
lib = runtime.load_module(graph_so)
graph = graph_executor.GraphModule(lib["default"](runtime.cpu()))
graph.set_input(0, np.ones((1, 3, 16, 16), "float32"))
graph.run()
after_graph = kernel_services.stats()

exe = runtime.load_module(vm_so)
machine = relay_vm.VirtualMachine(exe, runtime.cpu(), engine="native")
assert machine.engine == "native", machine.engine_reason
kernel_services.reset_stats()
machine.run(np.ones((1, 3, 16, 16), "float32"))
after_vm = kernel_services.stats()

cuda_lib = runtime.load_module(cuda_so)
a = runtime.array(np.ones(1000, "float32"), runtime.cuda())
b = runtime.empty((1000,), "float32", runtime.cuda())
cuda_lib["add_one"](a, b)

print(json.dumps({
    "copies": service_copies(),
    "threads_started": threads() - before,
    "pool_size": kernel_services.num_threads(),
    "graph_launches": after_graph.launches,
    "vm_launches": after_vm.launches,
    "vm_workspace_allocs": after_vm.workspace_allocs,
}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self")
def test_graph_relay_vm_and_cuda_share_one_library(tmp_path: Path) -> None:
    graph_so = artifact_folder("relay016") / "linkparams-so" / "deploy.so"
    vm_so = artifact_folder("relayvm") / "cnn-static" / "vm.so"
    cuda_so = cuda_fixtures() / "add_one_ptx.so"
    fake = build(tmp_path)
    env = {
        **os.environ,
        "TVM_NUM_THREADS": "3",
        "TVMRT_LIBCUDA": str(fake),
        "PYTHONPATH": str(REPO / "src"),
    }
    env.pop("TVMRT_VM_ENGINE", None)
    run = subprocess.run(
        [sys.executable, "-c", CHILD, str(graph_so), str(vm_so), str(cuda_so)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["copies"] == ["libtvmrt_runtime.so"]
    assert seen["pool_size"] == 3
    assert seen["threads_started"] == 2  # one pool: 3 threads, the caller being one
    assert seen["graph_launches"] > 0
    # the C VM's kernels launch on, and take workspace from, the pool Python counts
    assert seen["vm_launches"] > 0
    assert seen["vm_workspace_allocs"] > 0


def test_a_small_integer_handle_is_refused_not_followed() -> None:
    # The live-object set marks freed slots with the value 1; a handle of 1 (a host's small
    # integer handle, a caller's mistake) was found there and followed (a segfault once a
    # tombstone lay where its probe starts). After many objects of many sizes have come and
    # gone, TVMFuncCall and TVMObjectFree of small handles fail with an error.
    code = (
        "import ctypes\n"
        "from tvmrt.runtime import kernel_services\n"
        "lib = kernel_services.native_library()\n"
        "v, c, r, rc = (ctypes.c_int64 * 4)(), (ctypes.c_int * 4)(), ctypes.c_int64(), ctypes.c_int()\n"
        "out = set()\n"
        "for round in range(40):\n"
        "    shape = (ctypes.c_int64 * 1)(1 + 37 * round)\n"
        "    arrays = [ctypes.c_void_p() for _ in range(500 + 211 * round)]\n"
        "    for a in arrays:\n"
        "        assert lib.TVMArrayAlloc(shape, 1, 2, 32, 1, 1, 0, ctypes.byref(a)) == 0\n"
        "    for a in arrays[::2]:  # their slots become tombstones\n"
        "        assert lib.TVMArrayFree(a) == 0\n"
        "    for handle in (1, 2, 3):\n"
        "        out.add(lib.TVMFuncCall(ctypes.c_void_p(handle), v, c, 0, ctypes.byref(r), ctypes.byref(rc)))\n"
        "        out.add(lib.TVMObjectFree(ctypes.c_void_p(handle)))\n"
        "    for a in arrays[1::2]:\n"
        "        assert lib.TVMArrayFree(a) == 0\n"
        "print(sorted(out))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[-1]"
