"""A CPU-only artifact on another device is refused at load, naming the device it was
built for; it used to fail inside its first kernel ("Mismatched image.device_type"), or,
for a legacy build, run its CPU kernels on the device's memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.cli import tvmrt
from support.opencl import opencl_unusable
from support.paths import REPO
from tvmrt import runtime
from tvmrt.artifact import find_artifact, load_artifact
from tvmrt.error import DeviceUnavailableError

DIGITS = REPO / "examples" / "digits"
CPU_ONLY = [DIGITS / "model", DIGITS / "model" / "standalone.so", DIGITS / "tvm016"]


@pytest.mark.parametrize("path", CPU_ONLY, ids=["tvm-ffi-folder", "tvm-ffi-factory", "tvm016"])
@pytest.mark.parametrize("device", [runtime.opencl, runtime.cuda, runtime.vulkan])
def test_a_cpu_build_is_refused_on_another_device(path: Path, device: object) -> None:
    dev = device(0)  # type: ignore[operator]
    with pytest.raises(DeviceUnavailableError, match="was built for the CPU only") as info:
        load_artifact(find_artifact(path), dev)
    kind = str(dev).split("(")[0]
    assert f"cannot run on {kind}" in str(info.value)
    assert isinstance(info.value, RuntimeError)  # the builtin TVM users catch


def test_cli_refuses_before_running() -> None:
    if opencl_unusable():
        pytest.skip(str(opencl_unusable()))
    for verb in ("run", "bench", "profile"):
        done = tvmrt(verb, DIGITS / "model", "--device", "opencl")
        assert done.returncode == 2, done.stderr
        assert "'deploy.so' was built for the CPU only: it holds no OpenCL kernels" in done.stderr
        assert "drop --device opencl" in done.stderr
        assert "Mismatched" not in done.stderr
        assert done.stdout == ""
