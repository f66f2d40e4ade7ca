"""Files (and a device) to a model: the one path from an artifact to its executors.

:func:`load_artifact` sniffs the form (:func:`tvmrt.artifact.forms.form_of`), loads the
library (``load_module``: this runs its code), refuses device code on the CPU, and lets
the form build the executor. On a device of an RPC session the library is uploaded to
the session's server and loaded there instead (the form then runs unchanged over the
remote module), after the form has said that it runs remotely.
:func:`executor_from_graph` is the same graph path for a graph JSON over a module already
in memory (``tvmrt.serve.model_from_graph``).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from tvmrt.artifact.devices import check_device_code
from tvmrt.artifact.files import ArtifactBytes, ArtifactFiles
from tvmrt.artifact.forms import LoadRequest, form_of
from tvmrt.artifact.forms.base import RemoteLibrary, remote_refusal
from tvmrt.artifact.forms.graph_build import graph_executor, params_of
from tvmrt.artifact.inspect_binary import describe_library, inspect_library_code
from tvmrt.artifact.model import Executor, LoadedModel
from tvmrt.binfmt.abi import RELAX_KINDS
from tvmrt.binfmt.files import MAX_CODE_BYTES, MAX_GRAPH_JSON_BYTES, MAX_PARAMS_BYTES
from tvmrt.runtime.device import Device, cpu
from tvmrt.runtime.executor import AotExecutorFactory
from tvmrt.runtime.graph_executor import GraphExecutorFactory
from tvmrt.runtime.loaders import memory
from tvmrt.runtime.loaders.dispatch import Sniffed
from tvmrt.runtime.loaders.memory import memory_file
from tvmrt.runtime.module import Module, load_module
from tvmrt.runtime.remote_session import is_remote, remote_session

__all__ = ["executor_from_graph", "load_artifact"]


def load_artifact(
    files: ArtifactFiles | ArtifactBytes,
    device: Device | None = None,
    debug: bool = False,
    dump_root: str | None = None,
) -> LoadedModel:
    """Load the library (this runs its code), create the executor and load the params.

    Parameters
    ----------
    files
        From :func:`~tvmrt.artifact.files.find_artifact`, or an
        :class:`~tvmrt.artifact.files.ArtifactBytes` of the same files held in memory
        (each is read through a memfd; nothing is written to a disk).
    device
        Where to run (default ``cpu(0)``); a graph on another device keeps the CPU as its
        second device (:func:`~tvmrt.artifact.devices.executor_devices`). A device of an
        RPC session (``session.cpu()``) runs the model on its server.
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
        If the kernels are device code and ``device`` is the CPU, or ``device``'s RPC
        session is closed.
    UnsupportedError
        If ``device`` is remote and the artifact's form does not run remotely.
    RPCError
        If the server cannot load the library.
    """
    if isinstance(files, ArtifactBytes):
        return _load_from_memory(files, device, debug, dump_root)
    dev = device or cpu()
    form, sniffed, _ = form_of(files)
    remote = None
    if is_remote(dev):
        if not form.remote:
            raise remote_refusal(form, dev)
        session = remote_session(dev)
        session.upload(files.lib, files.lib.name)
        lib: Module = session.load_module(files.lib.name)
        remote = _blob_of(files, sniffed)
    else:
        lib = load_module(files.lib)
        check_device_code(lib, dev, files.lib)
    model = form.load(LoadRequest(files, dev, debug, dump_root, remote), lib)
    model.device = dev
    return model


def _load_from_memory(
    held: ArtifactBytes, device: Device | None, debug: bool, dump_root: str | None
) -> LoadedModel:
    """:func:`load_artifact` of files held in memory, each behind a memfd while it loads."""
    graph = held.graph.encode() if isinstance(held.graph, str) else held.graph
    with memory.session(), contextlib.ExitStack() as stack:

        def path(data: bytes | bytearray | memoryview | None, limit: int) -> Path | None:
            return None if data is None else Path(stack.enter_context(memory_file(data, limit)))

        files = ArtifactFiles(
            Path(stack.enter_context(memory_file(held.lib))),
            path(graph, MAX_GRAPH_JSON_BYTES),
            path(held.params, MAX_PARAMS_BYTES),
            path(held.code, MAX_CODE_BYTES),
        )
        return load_artifact(files, device, debug, dump_root)


def _blob_of(files: ArtifactFiles, sniffed: Sniffed | None) -> RemoteLibrary:
    """The factory in the library's module blob, read from the file (nothing runs)."""
    found = describe_library(files.lib, sniffed, [])
    inspect_library_code(files.lib, sniffed, found, [])  # its problems are the server's
    for module in found.embedded:
        if isinstance(module, GraphExecutorFactory | AotExecutorFactory):
            return RemoteLibrary(module.type_key, frozenset(module.params))
        kind = module if isinstance(module, str) else module.type_key  # str: not loaded here
        if kind == "VMExecutable" or kind in RELAX_KINDS:
            return RemoteLibrary(kind)
    return RemoteLibrary()


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
