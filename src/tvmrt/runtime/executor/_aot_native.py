"""The C runtime's AOT executor behind TVM's ``AotModule`` (issue 43, item 2).

``factory["default"](cpu(0))`` of an AOT factory :func:`~tvmrt.runtime.load_module` read
from its file gives an ``AotExecutor`` module of libtvmrt_runtime (``aot.c``: TVM's packed
functions, the metadata's names) where the C runtime may run the library's kernels, as the
graph executor does (:mod:`tvmrt.runtime.graph_executor.native`, whose refusals apply: a
library not from a file or changed after loading, kernels importing ``TVM*`` functions by
name or calling a function only Python's registry has). The C runtime loads the file's
kernel library once per loaded module (its copy of the params is dropped) and each
executor gets the Python factory's params copied into its inputs, as the Python engine's
executors do, so the weights are held as often as there.

``TVMRT_AOT_ENGINE=python`` keeps the Python engine (``executor/_aot.py``); ``=native``
makes a refusal an :class:`~tvmrt.error.UnsupportedError` saying why.
"""

from __future__ import annotations

from collections.abc import Mapping

from tvmrt.error import TVMError, UnsupportedError
from tvmrt.runtime.device import Device
from tvmrt.runtime.graph_executor.native import engine_wanted, kernels, refusal
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray

__all__ = ["ENGINE_VARIABLE", "create"]

ENGINE_VARIABLE = "TVMRT_AOT_ENGINE"


def create(factory: Module, device: Device, params: Mapping[str, NDArray]) -> Module | None:
    """A C-runtime ``AotExecutor`` module of ``factory``'s library on ``device`` with
    ``params`` set, or None where the Python engine runs it (and words what it refuses:
    a device other than cpu(0), as TVM)."""
    from tvmrt.runtime import native_module

    if device.device_type != 1 or device.device_id != 0:
        return None
    lib = factory.imported_modules[0]
    why = refusal(lib, [device], factory, ENGINE_VARIABLE)
    if why:
        if engine_wanted(ENGINE_VARIABLE) == "native":
            raise UnsupportedError(f"the AOT model cannot run on the C engine: {why}")
        return None
    try:
        executor = native_module.c_global("tvm.aot_executor.create")(kernels(lib, factory), device)
        assert isinstance(executor, Module)
        set_input = executor["set_input"]
        for name, value in params.items():
            set_input(name, value)
    except TVMError:
        if engine_wanted(ENGINE_VARIABLE) == "native":
            raise
        return None  # the Python engine gives its own words for what C refused
    return executor
