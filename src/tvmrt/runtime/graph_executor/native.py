"""The C runtime's graph executor behind TVM's Python faces (issue 43, item 2).

``lib["default"](dev)`` of a factory :func:`~tvmrt.runtime.load_module` read, and
``graph_executor.create(json, lib, dev)`` over a library it read, give a ``GraphExecutor``
module of libtvmrt_runtime (its packed functions: ``graph_funcs.c``) when the C runtime can
run the graph; :class:`~tvmrt.contrib.graph_executor.GraphModule` is the same face over
either engine. ``factory["debug_create"]`` and ``debugger.debug_executor.create`` give the C
runtime's debug executor the same way (``graph_debug.c``: per-node timing and outputs, for
:class:`~tvmrt.contrib.debugger.debug_executor.GraphModuleDebug`). The C runtime loads
the library's file itself (its kernels only: the blob's params are dropped again), and a
factory's params are bound to each executor without a copy (``set_input_zero_copy`` of the
factory's arrays), so weights are held once, as the Python engine holds them.

The Python engine runs the rest, and :func:`refusal` says why (``""``: the C engine may):
``TVMRT_GRAPH_ENGINE=python`` (``native`` makes a refusal an error instead), a device other
than the CPU and OpenCL, a library that was not loaded from a file or changed after loading
(``import_module``, ``remove_params``), kernels of Python (``PyModule``), CUDA device code,
kernels that import ``TVM*`` functions by name or call a runtime function only the Python
registry has (what the file holds is read once per loaded module). TVM 0.7/0.8 linked
params (``_lookup_linked_param``) are read by both engines. A graph the C runtime refuses
is handed to the Python engine too, whose errors are the words users know.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from tvmrt.error import ArgumentTypeError, ArrayError, TVMError, UnsupportedError
from tvmrt.runtime.device import Device
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray

__all__ = ["ENGINE_VARIABLE", "create", "engine_wanted", "kernels", "refusal"]

ENGINE_VARIABLE = "TVMRT_GRAPH_ENGINE"
_CPU = 1
# the devices the C graph executor runs on from Python: the CPU, and OpenCL, whose arrays are
# the C runtime's (backends/opencl.py); CUDA's from Python are the Python backend's
_GRAPH_DEVICES = (_CPU, 4)
# the modules over a kernel library (its first import): factories, AOT's metadata module
_WRAPPERS = ("GraphExecutorFactory", "AotExecutorFactory", "metadata_module")


def engine_wanted(variable: str = ENGINE_VARIABLE) -> str | None:
    """``TVMRT_GRAPH_ENGINE`` (or the AOT executor's ``variable``): None (the C engine where
    it can), ``"native"`` or ``"python"``."""
    wanted = os.environ.get(variable) or None
    if wanted not in (None, "native", "python"):
        raise ArgumentTypeError(f"{variable} must be unset, 'native' or 'python', got {wanted!r}")
    return wanted


def refusal(
    lib: Module,
    devices: Sequence[Device],
    root: Module | None = None,
    variable: str = ENGINE_VARIABLE,
) -> str:
    """Why the C engine must not run a graph (or, with the AOT executor's ``variable``, a
    model) over ``lib``'s kernels on ``devices`` ("" if it may); ``root``: the module
    ``load_module`` returned (the factory), if not ``lib``."""
    if engine_wanted(variable) == "python":
        return f"{variable}=python"
    served = _GRAPH_DEVICES if variable == ENGINE_VARIABLE else (_CPU,)
    if any(dev.device_type not in served for dev in devices):
        return f"a device other than the {'CPU or OpenCL' if len(served) > 1 else 'CPU'} is given"
    loaded = root if root is not None else lib
    path = loaded.source_file
    if path is None or loaded._native_changed:
        return "the library was not loaded from a file, or changed after loading"
    if loaded._native_refusal is None:  # what the file holds: read once per loaded module
        loaded._native_refusal = _library_refusal(lib, path, loaded)
    return loaded._native_refusal


def _library_refusal(lib: Module, path: str, loaded: Module) -> str:
    from tvmrt.runtime.loaders.needs import c_runtime_refusal

    host = lib
    while host.type_key in _WRAPPERS and host.imported_modules:  # down to the kernels
        host = host.imported_modules[0]
    # OpenCL kernels are the C runtime's whichever engine runs (loaders/opencl.py)
    devices_code = [m.type_key for m in host.imported_modules if m.type_key != "opencl"]
    if devices_code:
        return f"its kernels launch on device code ({', '.join(devices_code)} modules)"
    return c_runtime_refusal(path, loaded)


def kernels(lib: Module, root: Module | None) -> Module:
    """The C runtime's module of the kernels of ``lib`` (loaded once per Python module)."""
    from tvmrt.runtime import native_module

    owner = root if root is not None else lib
    kernels = owner._native_kernels
    if kernels is None:
        assert owner.source_file is not None
        loaded = native_module.load_fresh(owner.source_file)
        # a factory: keep its kernel library, not the factory (its copy of the params)
        kernels = owner._native_kernels = loaded.imported_modules[0] if root is not None else loaded
    return kernels


def create(
    graph_json: str,
    lib: Module,
    devices: Sequence[Device],
    params: Mapping[str, NDArray] | None = None,
    root: Module | None = None,
    debug: bool = False,
) -> Module | None:
    """A C-runtime ``GraphExecutor`` module over ``lib``'s kernels, or None where the Python
    engine runs it (see :func:`refusal`); ``params``: bound without copies (a factory's);
    ``debug``: a debug executor (``tvm.graph_executor_debug.create``, ``graph_debug.c``)."""
    from tvmrt.runtime import native_module

    if root is None and lib.type_key == "GraphExecutorFactory" and lib.imported_modules:
        root, lib = lib, lib.imported_modules[0]  # the kernels, not the factory's param copy
    why = refusal(lib, devices, root)
    if why:
        if engine_wanted() == "native":
            raise UnsupportedError(f"the graph cannot run on the C engine: {why}")
        return None
    flat = [v for dev in devices for v in (dev.device_type, dev.device_id)]
    try:
        maker = "tvm.graph_executor_debug.create" if debug else "tvm.graph_executor.create"
        executor = native_module.c_global(maker)(graph_json, kernels(lib, root), *flat)
    except TVMError:
        if engine_wanted() == "native":
            raise
        return None  # the Python engine gives its own words for what C refused
    assert isinstance(executor, native_module.NativeModule)
    made: native_module.NativeModule = executor
    if debug:  # with TVM's profile and profile_rpc, which Python makes
        from tvmrt.runtime.graph_executor.native_debug import DebugExecutor

        made = DebugExecutor(executor, graph_json, devices)
    made.graph_json = graph_json  # type: ignore[attr-defined]  # for the face's extensions
    if params and not _bind(made, params):
        if engine_wanted() == "native":
            raise UnsupportedError(
                "the graph cannot run on the C engine: a factory param has another shape "
                "than its input (the Python engine reshapes it, as TVM)"
            )
        return None
    return made


def _bind(executor: Module, params: Mapping[str, NDArray]) -> bool:
    """Bind a factory's ``params`` to ``executor``'s inputs without copies (a copy where
    the array cannot be viewed); False for a param of another shape than its input."""
    bind, copy = executor["set_input_zero_copy"], executor["set_input"]
    index = executor["get_input_index"]
    for name, value in params.items():
        if index(name) < 0:
            continue  # as TVM: params the graph does not use are ignored
        try:
            bind(name, value)
        except ArrayError:  # not 64-byte aligned, or another layout: a copy
            try:
                copy(name, value)
            except ArrayError:
                return False
    return True
