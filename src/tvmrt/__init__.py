"""tvmrt: run TVM-compiled models (graph JSON + kernel library + params) without TVM.

``import tvmrt`` gives TVM's common top-level names (``tvmrt.cpu()``, ``tvmrt.nd.array``,
``tvmrt.runtime``, ``tvmrt.contrib.graph_executor``), so code written for TVM ports by
changing the import.
"""

from __future__ import annotations

from typing import Any

from tvmrt import contrib, error, module, relax, relay, runtime
from tvmrt._version import __version__
from tvmrt.contrib import graph_executor
from tvmrt.error import TVMError
from tvmrt.runtime import (
    DataType,
    Device,
    cl,
    convert,
    cpu,
    cuda,
    device,
    ext_dev,
    get_global_func,
    gpu,
    metal,
    mtl,
    nd,
    opencl,
    register_extension,
    register_func,
    rocm,
    vpi,
    vulkan,
)


def compile(model: Any, *args: Any, **kwargs: Any) -> Any:
    """Compile an ONNX model into a graph-executor artifact (``tvmrt.compiler.compile``).

    Imports TVM on call only (the ``compile`` extra: ``pip install 'tvmrt[compile]'``);
    see :func:`tvmrt.compiler.compile` for the parameters.
    """
    from tvmrt.compiler import compile as compile_model

    return compile_model(model, *args, **kwargs)


__all__ = [
    "__version__",
    "compile",
    "error",
    "runtime",
    "contrib",
    "module",
    "relay",
    "relax",
    "nd",
    "TVMError",
    "DataType",
    "convert",
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
    "register_extension",
    "get_global_func",
]
