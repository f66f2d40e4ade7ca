"""TVM's debug executor (``tvm.contrib.debugger.debug_executor``) without TVM.

Typical use, unchanged from TVM apart from the import::

    from tvmrt.contrib.debugger import debug_executor

    m = debug_executor.create(graph_json, lib, runtime.cpu(), dump_root="/tmp/tvmdbg")
    m.run(data=x)            # times every node, dumps outputs and a trace, prints a table
    report = m.profile(data=x)
    print(report)
    m.exit()                 # removes the dump folder

The dump folder is ``<dump_root>/_tvmdbg_device_CPU_0`` (see
:mod:`tvmrt.contrib.debugger.debug_result` for the files).

Where tvmrt departs from TVM, on purpose:

* ``create`` raises the device checks' own ``ValueError`` messages; TVM replaces them with
  "Please set '(USE_PROFILER ON)' in config.cmake", which does not apply to tvmrt.
* ``debug_get_output(node)`` returns the node's first output, not entry number ``node``
  (see :mod:`tvmrt.runtime.graph_executor.debug`).
"""

# SPDX-License-Identifier: Apache-2.0
# Derived from apache/tvm python/tvm/contrib/debugger/debug_executor.py (v0.19).

from __future__ import annotations

import contextlib
import io
import logging
import os
import shutil
import struct
import tempfile
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from tvmrt.contrib.debugger import debug_result
from tvmrt.contrib.graph_executor import GraphModule, get_device
from tvmrt.error import (
    ArgumentTypeError,
    InvalidArgumentError,
    NodeNotFoundError,
    RPCError,
    TVMError,
)
from tvmrt.runtime.benchmark import BenchmarkResult, TimingConfig
from tvmrt.runtime.device import RPC_SESS_MASK, Device
from tvmrt.runtime.executor.protocol import GraphTiming, not_replicated
from tvmrt.runtime.graph_executor import native
from tvmrt.runtime.graph_executor.debug import GraphExecutorDebug
from tvmrt.runtime.graph_executor.storage import plan_storage
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.profiling import Report
from tvmrt.runtime.registry import get_global_func

__all__ = ["create", "GraphModuleDebug", "GraphExecutorDebug"]

logger = logging.getLogger(__name__)

_DUMP_ROOT_PREFIX = "tvmdbg_"
_DUMP_PATH_PREFIX = "_tvmdbg_"


def create(
    graph_json_str: str,
    libmod: Module,
    device: Device | Sequence[Device],
    dump_root: str | os.PathLike[str] | None = None,
) -> GraphModuleDebug:
    """Create a debug executor over the kernels of ``libmod``.

    Parameters
    ----------
    graph_json_str
        The graph JSON text.
    libmod
        Module with the kernels. If it is an executor factory (it has
        ``get_graph_params``), its params are set as inputs.
    device
        One Device, or a list (the first is the host and times every node).
    dump_root
        Folder for the dump files; a new ``tvmdbg_*`` temporary folder by default.

    Returns
    -------
    GraphModuleDebug
        The debug executor's Python interface; the graph dump is already written.

    Raises
    ------
    TypeError
        If ``graph_json_str`` is not a str.
    ValueError
        If ``device`` is not a Device or a list of Devices.
    GraphFormatError
        If the graph is malformed.
    FunctionNotFoundError
        If ``libmod`` lacks a kernel the graph calls.

    Examples
    --------
    >>> import numpy as np
    >>> from tvmrt import runtime
    >>> from tvmrt.testing import graphs, numpy_op_library
    >>> m = create(graphs.add_one(4), numpy_op_library(), runtime.cpu())
    >>> m.debug_get_output("add").shape
    (4,)
    >>> m.exit()
    """
    if not isinstance(graph_json_str, str):
        raise ArgumentTypeError(
            "graph_json_str must be a str (the graph JSON text), "
            f"got {type(graph_json_str).__name__}"
        )
    devices, num_rpc, device_type_id = get_device(libmod, device)
    if num_rpc:  # the server builds the debug executor, as in TVM
        fcreate = libmod.remote_global_func("tvm.graph_executor_debug.create")  # type: ignore[attr-defined]
        func_obj = fcreate(graph_json_str, libmod, *device_type_id)
    else:  # the C runtime's debug executor where it runs the graph (graph_executor.native)
        made = native.create(graph_json_str, libmod, devices, debug=True)
        if made is None:
            made = get_global_func("tvm.graph_executor_debug.create")(
                graph_json_str, libmod, *device_type_id
            )
        func_obj = made
    gmod = GraphModuleDebug(func_obj, devices, graph_json_str, dump_root)
    try:
        params = libmod["get_graph_params"]()
    except (AttributeError, RPCError):
        return gmod  # a plain kernel library: params are set by the caller
    if isinstance(params, Mapping):
        gmod.set_input(**params)
        gmod._weights.update(params)
    # else a factory on an RPC server: its params stay there, as TVM does not set them over
    # RPC (the caller sets them, or profiles without)
    return gmod


