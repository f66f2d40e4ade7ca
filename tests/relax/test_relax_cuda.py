"""A Relax model built by TVM 0.27 for CUDA, on the C runtime, against the libcuda stand-in.

The stand-in (tests/support/fake_libcuda.c) checks what the driver checks (contexts, copies
inside allocations, NUL-terminated PTX, each launch's parameters against the PTX's .entry)
and logs every call; it computes nothing, so these tests prove the launches and the memory
traffic, and ``make gpu-check`` the numbers. Each case runs in its own process: the C runtime
loads one driver per process.

* ``cuda_mlp_ptx``: the ``cuda`` import holds PTX (nvcc made it);
* ``cuda_mlp``: it holds CUDA C source, which is what PyPI's TVM 0.27 exports (and then cannot
  load itself): NVRTC compiles it at load for the GPU's architecture, cached on disk;
* without NVRTC, and without a driver: the refusals, in the runtime's words.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import support.fixtures as fx
from support.fake_cuda import build
from support.paths import REPO

CHILD = r"""
import json, sys, numpy as np
from tvmrt import relax, runtime
folder = sys.argv[1]
case = json.load(open(folder + "/case.json"))
vm = relax.VirtualMachine(runtime.load_module(folder + "/model.so"), runtime.cuda())
for run in case["runs"]:
    inp = np.load(folder + "/" + run["inputs"])
    args = [runtime.array(inp[f"arg{i}"], runtime.cuda()) for i in range(len(inp.files))]
    out = vm["main"](*args)
    print(json.dumps({"shape": list(out.shape), "device": str(out.device),
                      "host": out.numpy().shape == tuple(out.shape)}))
"""


def _folder(model: str) -> Path:
    return fx.artifact_folder("relax027") / model


def _run(folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "PYTHONPATH": str(REPO / "src"),
        **env,
    }
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(folder)],
        capture_output=True,
        text=True,
        env=full,
        timeout=300,
    )


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("fakecuda"))


def _fake_env(stand_in: Path, log: Path, cache: Path) -> dict[str, str]:
    return {
        "TVMRT_LIBCUDA": str(stand_in),
        "FAKE_LIBCUDA_GPUS": "1",
        "FAKE_LIBCUDA_SM": "90",
        "FAKE_LIBCUDA_LOG": str(log),
        "TVMRT_CACHE_DIR": str(cache),
    }


def _launches(log: Path) -> list[str]:
    return [
        line.split()[1]
        for line in log.read_text().splitlines()
        if line.startswith("cuLaunchKernel")
    ]


def _kernels(folder: Path) -> list[str]:
    case = json.loads((folder / "case.json").read_text())
    return list(case["kernels"])


def test_ptx_import_launches_every_kernel_on_the_gpu(stand_in: Path, tmp_path: Path) -> None:
    folder = _folder("cuda_mlp_ptx")
    log = tmp_path / "driver.log"
    done = _run(folder, _fake_env(stand_in, log, tmp_path / "cache"))
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["shape"] for r in results] == [[1, 10], [5, 10]]
    assert all(r["device"] == "cuda(0)" and r["host"] for r in results)
    launched = _launches(log)
    assert launched, "no kernel was launched"
    # every launch is one of the model's kernels (TVM names the device function <kernel>_kernel)
    assert all(name.startswith(tuple(_kernels(folder))) for name in launched), launched
    assert "cuModuleLoadData" in log.read_text()


def test_cuda_source_import_is_compiled_with_nvrtc_and_cached(
    stand_in: Path, tmp_path: Path
) -> None:
    pytest.importorskip("nvidia.cuda_nvrtc", reason="the nvrtc extra (nvidia-cuda-nvrtc-cu12)")
    folder = _folder("cuda_mlp")
    cache = tmp_path / "cache"
    log = tmp_path / "driver.log"
    done = _run(folder, _fake_env(stand_in, log, cache))
    assert done.returncode == 0, done.stderr[-3000:]
    (ptx,) = (cache / "nvrtc").glob("*.ptx")
    head, body = ptx.read_text().split("\n", 1)
    assert head == ptx.stem  # the entry names its own key
    assert ".target sm_90" in body  # compiled for the GPU the driver reports
    assert _launches(log)
    stamp = ptx.stat().st_mtime_ns
    again = _run(folder, _fake_env(stand_in, tmp_path / "again.log", cache))
    assert again.returncode == 0, again.stderr[-3000:]
    assert ptx.stat().st_mtime_ns == stamp  # served from the cache
    assert _launches(tmp_path / "again.log") == _launches(log)


def test_cuda_source_without_nvrtc_is_refused_naming_it(stand_in: Path, tmp_path: Path) -> None:
    env = _fake_env(stand_in, tmp_path / "driver.log", tmp_path / "cache")
    env["TVMRT_LIBNVRTC"] = str(tmp_path / "no-libnvrtc.so")
    done = _run(_folder("cuda_mlp"), env)
    assert done.returncode != 0
    assert "the CUDA image is CUDA C source; compiling it needs NVRTC" in done.stderr
    assert "pip install 'tvmrt[nvrtc]'" in done.stderr


def test_without_a_driver_the_vm_says_so(tmp_path: Path) -> None:
    done = _run(_folder("cuda_mlp_ptx"), {"TVMRT_LIBCUDA": str(tmp_path / "no-libcuda.so.1")})
    assert done.returncode != 0
    assert "DeviceUnavailableError" in done.stderr
    assert "cannot load the NVIDIA driver library" in done.stderr
