"""``GraphExecutorDebug``: the graph executor plus node-level timing, outputs and profiling.

This is TVM's C++ ``GraphExecutorDebug`` (``src/runtime/graph_executor/debug/``): the
same module (type key
``"GraphExecutor"``) with the packed functions ``run_individual``, ``run_individual_node``,
``execute_node``, ``get_node_output``, ``debug_get_output``, ``profile`` and
``profile_rpc`` added. Its constructor is the global function
``tvm.graph_executor_debug.create`` (a line of :mod:`tvmrt.runtime.builtins`), which
``factory["debug_create"]`` and :func:`tvmrt.contrib.debugger.debug_executor.create` call.

Where tvmrt departs from TVM, on purpose:

* ``debug_get_output(node)`` returns the node's first output (entry ``eid(node, 0)``). TVM
  returns entry number ``node``, which is another node's tensor as soon as an earlier node
  has several outputs.
* ``debug_get_output`` without ``out`` returns a CPU copy, like ``get_node_output``.
* The "last executed node" that ``execute_node`` continues from is also set by ``run``,
  ``run_individual``, ``profile`` (the last node) and ``debug_get_output`` (its node),
  which run nodes in graph order too; TVM leaves it unchanged there, so a later
  ``execute_node`` could read tensors whose memory another node has reused since.
* Timing arguments out of range raise ``ValueError`` naming the argument (TVM: a failed
  ``ICHECK``); a node index out of range raises :class:`~tvmrt.error.InternalError`, a
  ``TVMError``, as in TVM.
* ``profile`` takes no metric collectors: tvmrt has none (TVM's are PAPI counters).
"""

# SPDX-License-Identifier: Apache-2.0
# Derived from apache/tvm src/runtime/graph_executor/debug/graph_executor_debug.cc (v0.19).

from __future__ import annotations

import contextlib
import logging
import math
import operator
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tvmrt.error import (
    ArgumentTypeError,
    ArrayError,
    InternalError,
    TVMError,
    UnsupportedError,
    add_note,
)
from tvmrt.runtime.benchmark import TimingConfig, time_evaluate_config
from tvmrt.runtime.device import Device, DLDeviceType, cpu
from tvmrt.runtime.graph_executor.event_timing import (
    all_on_cuda,
    held,
    kernel_timer,
    time_with_events,
)
from tvmrt.runtime.graph_executor.executor import GraphExecutor
from tvmrt.runtime.graph_executor.graph import Graph, parse_graph
from tvmrt.runtime.graph_executor.packed import devices_from_packed_args
from tvmrt.runtime.kernel_services import num_threads
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.profiling import Count, Metric, Profiler, Report

__all__ = [
    "GraphExecutorDebug",
    "check_no_collectors",
    "create_debug_executor",
    "profile_graph",
    "profile_recorded",
    "shape_string",
]

logger = logging.getLogger(__name__)

_WARMUP_RUNS = 3  # profile(): "1 iteration does not seem enough" (TVM)


def shape_string(graph: Graph, eids: Sequence[int]) -> str:
    """TVM's ``ShapeString`` of graph entries: ``"float32[1, 784], float32[128, 784]"``.

    Shapes are the graph's own (unflattened) shapes, whatever ``flatten_data`` says.
    """
    return ", ".join(
        f"{graph.dltypes[eid]}[{', '.join(str(d) for d in graph.shapes[eid])}]" for eid in eids
    )


def check_no_collectors(collectors: Sequence[object] | None) -> None:
    """``profile``'s refusal of metric collectors: tvmrt has none (TVM's are PAPI counters)."""
    if collectors:
        raise UnsupportedError(
            "profile: metric collectors are not supported by tvmrt; pass collectors=None"
        )


def profile_graph(
    graph: Graph,
    devices: Sequence[Device],
    run: Callable[[], None],
    run_node: Callable[[int], None],
    timed: Sequence[int],
    node_device: Callable[[int], Device],
) -> Report:
    """TVM's ``Profile`` of a graph on the Python engine: ``run`` the graph 3 times, then
    once node by node, ``run_node`` of each of ``timed`` (the nodes with a call, in order) a
    report row; on a CUDA graph the calls' kernels are timed with CUDA events.

    ``node_device(nid)``: where node ``nid`` runs. (The C engine times its nodes itself:
    :func:`profile_recorded`.)
    """
    for _ in range(_WARMUP_RUNS):
        run()
    configuration = _configuration()
    if all_on_cuda([node_device(n) for n in timed]):
        with kernel_timer() as timer:  # each call's time: its kernels' own, from events
            prof = Profiler(devices, configuration, clock=timer.clock_ns)
            return _profile_nodes(graph, prof, run_node, timed, node_device, True)
    return _profile_nodes(
        graph, Profiler(devices, configuration), run_node, timed, node_device, False
    )