class GraphModuleDebug(GraphModule):
    """Python interface of a debug executor (TVM's ``GraphModuleDebug``).

    Also a :class:`~tvmrt.runtime.executor.protocol.ProfilingExecutor` (tvmrt): its
    ``run`` stays TVM's (it times every node and writes the dump), ``run_timed`` returns
    that table, ``node_timing`` gives the graph, its plan and the node times.

    Parameters
    ----------
    module
        The debug executor module, e.g. ``factory["debug_create"]("default", dev)``.
    device
        The executor's devices (a list, as in TVM; a single Device is accepted too).
    graph_json_str
        The graph JSON text.
    dump_root
        Folder for the dump files; a new ``tvmdbg_*`` temporary folder if empty.
    weights
        Input names the creator set as weights, e.g. a server's factory's params (tvmrt).

    Attributes
    ----------
    debug_datum
        The :class:`~tvmrt.contrib.debugger.debug_result.DebugResult` of this module.
    """

    def __init__(
        self,
        module: Module,
        device: Device | Sequence[Device],
        graph_json_str: str,
        dump_root: str | os.PathLike[str] | None,
        weights: Collection[str] = (),
    ) -> None:
        self._dump_root = os.fspath(dump_root) if dump_root else None
        self._dump_path: str | None = None
        self._run_individual = module["run_individual"]
        self._run_individual_node = module["run_individual_node"]
        self._debug_get_output = module["debug_get_output"]
        self._execute_node = module["execute_node"]
        self._get_node_output = module["get_node_output"]
        self._profile = module["profile"]
        self._profile_rpc = module["profile_rpc"]
        super().__init__(module, graph_json_str, weights)
        devices = [device] if isinstance(device, Device) else list(device)
        self._devices = devices
        self._create_debug_env(graph_json_str, devices)

    # -- dump folder -----------------------------------------------------------------------
    @property
    def dump_path(self) -> str:
        """The folder of this module's dump files (tvmrt; TVM keeps it as ``_dump_path``)."""
        assert self._dump_path is not None  # set in __init__
        return self._dump_path

    @staticmethod
    def _format_device(device: Sequence[Device]) -> str:
        return str(device[0]).upper().replace("(", ":").replace(")", "")

    @staticmethod
    def _ensure_dir(directory: str) -> None:
        if not os.path.exists(directory):
            os.makedirs(directory, 0o700)

    def _get_dump_path(self, device: str) -> str:
        assert self._dump_root is not None
        folder_name = _DUMP_PATH_PREFIX + "device_" + device.replace(":", "_")
        path = os.path.join(self._dump_root, folder_name)
        self._ensure_dir(path)
        return path

    def _remove_dump_root(self) -> None:
        if self._dump_root and os.path.isdir(self._dump_root):
            shutil.rmtree(self._dump_root)

    def _create_debug_env(self, graph_json: str, device: Sequence[Device]) -> None:
        if not self._dump_root:
            self._dump_root = tempfile.mkdtemp(prefix=_DUMP_ROOT_PREFIX)
        self._dump_path = self._get_dump_path(self._format_device(device))
        self.debug_datum = debug_result.DebugResult(graph_json, self._dump_path)

    # -- running ---------------------------------------------------------------------------
    def _run_per_layer(self) -> None:
        """Execute the nodes one by one and keep a CPU copy of every output."""
        output_tensors = []
        for i, node in enumerate(self.debug_datum.get_graph_nodes()):
            self._execute_node(i)
            for j in range(self.debug_datum.get_graph_node_output_num(node)):
                logger.info(
                    "running node=%d, output_ind=%d, with node_name: %s", i, j, node["name"]
                )
                output_tensors.append(self._get_node_output(i, j))
        self.debug_datum.update_output_tensors(output_tensors)

    def _run_debug(self, timing: TimingConfig) -> None:
        self.debug_datum._time_list = self.run_individual(*timing.as_args())
        self._run_per_layer()

    def run(
        self,
        number: int = 10,
        repeat: int = 1,
        min_repeat_ms: float = 1,
        limit_zero_time_iterations: int = 100,
        cooldown_interval_ms: float = 0,
        repeats_to_cooldown: int = 1,
        sort_by_time: bool = True,
        **input_dict: Any,
    ) -> None:
        """Time every node, collect every node's outputs, dump them and print a table.

        Parameters
        ----------
        number
            Calls per measurement of a node (grows to reach ``min_repeat_ms``).
        repeat
            Measurements per node.
        min_repeat_ms
            Minimum duration of one measurement, in milliseconds.
        limit_zero_time_iterations
            Retries of a measurement that took zero time.
        cooldown_interval_ms
            Sleep between measurements, in milliseconds.
        repeats_to_cooldown
            Sleep after every this many measurements.
        sort_by_time
            Sort the table by time, longest first, and add a ``Total_time`` row.
        input_dict
            Inputs to set first.
        """
        if input_dict:
            self.set_input(**input_dict)
        timing = TimingConfig(
            number,
            repeat,
            min_repeat_ms,
            limit_zero_time_iterations,
            cooldown_interval_ms,
            repeats_to_cooldown,
        )
        self._run_debug(timing)
        self.debug_datum.dump_output_tensor()
        self.debug_datum.dump_chrome_trace()
        self.debug_datum.display_debug_result(sort_by_time)

    def run_individual(
        self,
        number: int,
        repeat: int = 1,
        min_repeat_ms: float = 0,
        limit_zero_time_iterations: int = 100,
        cooldown_interval_ms: float = 0,
        repeats_to_cooldown: int = 1,
    ) -> list[list[float]]:
        """Run the graph once, then time every node (parameters as in :meth:`run`).

        Returns
        -------
        list[list[float]]
            Per node (inputs and params included, with zeros), seconds per call for each
            repeat.
        """
        res = self._run_individual(
            number,
            repeat,
            min_repeat_ms,
            limit_zero_time_iterations,
            cooldown_interval_ms,
            repeats_to_cooldown,
        )
        (nodes_count,) = struct.unpack_from("@q", res, 0)
        offset = struct.calcsize("@q")
        format_data = "@" + "d" * repeat
        results = []
        for _ in range(nodes_count):
            results.append(list(struct.unpack_from(format_data, res, offset)))
            offset += struct.calcsize(format_data)
        return results

    def run_individual_node(
        self,
        index: int,
        number: int = 10,
        repeat: int = 1,
        min_repeat_ms: float = 0,
        limit_zero_time_iterations: int = 100,
        cooldown_interval_ms: float = 0,
        repeats_to_cooldown: int = 1,
    ) -> BenchmarkResult:
        """Time one node on the arrays it is bound to (no data is copied).

        Parameters
        ----------
        index
            Node index, as in ``debug_datum.get_graph_nodes()``.
        number, repeat, min_repeat_ms, limit_zero_time_iterations, cooldown_interval_ms, \
repeats_to_cooldown
            As in :meth:`run`.

        Returns
        -------
        BenchmarkResult
            Seconds per call, one value per repeat; zeros for an input or param node.

        Raises
        ------
        TVMError
            If ``index`` is not a node index.
        """
        res = self._run_individual_node(
            index,
            number,
            repeat,
            min_repeat_ms,
            limit_zero_time_iterations,
            cooldown_interval_ms,
            repeats_to_cooldown,
        )
        results = struct.unpack("@" + "d" * repeat, res)
        return BenchmarkResult(list(results))

    def debug_get_output(self, node: int | str, out: NDArray | None = None) -> NDArray:
        """Run the graph up to ``node`` and return the node's first output.

        Parameters
        ----------
        node
            Node index, or node name (the first node with that name).
        out
            Array to copy the output into; a new CPU array otherwise.

        Returns
        -------
        NDArray
            ``out``, or the new array.

        Raises
        ------
        AttributeError
            If no node has the name ``node``.
        RuntimeError
            If ``node`` is neither an int nor a str.
        """
        if isinstance(node, str):
            for i, graph_node in enumerate(self.debug_datum.get_graph_nodes()):
                if graph_node["name"] == node:
                    node_index = i
                    break
            else:
                raise NodeNotFoundError(f"Could not find a node named {node} in this graph.")
        elif isinstance(node, int | np.integer):
            node_index = int(node)
        else:
            raise TVMError("Require node index or name only.")
        if out is not None:
            self._debug_get_output(node_index, out)
            return out
        return self._debug_get_output(node_index)  # type: ignore[no-any-return]

    def profile(self, collectors: Sequence[object] | None = None, **input_dict: Any) -> Report:
        """Run the graph and report the time of every kernel call and of the whole run.

        Parameters
        ----------
        collectors
            Extra metric collectors; must be ``None`` (tvmrt has none).
        input_dict
            Inputs to set first.

        Returns
        -------
        Report
            Per-call rows (Name, Duration (us), Percent, Device, Count, Argument Shapes,
            Hash and layouts where the graph has them), per-device totals and the
            configuration (``Executor: Graph``, ``Number of threads``).
        """
        if input_dict:
            self.set_input(**input_dict)
        if self.module.type_key == "rpc":
            if collectors is not None:
                raise InvalidArgumentError("Profiling with collectors is not supported over RPC")
            return Report.from_json(self._profile_rpc())
        report = self._profile(collectors)
        if not isinstance(report, Report):
            raise ArgumentTypeError(f"profile returned {type(report).__name__}, expected a Report")
        return report

    # -- tvmrt's ProfilingExecutor interface ------------------------------------------------
    def run_timed(self, number: int, repeat: int) -> str:
        """Time every node (:meth:`run`); returns the table it prints (tvmrt extension)."""
        table = io.StringIO()
        with contextlib.redirect_stdout(table):
            self.run(number=number, repeat=repeat)
        return table.getvalue().rstrip("\n")

    def node_timing(self) -> GraphTiming:
        """The graph, its storage plan (made from the graph JSON, as the executor made its
        own) and the node times of the last :meth:`run` (tvmrt)."""
        device_type = self._devices[0].device_type % RPC_SESS_MASK
        plan = plan_storage(self.graph, device_type)
        return GraphTiming(self.graph, plan, self.debug_datum.time_list)

    def replicate(self, count: int) -> list[GraphModule]:
        """Not offered (an UnsupportedError): one dump folder, one debug executor (tvmrt)."""
        raise not_replicated()

    def get_debug_result(self, sort_by_time: bool = True) -> str:
        """The timing table of the last :meth:`run` (see ``DebugResult.get_debug_result``)."""
        return self.debug_datum.get_debug_result(sort_by_time)

    def exit(self) -> None:
        """Remove the dump root folder and everything in it."""
        self._remove_dump_root()
