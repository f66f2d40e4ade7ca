"""Files (and a device) to a model: the one path from an artifact to its executors.

:func:`load_artifact` sniffs the form (:func:`tvmrt.artifact.forms.form_of`), loads the
library (``load_module``: this runs its code), refuses device code on the CPU, and lets
the form build the executor. :func:`executor_from_graph` is the same graph path for a
graph JSON over a module already in memory (``tvmrt.serve.model_from_graph``).
"""

from __future__ import annotations

from tvmrt.artifact.devices import check_device_code
from tvmrt.artifact.files import ArtifactFiles
from tvmrt.artifact.forms import LoadRequest, form_of
from tvmrt.artifact.forms.graph_build import graph_executor, params_of
from tvmrt.artifact.model import Executor, LoadedModel
from tvmrt.runtime.device import Device, cpu
from tvmrt.runtime.module import Module, load_module

__all__ = ["executor_from_graph", "load_artifact"]


def load_artifact(
    files: ArtifactFiles,
    device: Device | None = None,
    debug: bool = False,
    dump_root: str | None = None,
) -> LoadedModel:
    """Load the library (this runs its code), create the executor and load the params.

    Parameters
    ----------
    files
        From :func:`~tvmrt.artifact.files.find_artifact`.
    device
        Where to run (default ``cpu(0)``); a graph on another device keeps the CPU as its
        second device (:func:`~tvmrt.artifact.devices.executor_devices`).
    debug
        Create a profiling executor (``LoadedModel.profiler``): the debug executor for a
        graph, whole-run timing for an AOT build.
    dump_root
        The debug executor's dump folder (default: a new temporary folder).

    Raises
    ------
    ModuleLoadError
        If the library cannot be loaded here, or a factory library is expected but the
        library carries no graph.
    DeviceUnavailableError
        If the kernels are device code and ``device`` is the CPU.
    """
    request = LoadRequest(files, device or cpu(), debug, dump_root)
    form, _, _ = form_of(files)
    lib = load_module(files.lib)
    check_device_code(lib, request.device, files.lib)
    return form.load(request, lib)


def executor_from_graph(
    graph_json: str,
    lib: Module,
    device: Device | None = None,
    params: bytes | bytearray | memoryview | None = None,
) -> Executor:
    """An executor of ``graph_json`` over the kernels of ``lib`` (a library or a ``PyModule``).

    ``params`` (a params blob) are loaded into it; its replicas share them.
    """
    executor, _ = graph_executor(graph_json, lib, device or cpu(), params_of(params))
    return executor
