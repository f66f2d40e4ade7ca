"""An artifact run on an RPC server, as a :class:`~tvmrt.artifact.model.LoadedModel`.

``tvmrt run/bench ARTIFACT --rpc HOST:PORT`` goes through here: the library is uploaded
and loaded by the server, which builds the executor (``lib["default"](dev)`` for a
factory, ``tvm.graph_executor.create`` + ``load_params`` for a folder); the inputs and
outputs the caller sees come from reading the artifact here without running any of its
code (:func:`~tvmrt.artifact.inspection.inspect_artifact`), so a library built for the
board's architecture works from any host.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from tvmrt.artifact.files import ArtifactFiles
from tvmrt.artifact.forwarding import DebugForwarding, ModuleForwarding
from tvmrt.artifact.inspection import inspect_artifact
from tvmrt.artifact.model import Executor, GraphTiming, LoadedModel, TensorInfo
from tvmrt.artifact.report import TensorReport
from tvmrt.contrib.debugger.debug_executor import GraphModuleDebug
from tvmrt.contrib.graph_executor import GraphModule, create, get_device
from tvmrt.error import ModuleLoadError, UnsupportedError
from tvmrt.rpc.client import RPCSession
from tvmrt.runtime.device import RPC_SESS_MASK, Device
from tvmrt.runtime.graph_executor.graph import Graph, parse_graph
from tvmrt.runtime.graph_executor.roles import output_labels
from tvmrt.runtime.graph_executor.storage import plan_storage
from tvmrt.runtime.module import Module

__all__ = ["RemoteGraphExecutor", "RemoteGraphProfiler", "load_remote_artifact"]

# forms whose library a TVM RPC server loads as one file
_FORMS = ("factory", "folder")


class RemoteGraphExecutor(ModuleForwarding):
    """A graph executor living on an RPC server, behind the ``Executor`` interface."""

    def __init__(
        self,
        module: GraphModule,
        inputs: Sequence[TensorInfo],
        outputs: Sequence[TensorInfo],
        labels: list[str],
    ) -> None:
        self.module = module
        self._inputs = list(inputs)
        self._outputs = list(outputs)
        self._labels = labels

    @property
    def inputs(self) -> Sequence[TensorInfo]:
        """The inputs a caller sets (the params are on the server already)."""
        return self._inputs

    @property
    def outputs(self) -> Sequence[TensorInfo]:
        """The graph's outputs under TVM's names."""
        return self._outputs

    def output_labels(self) -> list[str]:
        """``node_i`` per output, as for a local graph."""
        return list(self._labels)

    def weight_problems(self, given: Collection[str]) -> list[str]:
        """Nothing to report: the static inspection already split weights from inputs."""
        return []

    def replicate(self, count: int) -> list[Executor]:
        """Not available: one remote session runs one executor."""
        raise UnsupportedError("a model on an RPC server cannot be replicated; open more sessions")


class RemoteGraphProfiler(DebugForwarding, RemoteGraphExecutor):
    """The server's debug executor behind ``ProfilingExecutor`` (``tvmrt profile --rpc``).

    Nodes are timed on the server (``run_individual``); the graph, its storage plan and
    the dump folder are here.
    """

    def __init__(
        self,
        module: GraphModuleDebug,
        inputs: Sequence[TensorInfo],
        outputs: Sequence[TensorInfo],
        graph: Graph,
        device_type: int,
    ) -> None:
        super().__init__(module, inputs, outputs, output_labels(graph))
        self.debug_module = module
        self.graph = graph
        self.device_type = device_type  # on the server: the storage plan's fallback device

    def node_timing(self) -> GraphTiming:
        """The graph, its storage plan and the node times of the last :meth:`run_timed`."""
        plan = plan_storage(self.graph, self.device_type)
        return GraphTiming(self.graph, plan, self.debug_module.debug_datum.time_list)


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
    form = report.form
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
    inputs = [_info(item) for item in graph_report.inputs]
    outputs = [_info(item) for item in graph_report.outputs]
    graph = parse_graph(graph_json)
    if debug_root is not None:
        raw = _debug_module(lib, graph_json, device, factory)
        debug = GraphModuleDebug(raw, [device], graph_json, debug_root)
        if files.params is not None:
            debug.load_params(files.params.read_bytes())
        local_type = device.device_type % RPC_SESS_MASK
        profiler = RemoteGraphProfiler(debug, inputs, outputs, graph, local_type)
        return LoadedModel(profiler, lib, files, form, profiler=profiler)
    if factory:
        module = GraphModule(lib["default"](device))
    else:
        module = create(graph_json, lib, device)
        if files.params is not None:
            module.load_params(files.params.read_bytes())
    executor = RemoteGraphExecutor(module, inputs, outputs, output_labels(graph))
    return LoadedModel(executor, lib, files, form)


def _info(item: TensorReport) -> TensorInfo:
    return TensorInfo(item.name, tuple(item.shape), item.dtype)
