"""``tvmrt.nd``: TVM's ``tvm.nd`` namespace (arrays and the device constructors)."""

from __future__ import annotations

from tvmrt.runtime.compat import numpyasarray
from tvmrt.runtime.device import (
    Device,
    cl,
    cpu,
    cuda,
    device,
    ext_dev,
    gpu,
    hexagon,
    metal,
    mtl,
    opencl,
    rocm,
    vpi,
    vulkan,
    webgpu,
)
from tvmrt.runtime.ndarray import NDArray, array, empty, from_dlpack

__all__ = [
    "NDArray",
    "array",
    "empty",
    "from_dlpack",
    "numpyasarray",
    "Device",
    "device",
    "cpu",
    "cuda",
    "gpu",
    "opencl",
    "cl",
    "vulkan",
    "metal",
    "mtl",
    "vpi",
    "rocm",
    "ext_dev",
    "hexagon",
    "webgpu",
]
