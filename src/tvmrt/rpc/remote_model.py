"""An artifact run on an RPC server, as a :class:`~tvmrt.artifact.model.LoadedModel`.

``tvmrt run/bench ARTIFACT --rpc HOST:PORT`` goes through here: the library is uploaded
and loaded by the server, which builds the executor (``lib["default"](dev)`` for a
factory, ``tvm.graph_executor.create`` + ``load_params`` for a folder); the inputs and
outputs the caller sees come from reading the artifact here without running any of its
code (:func:`~tvmrt.artifact.inspection.inspect_artifact`), so a library built for the
board's architecture works from any host.
"""

from __future__ import annotations

from tvmrt.artifact.files import ArtifactFiles
from tvmrt.artifact.inspection import inspect_artifact
from tvmrt.artifact.model import LoadedModel
from tvmrt.contrib.debugger.debug_executor import GraphModuleDebug
from tvmrt.contrib.graph_executor import GraphModule, create, get_device
from tvmrt.error import ModuleLoadError, UnsupportedError
from tvmrt.rpc.client import RPCSession
from tvmrt.runtime.device import Device
from tvmrt.runtime.graph_executor.graph import parse_graph
from tvmrt.runtime.module import Module

__all__ = ["load_remote_artifact"]

# forms whose library a TVM RPC server loads as one file
_FORMS = ("factory", "folder")


def _debug_module(lib: Module, graph_json: str, device: Device, factory: bool) -> Module:
    if factory:
        return lib["debug_create"]("default", device)  # type: ignore[no-any-return]
    _, _, flat = get_device(lib, device)
    fcreate = lib.remote_global_func("tvm.graph_executor_debug.create")  # type: ignore[attr-defined]
    return fcreate(graph_json, lib, *flat)  # type: ignore[no-any-return]


def load_remote_artifact(
    session: RPCSession, files: ArtifactFiles, device: Device, debug_root: str | None = None
) -> LoadedModel:
    """Upload ``files.lib``, build the executor on the server, load the params there.

    Parameters
    ----------
    session
        The RPC session (``rpc.connect`` or a tracker's ``request``).
    files
        The artifact's files; a factory library or a folder with graph JSON + library
        (+ params).
    device
        A device of ``session`` (``session.cpu()``...).
    debug_root
        Build the server's debug executor instead, dumping here (``tvmrt profile``).

    Raises
    ------
    UnsupportedError
        For artifact forms a TVM RPC server cannot load as one library (AOT, MLF, tvmc).
    ModuleLoadError
        If the artifact's static inspection fails (the library is unreadable).
    """
    report = inspect_artifact(files)
    form = str(report.form)
    if form not in _FORMS:
        raise UnsupportedError(
            f"artifact form {form!r} cannot run over RPC; expected one of {list(_FORMS)} "
            "(a factory library, or graph JSON + library + params)"
        )
    graph_report = report.graph
    if graph_report is None:
        raise ModuleLoadError(f"cannot read the graph of {str(files.lib)!r}: {report.problems}")
    name = files.lib.name
    session.upload(str(files.lib), name)
    lib = session.load_module(name)
    factory = files.graph is None
    graph_json = str(lib["get_graph_json"]()) if factory else files.graph.read_text()  # type: ignore[union-attr]
    graph = parse_graph(graph_json)
    shown = {item.name for item in graph_report.inputs}
    # what the static inspection did not list as an input is a weight set on the server
    weights = {graph.nodes[nid].name for nid in graph.arg_nodes} - shown
    if debug_root is not None:
        raw = _debug_module(lib, graph_json, device, factory)
        debug = GraphModuleDebug(raw, [device], graph_json, debug_root)
        debug._weights.update(weights)
        if files.params is not None:
            debug.load_params(files.params.read_bytes())
        return LoadedModel(debug, lib, files, form, profiler=debug)
    if factory:
        module = GraphModule(lib["default"](device), graph_json, weights)
    else:
        module = GraphModule(create(graph_json, lib, device).module, graph_json, weights)
        if files.params is not None:
            module.load_params(files.params.read_bytes())
    return LoadedModel(module, lib, files, form)