def profile_recorded(
    graph: Graph,
    devices: Sequence[Device],
    run: Callable[[], None],
    record: Callable[[], Sequence[tuple[int, int, int]]],
    node_device: Callable[[int], Device],
) -> Report:
    """TVM's ``Profile`` of a graph on an engine that times its nodes itself (the C
    executor's ``profile_nodes``): ``run`` the graph 3 times, then ``record()`` runs it once
    node by node and gives each call's node and its start and stop in ns; the rows are made
    from those afterwards, so no Python runs between the calls."""
    for _ in range(_WARMUP_RUNS):
        run()
    prof = Profiler(devices, _configuration())
    prof.start()
    calls = record()
    end = prof.now_ns()
    for nid, start_ns, stop_ns in calls:
        name = graph.nodes[nid].func_name
        prof.record_call(name, node_device(nid), start_ns, stop_ns, _node_metrics(graph, nid))
    prof.stop(at_ns=end)
    return prof.report()


def _configuration() -> dict[str, Metric]:
    return {"Executor": "Graph", "Number of threads": Count(num_threads())}


def _node_metrics(graph: Graph, nid: int) -> dict[str, Metric]:
    """A node's row metrics: its layout attributes, hash and ``Argument Shapes``."""
    node = graph.nodes[nid]
    metrics: dict[str, Metric] = {k: v for k, v in node.attrs.items() if "layout" in k}
    if "hash" in node.attrs:
        metrics["Hash"] = node.attrs["hash"]
    eids = [graph.entry_id(r.node_id, r.index) for r in node.inputs]
    eids += [graph.entry_id(nid, k) for k in range(node.num_outputs)]
    metrics["Argument Shapes"] = shape_string(graph, eids)
    return metrics


def _profile_nodes(
    graph: Graph,
    prof: Profiler,
    run_node: Callable[[int], None],
    timed: Sequence[int],
    node_device: Callable[[int], Device],
    on_cuda: bool,
) -> Report:
    """One run, node by node, into ``prof``; ``on_cuda``: each node's kernels queued behind
    a held stream (event_timing.held), so their events time the GPU alone."""
    prof.start()
    for nid in timed:
        dev = node_device(nid)
        prof.start_call(graph.nodes[nid].func_name, dev, _node_metrics(graph, nid))
        with held(dev) if on_cuda else contextlib.nullcontext():
            run_node(nid)
        prof.stop_call()
    prof.stop()
    return prof.report()


def _as_int(value: object, name: str) -> int:
    if isinstance(value, bool):
        raise ArgumentTypeError(f"{name} must be an integer, got bool")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise ArgumentTypeError(f"{name} must be an integer, got {type(value).__name__}") from None


