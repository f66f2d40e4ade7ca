"""Graph executors for the forms that carry a graph: folder, factory, MLF, tvmc package.

One path creates them all: over a graph JSON (``create(graph_json, lib, devices)``) or a
factory's own graph (``lib["default"](*devices)``), on
:func:`~tvmrt.artifact.devices.executor_devices`, with the params loaded once and shared
by every replica (the factory's own arrays, or ``share_params`` over the params blob).
On a device of an RPC session the server builds them, and what a local factory would
tell (its param names) is read from its file (``LoadRequest.remote``); the faces compute
the rest from the graph JSON.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Union

from tvmrt.artifact.devices import executor_devices
from tvmrt.artifact.forms.base import LoadRequest, RemoteLibrary
from tvmrt.artifact.model import LoadedModel
from tvmrt.contrib.graph_executor import GraphModule, create
from tvmrt.error import ModuleLoadError
from tvmrt.runtime.device import Device
from tvmrt.runtime.module import Module
from tvmrt.runtime.params import mapped_file

__all__ = ["FACTORY_KINDS", "ParamsSource", "graph_executor", "load_graph_model"]

Blob = Union[bytes, bytearray, memoryview]  # noqa: UP007 - a runtime alias on Python 3.10
# opens the params blob for one use (a file is mapped, bytes are used as they are)
ParamsSource = Callable[[], AbstractContextManager[Blob]]
# root modules that carry a graph and its params (TVM <= 0.7 names the factory differently)
FACTORY_KINDS = ("GraphExecutorFactory", "GraphRuntimeFactory")


def _params_file(path: str | os.PathLike[str]) -> ParamsSource:
    return lambda: mapped_file(path)  # mapped once per use, copied once into the inputs


def _params_bytes(blob: Blob) -> ParamsSource:
    return lambda: contextlib.nullcontext(blob)


def graph_executor(
    graph_json: str | None,
    lib: Module,
    device: Device,
    params: ParamsSource | None = None,
    shown: str = "the kernel library",
    remote: RemoteLibrary | None = None,
) -> tuple[GraphModule, frozenset[str]]:
    """An executor over ``graph_json`` (None: the factory ``lib``'s own graph), and the
    names its params supplied; replicas share its weights. ``remote``: ``lib`` is a
    module of an RPC session, and this is what its file holds.

    Raises
    ------
    ModuleLoadError
        If ``graph_json`` is None and ``lib`` is not a graph executor factory.
    """
    devices = executor_devices(device)
    factory_params = _factory_params(lib, shown, remote) if graph_json is None else []
    text = str(lib["get_graph_json"]()) if graph_json is None else graph_json

    def new_module() -> GraphModule:
        if graph_json is None:
            return GraphModule(lib["default"](*devices), text, factory_params, make_replica)
        module = create(text, lib, devices)
        return GraphModule(module.module, text, (), make_replica)

    def make_replica(first: GraphModule) -> GraphModule:
        replica = new_module()
        if params is not None:
            with params() as blob:
                replica.share_params(first, blob)
        return replica

    module = new_module()
    if params is not None:
        with params() as blob:
            module.load_params(blob)
    return module, module.weight_names


def _factory_params(lib: Module, shown: str, remote: RemoteLibrary | None) -> list[str]:
    key = lib.type_key if remote is None else remote.root
    if key not in FACTORY_KINDS:
        raise ModuleLoadError(
            f"{shown} carries no graph (its root module is {key!r}, not a "
            "GraphExecutorFactory); pass the graph JSON too"
        )
    return list(lib["get_graph_params"]() if remote is None else remote.params)


def load_graph_model(
    form: str, request: LoadRequest, lib: Module, graph_json: str | None
) -> LoadedModel:
    """The model of a form that carries a graph (``graph_json`` None: the factory's own).

    Raises
    ------
    ModuleLoadError
        If ``graph_json`` is None and ``lib`` is not a graph executor factory.
    """
    files, remote = request.files, request.remote
    params = None if files.params is None else _params_file(files.params)
    shown = f"library {str(files.lib)!r}"
    if not request.debug:
        executor, supplied = graph_executor(graph_json, lib, request.device, params, shown, remote)
        return LoadedModel(executor, lib, files, form, supplied)
    from tvmrt.contrib.debugger import debug_executor

    factory_params = _factory_params(lib, shown, remote) if graph_json is None else []
    text = graph_json if graph_json is not None else str(lib["get_graph_json"]())
    devices = executor_devices(request.device)
    if remote is not None and graph_json is None:  # the server's factory sets its params
        raw = lib["debug_create"]("default", *devices)
        debug = debug_executor.GraphModuleDebug(
            raw, devices, text, request.dump_root, weights=factory_params
        )
    else:  # a factory's params are set by create; its kernels are found through its imports
        debug = debug_executor.create(text, lib, devices, dump_root=request.dump_root)
    if params is not None:
        with params() as blob:
            debug.load_params(blob)
    return LoadedModel(debug, lib, files, form, debug.weight_names, debug)


def params_of(blob: Blob | None) -> ParamsSource | None:
    """A :data:`ParamsSource` over bytes already in memory (None stays None)."""
    return None if blob is None else _params_bytes(blob)
