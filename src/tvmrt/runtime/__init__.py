"""tvmrt.runtime: TVM's runtime API (``tvm.runtime``) without TVM.

Devices, NDArrays and DLPack, packed functions and the global registry, modules and
module loading, the params format, benchmarking and profiling reports.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from tvmrt.runtime import executor, nd, ndarray, profiling
from tvmrt.runtime.benchmark import BenchmarkResult
from tvmrt.runtime.compat import enabled
from tvmrt.runtime.device import (
    Device,
    DLDeviceType,
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
from tvmrt.runtime.dtype import DataType, DataTypeCode
from tvmrt.runtime.kernel_services import num_threads
from tvmrt.runtime.module import (
    Module,
    PyModule,
    load_module,
    load_static_library,
    register_system_lib_func,
    system_lib,
)
from tvmrt.runtime.ndarray import NDArray, array, empty, from_dlpack
from tvmrt.runtime.object import (
    Object,
    ObjectGeneric,
    ShapeTuple,
    String,
    const,
    convert,
    convert_to_object,
)
from tvmrt.runtime.object_path import ObjectPath, ObjectPathPair
from tvmrt.runtime.packed_func import PackedFunc
from tvmrt.runtime.params import (
    load_param_dict,
    load_param_dict_from_file,
    save_param_dict,
    save_param_dict_to_file,
)
from tvmrt.runtime.profiling import Report
from tvmrt.runtime.registry import (
    get_global_func,
    list_global_func_names,
    register_extension,
    register_func,
    remove_global_func,
)

__all__ = [
    # devices
    "Device",
    "DLDeviceType",
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
    # data
    "DataType",
    "DataTypeCode",
    "NDArray",
    "empty",
    "array",
    "from_dlpack",
    "ndarray",
    "nd",
    # objects
    "Object",
    "ObjectGeneric",
    "String",
    "ObjectPath",
    "ObjectPathPair",
    "ShapeTuple",
    "convert",
    "convert_to_object",
    "const",
    # functions and modules
    "PackedFunc",
    "register_func",
    "register_extension",
    "get_global_func",
    "list_global_func_names",
    "remove_global_func",
    "Module",
    "PyModule",
    "load_module",
    "system_lib",
    "load_static_library",
    "executor",
    "register_system_lib_func",
    "enabled",
    # params
    "save_param_dict",
    "load_param_dict",
    "save_param_dict_to_file",
    "load_param_dict_from_file",
    # timing
    "BenchmarkResult",
    "num_threads",
    "profiling",
    "Report",
]

# TVM's tvm.runtime.vm / profiler_vm / container / object_generic, imported when first
# named (``import tvmrt`` stays free of the Relay VM and its loaders)
_LAZY_SUBMODULES = ("vm", "profiler_vm", "container", "object_generic")


def __getattr__(name: str) -> ModuleType:
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"tvmrt.runtime.{name}")
    from tvmrt.error import FunctionNotFoundError

    raise FunctionNotFoundError(f"module 'tvmrt.runtime' has no attribute {name!r}")