class GraphExecutorDebug(GraphExecutor):
    """A graph executor that can also run, time and inspect one node at a time.

    Parameters
    ----------
    graph
        A parsed graph.
    lib
        Module supplying the graph's kernels.
    devices
        Devices of the graph; the first is the host and times every node.
    preset
        Arrays bound to inputs of the same name without copying (the factory's params).
    """

    def __init__(
        self,
        graph: Graph,
        lib: Module,
        devices: Sequence[Device],
        preset: Mapping[str, NDArray] | None = None,
    ) -> None:
        super().__init__(graph, lib, devices, preset)
        self._last_executed_node = -1

    # -- nodes -----------------------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        """Number of nodes, inputs and params included."""
        return len(self.graph.nodes)

    def node_index(self, name: str) -> int:
        """Index of the first node named ``name``; TVMError if there is none."""
        for nid, node in enumerate(self.graph.nodes):
            if node.name == name:
                return nid
        raise TVMError(f"cannot find a node named {name!r} among the {self.num_nodes} nodes")

    def _check_node(self, node: object, what: str) -> int:
        index = _as_int(node, f"{what}: node index")
        if not 0 <= index < self.num_nodes:
            raise InternalError(
                f"{what}: node index {index} is out of range; the graph has "
                f"{self.num_nodes} nodes (0 to {self.num_nodes - 1})"
            )
        return index

    def _num_node_outputs(self, nid: int) -> int:
        node = self.graph.nodes[nid]
        return node.num_outputs if node.is_op else 1

    def _node_device(self, nid: int) -> Device:
        """Device of the node's first output (the host for a node without outputs)."""
        if self._num_node_outputs(nid) == 0:
            return self.devices[0]
        return self.device_of_entry(self.graph.entry_id(nid, 0))

    def _run_node(self, nid: int) -> None:
        call = self.node_calls[nid]
        if call is None:
            return
        try:
            call()
        except Exception as exc:
            node = self.graph.nodes[nid]
            add_note(exc, f"while running node {nid} {node.name!r} (kernel {node.func_name!r})")
            raise

    def run(self) -> None:
        """Run every node once, in graph order."""
        self._last_executed_node = -1
        super().run()
        self._last_executed_node = self.num_nodes - 1

    # -- timing ----------------------------------------------------------------------------
    def run_individual_node(self, node_index: int, timing: TimingConfig) -> list[float]:
        """Time one node's kernel call with the time evaluator on the host device.

        The node runs on the arrays it is bound to: no inputs are copied.

        Returns
        -------
        list[float]
            Seconds per call, one value per repeat; zeros for an input or param node.

        Raises
        ------
        InternalError
            If ``node_index`` is out of range.
        """
        nid = self._check_node(node_index, "run_individual_node")
        return self._time_node(nid, timing)

    def _time_node(self, nid: int, timing: TimingConfig) -> list[float]:
        call = self.node_calls[nid]
        if call is None:
            return [0.0] * timing.repeat
        host = self.devices[0]
        node_dev = self._node_device(nid)
        timed: Callable[[], object] = call
        if node_dev != host and node_dev.device_type != DLDeviceType.kDLCPU:

            def timed() -> None:  # the host's sync does not wait for another device
                call()
                node_dev.sync()

        try:
            if node_dev.device_type == DLDeviceType.kDLCUDA:
                return time_with_events(timed, host, timing, node_dev)
            result = time_evaluate_config(timed, host, timing)()
        except Exception as exc:
            node = self.graph.nodes[nid]
            add_note(exc, f"while timing node {nid} {node.name!r} (kernel {node.func_name!r})")
            raise
        return [float(t) for t in result.results]

    def run_individual(self, timing: TimingConfig) -> list[list[float]]:
        """Run the graph once, then time every node with :meth:`run_individual_node`.

        Returns
        -------
        list[list[float]]
            Per node, seconds per call for each repeat (zeros for inputs and params; a
            NaN measurement becomes 0).
        """
        self.run()  # warm-up
        times = []
        op_count = 0
        for nid, node in enumerate(self.graph.nodes):
            node_times = [0.0 if math.isnan(t) else t for t in self._time_node(nid, timing)]
            times.append(node_times)
            if node.is_op:
                logger.info("Op #%d %s:", op_count, node.name)
                for r, t in enumerate(node_times):
                    logger.info("Iteration: %d: %s us/iter", r, t * 1e6)
                op_count += 1
        self._last_executed_node = self.num_nodes - 1
        return times

    # -- node outputs ----------------------------------------------------------------------
    def execute_node(self, node: int) -> None:
        """Run nodes up to ``node``, continuing from the last executed node when it is earlier.

        After the last executed node ``k``: ``node > k`` runs ``k+1 .. node``, ``node < k``
        runs ``0 .. node`` and ``node == k`` runs nothing. Changed inputs are not noticed.
        """
        nid = self._check_node(node, "execute_node")
        last = self._last_executed_node
        if nid > last:
            todo = range(last + 1, nid + 1)
        elif nid < last:
            todo = range(nid + 1)
        else:
            todo = range(0)
        for i in todo:
            self._run_node(i)
        self._last_executed_node = nid

    def get_node_output(self, node: int, out_index: int) -> NDArray:
        """A CPU copy of output ``out_index`` of ``node``, which must be the last executed.

        Raises
        ------
        InternalError
            If ``node`` is not the last node :meth:`execute_node` ran, or ``out_index`` is
            not one of its outputs.
        """
        nid = self._check_node(node, "get_node_output")
        if nid != self._last_executed_node:
            raise InternalError(
                f"get_node_output: node {nid} is not the last executed node "
                f"({self._last_executed_node}); call execute_node({nid}) first"
            )
        return self._node_output(nid, out_index, "get_node_output").copyto(cpu(0))

    def _node_output(self, nid: int, out_index: object, what: str) -> NDArray:
        index = _as_int(out_index, f"{what}: output index")
        count = self._num_node_outputs(nid)
        if not 0 <= index < count:
            raise InternalError(
                f"{what}: output index {index} is out of range; node {nid} "
                f"({self.graph.nodes[nid].name!r}) has {count} outputs"
            )
        return self.entries[self.graph.entry_id(nid, index)]

    def debug_get_output(self, node: int | str, out: NDArray | None = None) -> NDArray:
        """Run nodes ``0 .. node`` and return the node's first output.

        Parameters
        ----------
        node
            Node index, or name (the first node with that name).
        out
            Array to copy the output into (same shape); a CPU copy is made otherwise.

        Returns
        -------
        NDArray
            ``out``, or a new CPU array.
        """
        nid = self.node_index(node) if isinstance(node, str) else node
        nid = self._check_node(nid, "debug_get_output")
        for i in range(nid + 1):
            self._run_node(i)
        self._last_executed_node = nid
        arr = self._node_output(nid, 0, "debug_get_output")
        if out is None:
            return arr.copyto(cpu(0))
        if out.shape != arr.shape:
            raise ArrayError(
                f"debug_get_output: out has shape {out.shape}, but node {nid} "
                f"({self.graph.nodes[nid].name!r}) outputs shape {arr.shape}"
            )
        arr.copyto(out)
        return out

    # -- profiling -------------------------------------------------------------------------
    def profile(self, collectors: Sequence[object] | None = None) -> Report:
        """Run the graph 3 times, then once more timing every kernel call (TVM's ``Profile``;
        on a CUDA graph the calls' kernels are timed with CUDA events, as TVM's CUDA timer).

        Each call's row has the kernel's ``Name``, ``Duration (us)``, ``Device``,
        ``Argument Shapes`` (inputs then outputs, unflattened), ``Hash`` when the node has
        a ``hash`` attribute, and every node attribute whose name contains ``layout``.

        Raises
        ------
        NotImplementedError
            If ``collectors`` are given: tvmrt has no metric collectors.
        """
        check_no_collectors(collectors)
        timed = [nid for nid, call in enumerate(self.node_calls) if call is not None]
        report = profile_graph(
            self.graph, self.devices, self.run, self._run_node, timed, self._node_device
        )
        self._last_executed_node = self.num_nodes - 1
        return report

    # -- TVM's packed-function table -------------------------------------------------------
    def _packed_functions(self) -> dict[str, Callable[..., Any]]:
        def run_individual(*args: Any) -> bytes:
            times = self.run_individual(TimingConfig(*args))
            repeat = len(times[0]) if times else 0
            blob = bytearray(struct.pack("@q", len(times)))
            for node_times in times:
                blob += struct.pack("@" + "d" * repeat, *node_times)
            return bytes(blob)

        def run_individual_node(index: int, *args: Any) -> bytes:
            times = self.run_individual_node(index, TimingConfig(*args))
            return struct.pack("@" + "d" * len(times), *times)

        def debug_get_output(node: int | str, out: NDArray | None = None) -> NDArray | None:
            arr = self.debug_get_output(node, out)
            return None if out is not None else arr

        table = super()._packed_functions()
        table.update(
            {
                "run_individual": run_individual,
                "run_individual_node": run_individual_node,
                "execute_node": self.execute_node,
                "get_node_output": self.get_node_output,
                "debug_get_output": debug_get_output,
                "profile": self.profile,
                "profile_rpc": lambda: self.profile(None).json(),
            }
        )
        return table


def create_debug_executor(graph_json: str, lib: Module, *args: object) -> GraphExecutorDebug:
    """The global function ``tvm.graph_executor_debug.create``.

    Takes the arguments of ``tvm.graph_executor.create``
    (:func:`~tvmrt.runtime.graph_executor.packed.devices_from_packed_args`).
    """
    devices = devices_from_packed_args("tvm.graph_executor_debug.create", graph_json, lib, args)
    return GraphExecutorDebug(parse_graph(graph_json), lib, devices)
