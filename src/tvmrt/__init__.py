"""tvmrt: run TVM-compiled models (graph JSON + kernel library + params) without TVM.

``import tvmrt`` gives TVM's common top-level names (``tvmrt.cpu()``, ``tvmrt.nd.array``,
``tvmrt.runtime``, ``tvmrt.contrib.graph_executor``), so code written for TVM ports by
changing the import.
"""

from __future__ import annotations

from tvmrt import contrib, error, runtime
from tvmrt.contrib import graph_executor  # registers the factory loaders
from tvmrt.error import TVMError
from tvmrt.runtime import (
    DataType,
    Device,
    cl,
    cpu,
    cuda,
    device,
    ext_dev,
    get_global_func,
    gpu,
    metal,
    mtl,
    opencl,
    register_func,
    rocm,
    vpi,
    vulkan,
)
from tvmrt.runtime import ndarray as nd

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "error",
    "runtime",
    "contrib",
    "nd",
    "TVMError",
    "DataType",
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
    "register_func",
    "get_global_func",
]
