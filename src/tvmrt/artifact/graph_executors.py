"""The graph executor (and its debug executor) as an :class:`~tvmrt.artifact.model.Executor`.

Thin adapters over TVM's faces, :class:`~tvmrt.contrib.graph_executor.GraphModule` and
:class:`~tvmrt.contrib.debugger.debug_executor.GraphModuleDebug`: the inputs a caller sets
are the graph's inputs less the names the params supplied; outputs keep TVM's names
(``get_output_info``) and get the labels of
:func:`~tvmrt.runtime.graph_executor.roles.output_labels`. How a replica shares the weights
depends on where they came from (a factory's own arrays, or ``share_params`` over a params
blob), so the artifact form that created the executor passes that in. Everything the
adapter computes comes from the graph, so it works as well over an executor on an RPC
server (whose graph the form passes in, read here).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from tvmrt.artifact.forwarding import DebugForwarding, ModuleForwarding
from tvmrt.artifact.model import Executor, GraphTiming, TensorInfo
from tvmrt.contrib.debugger.debug_executor import GraphModuleDebug
from tvmrt.contrib.graph_executor import GraphModule
from tvmrt.error import UnsupportedError
from tvmrt.runtime.graph_executor.executor import GraphExecutor
from tvmrt.runtime.graph_executor.graph import Graph
from tvmrt.runtime.graph_executor.keys import output_info
from tvmrt.runtime.graph_executor.roles import classify_inputs, output_labels
from tvmrt.runtime.graph_executor.storage import plan_storage

__all__ = ["GraphExecutorAdapter", "GraphProfilingAdapter", "MakeReplica"]

# given an executor, a new one of the same graph that uses its weights
MakeReplica = Callable[[GraphModule], GraphModule]


class GraphExecutorAdapter(ModuleForwarding):
    """A tvmrt graph executor behind the :class:`~tvmrt.artifact.model.Executor` interface.

    Parameters
    ----------
    module
        The executor's Python face (``GraphModule(lib["default"](dev))`` or ``create(...)``).
    param_names
        The input names the params supplied (not inputs a caller sets).
    make_replica
        Makes a new executor sharing the weights of the one given; None if it cannot be
        replicated.
    graph
        The executor's graph; None: the local executor's own (a remote one's is passed).
    """

    module: GraphModule

    def __init__(
        self,
        module: GraphModule,
        param_names: Collection[str],
        make_replica: MakeReplica | None = None,
        graph: Graph | None = None,
    ) -> None:
        self.module = module
        self.param_names = frozenset(param_names)
        self._make_replica = make_replica
        self.graph = graph = module.executor.graph if graph is None else graph
        inputs = []
        for nid in graph.arg_nodes:
            name = graph.nodes[nid].name
            if name not in self.param_names:
                eid = graph.entry_id(nid)
                inputs.append(TensorInfo(name, tuple(graph.shapes[eid]), str(graph.dltypes[eid])))
        self._inputs = inputs
        shapes, dtypes = output_info(graph)
        self._outputs = [TensorInfo(n, tuple(shapes[n]), str(dtypes[n])) for n in shapes]

    @property
    def graph_executor(self) -> GraphExecutor:
        """The tvmrt :class:`GraphExecutor` running the graph."""
        return self.module.executor

    @property
    def inputs(self) -> Sequence[TensorInfo]:
        """The graph's inputs that the params did not supply, in graph order."""
        return self._inputs

    @property
    def outputs(self) -> Sequence[TensorInfo]:
        """The graph's outputs under TVM's names (``node`` or ``node:i``)."""
        return self._outputs

    def output_labels(self) -> list[str]:
        """``node_i`` per output: TVM's key ``node:i`` with ``_`` (:mod:`..output_names`)."""
        return output_labels(self.graph)

    def weight_problems(self, given: Collection[str]) -> list[str]:
        """Weight inputs without a value, or params of another model (see ``classify_inputs``)."""
        return classify_inputs(self.graph, self.param_names | set(given)).problems()

    def replicate(self, count: int) -> list[Executor]:
        """``count`` more executors over the same kernels, using this one's weight arrays.

        Raises
        ------
        UnsupportedError
            If this executor was made without a way to share its weights.
        """
        make = self._make_replica
        if make is None:
            raise UnsupportedError(
                "this graph executor cannot be replicated (it was created without a way "
                "to share its weights); load the artifact again"
            )
        return [
            GraphExecutorAdapter(make(self.module), self.param_names, make, self.graph)
            for _ in range(count)
        ]


class GraphProfilingAdapter(DebugForwarding, GraphExecutorAdapter):
    """The debug executor behind :class:`~tvmrt.artifact.model.ProfilingExecutor`."""

    def __init__(
        self,
        module: GraphModuleDebug,
        param_names: Collection[str],
        graph: Graph | None = None,
        device_type: int = 1,
    ) -> None:
        super().__init__(module, param_names, None, graph)
        self.debug_module = module
        self._device_type = device_type  # on the server: a remote plan's fallback device

    def node_timing(self) -> GraphTiming:
        """The graph, its storage plan and the node times of the last :meth:`run_timed`
        (a remote graph's plan is made here, as the server made it)."""
        executor = self.module.module
        if isinstance(executor, GraphExecutor):
            plan = executor.plan
        else:
            plan = plan_storage(self.graph, self._device_type)
        return GraphTiming(self.graph, plan, self.debug_module.debug_datum.time_list)

    def replicate(self, count: int) -> list[Executor]:
        """Not offered: debug executors write one dump folder each; load without debug.

        Raises
        ------
        UnsupportedError
            Always.
        """
        raise UnsupportedError(
            "a debug (profiling) executor is not replicated: load the artifact without "
            "debug to run it on several executors"
        )
