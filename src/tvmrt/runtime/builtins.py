"""The global functions tvmrt itself provides, found by name and imported on first use.

This is the one table of tvmrt's own registrations (``runtime.registry`` consults it when a
name is not registered yet): module loaders (``runtime.module.loadfile_<suffix>`` for files,
``runtime.module.loadbinary_<type_key>`` for modules inside a factory's blob), executor
constructors, and the functions compiled kernels look up by name. Nothing registers itself
as a side effect of being imported, so ``import tvmrt`` imports none of these modules.

To add one: write the function in its own module under ``tvmrt.runtime`` and add a line
here, ``"global.name": "tvmrt.runtime.module_path:attribute"``. Only ``tvmrt.runtime``
modules may appear (the runtime imports nothing above it; tests/runtime/test_layers.py
checks this table too).
"""

from __future__ import annotations

__all__ = ["BUILTIN_FUNCTIONS", "LOADFILE_SUFFIXES"]

# file suffixes served by the loader's dispatcher (runtime/loaders/dispatch.py)
LOADFILE_SUFFIXES = ("so", "dll", "dylib", "tar", "o", "obj", "mlf")

_DISPATCH = "tvmrt.runtime.loaders.dispatch:loadfile"
_GRAPH_FACTORY = "tvmrt.runtime.graph_executor.factory:load_factory_binary"
_CUDA_FILE = "tvmrt.runtime.loaders.cuda:load_cuda_file"
_SORT = ("argsort", "argsort_nms", "sort", "topk")
_BLAS = "tvmrt.runtime.contrib.blas"
_BLAS_NAMES = [
    (lib, name)
    for lib in ("cblas", "mkl")
    for name in ("matmul", "batch_matmul", "batch_matmul_iterative")
]
_RANDOM = ("randint", "uniform", "normal", "random_fill", "random_fill_for_measure")

BUILTIN_FUNCTIONS: dict[str, str] = {
    # files -> modules
    **{f"runtime.module.loadfile_{suffix}": _DISPATCH for suffix in LOADFILE_SUFFIXES},
    # modules inside a factory blob, by type key
    "runtime.module.loadbinary_GraphExecutorFactory": _GRAPH_FACTORY,
    "runtime.module.loadbinary_GraphRuntimeFactory": _GRAPH_FACTORY,
    "runtime.module.loadbinary_AotExecutorFactory": (
        "tvmrt.runtime.executor._aot:load_factory_binary"
    ),
    "runtime.module.loadbinary_metadata_module": (
        "tvmrt.runtime.executor._aot:load_metadata_module"
    ),
    "runtime.module.loadbinary_static_library": ("tvmrt.runtime.static_library:load_static_binary"),
    "runtime.module.loadbinary_opencl": "tvmrt.runtime.loaders.opencl:load_opencl_binary",
    "runtime.module.loadbinary_cuda": "tvmrt.runtime.loaders.cuda:load_cuda_binary",
    **{f"runtime.module.loadfile_{k}": _CUDA_FILE for k in ("ptx", "cubin", "fatbin")},
    "runtime.module.loadbinary_VMExecutable": (
        "tvmrt.runtime.vm.executable:load_executable_binary"
    ),
    "runtime.ModuleLoadStaticLibrary": "tvmrt.runtime.static_library:load_static_library",
    # what Module and load_module hand down (TVM's Module methods call runtime.Module*)
    "runtime.ModuleLoadFromFile": "tvmrt.runtime.loaders.dispatch:load_module_file",
    "runtime.ModuleLoadFromMemory": "tvmrt.runtime.loaders.dispatch:load_module_memory",
    "runtime.ModuleIsDSOExportable": "tvmrt.runtime.export:is_dso_exportable",
    "runtime.ModuleExportLibrary": "tvmrt.runtime.export:export_module",  # tvmrt's own name
    "runtime.NumThreads": "tvmrt.runtime.kernel_services:num_threads",
    "runtime.config_threadpool": "tvmrt.runtime.kernel_services:config_threadpool",
    # executors
    "tvm.graph_executor.create": "tvmrt.runtime.graph_executor.packed:create_executor",
    "tvm.graph_executor_factory.create": "tvmrt.runtime.graph_executor.factory:create_factory",
    "tvm.crt_aot_factory.create": "tvmrt.runtime.executor._crt_aot:create_factory",
    # TVM <= 0.7's name of the same constructor (the deployment guide's ``fcreate``)
    "tvm.graph_runtime.create": "tvmrt.runtime.graph_executor.packed:create_executor",
    "tvm.graph_executor_debug.create": "tvmrt.runtime.graph_executor.debug:create_debug_executor",
    "runtime.Load_Executable": "tvmrt.runtime.vm.executable:load_executable",
    # system library
    "runtime.SystemLib": "tvmrt.runtime.loaders.systemlib:global_system_lib",
    "module._GetSystemLib": "tvmrt.runtime.loaders.systemlib:global_system_lib",
    # params
    "runtime.SaveParams": "tvmrt.runtime.params:save_param_dict",
    "runtime.LoadParams": "tvmrt.runtime.params:load_param_dict",
    "runtime.SaveParamsToFile": "tvmrt.runtime.params:save_param_dict_to_file",
    "runtime.LoadParamsFromFile": "tvmrt.runtime.params:load_param_dict_from_file",
    # called by compiled host code
    "__tvm_set_device": "tvmrt.runtime.loaders.opencl:SET_DEVICE",  # kDLCUDA in C
    # called by kernels (call_packed externs of TOPI; TVM v0.19's src/runtime/contrib)
    **{f"tvm.contrib.sort.{name}": f"tvmrt.runtime.contrib.sort:{name}" for name in _SORT},
    **{f"tvm.contrib.{lib}.{name}": f"{_BLAS}:{name}" for lib, name in _BLAS_NAMES},
    "tvm.contrib.mkl.matmul_u8s8s32": f"{_BLAS}:matmul_u8s8s32",
    "tvm.contrib.dnnl.matmul": f"{_BLAS}:dnnl_matmul",
    **{f"tvm.contrib.random.{name}": f"tvmrt.runtime.contrib.random:{name}" for name in _RANDOM},
}
