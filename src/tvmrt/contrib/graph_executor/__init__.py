"""TVM's graph executor (``tvm.contrib.graph_executor``) without TVM.

Typical use, unchanged from TVM apart from the import::

    from tvmrt.contrib import graph_executor
    from tvmrt import runtime

    lib = runtime.load_module("deploy_lib.so")
    module = graph_executor.create(open("deploy_graph.json").read(), lib, runtime.cpu())
    module.load_params(open("deploy_param.params", "rb").read())
    module.run(data=x)
    y = module.get_output(0).numpy()
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Sequence
from typing import Any

import numpy as np

from tvmrt.error import ArgumentTypeError, ArrayError, InvalidArgumentError, UnsupportedError
from tvmrt.runtime.benchmark import BenchmarkResult
from tvmrt.runtime.device import RPC_SESS_MASK, Device
from tvmrt.runtime.device_type import DLDeviceType
from tvmrt.runtime.executor.protocol import ModuleFace, TensorInfo
from tvmrt.runtime.graph_executor import native
from tvmrt.runtime.graph_executor.checks import check_out, is_read_only, unknown_input
from tvmrt.runtime.graph_executor.executor import (
    GraphExecutor,
    as_ndarray,
    output_info,
    zero_copy_array,
)
from tvmrt.runtime.graph_executor.factory import GraphExecutorFactory
from tvmrt.runtime.graph_executor.graph import Graph, parse_graph
from tvmrt.runtime.graph_executor.roles import classify_inputs, output_labels
from tvmrt.runtime.graph_executor.storage import StoragePlan, plan_storage
from tvmrt.runtime.module import Module
from tvmrt.runtime.native_module import NativeModule
from tvmrt.runtime.ndarray import NDArray, empty
from tvmrt.runtime.object import String
from tvmrt.runtime.params import blob_view, mapped_file, read_param_names
from tvmrt.runtime.registry import register_func

__all__ = [
    "create",
    "get_device",
    "GraphModule",
    "GraphExecutor",
    "GraphExecutorFactory",
    "Graph",
    "parse_graph",
    "StoragePlan",
    "plan_storage",
]

# given an executor face, a new one of the same graph that uses its weights (``replicate``)
MakeReplica = Callable[["GraphModule"], "GraphModule"]


def get_device(
    libmod: Module, device: Device | Sequence[Device]
) -> tuple[list[Device], int, list[int]]:
    """Normalise ``device`` (one Device or a list) as TVM does.

    Returns
    -------
    tuple
        ``(device_list, num_rpc_devices, [type0, id0, type1, id1, ...])``.

    Raises
    ------
    ValueError
        If ``device`` is not a Device or a list of Devices, or mixes RPC and local devices.
    """
    if isinstance(device, Device):
        devices = [device]
    elif isinstance(device, list | tuple) and device:
        devices = list(device)
    else:
        raise InvalidArgumentError("dev has to be the type of Device or a list of Device")
    for dev in devices:
        if not isinstance(dev, Device):
            raise InvalidArgumentError("dev has to be the type of Device or a list of Device")
    num_rpc = sum(dev.device_type >= RPC_SESS_MASK for dev in devices)
    if num_rpc and num_rpc != len(devices):
        raise InvalidArgumentError("Either all or none of the devices should be rpc.")
    if num_rpc and getattr(libmod, "remote_global_func", None) is None:
        raise InvalidArgumentError(
            "RPC devices need the module loaded in their session (remote.load_module(...)), "
            f"got a local {libmod.type_key!r} module"
        )
    # as TVM: a remote device is named to its server without the session bits
    flat = [v for dev in devices for v in (dev.device_type % RPC_SESS_MASK, dev.device_id)]
    return devices, num_rpc, flat


def create(graph_json_str: str, libmod: Module, device: Device | Sequence[Device]) -> GraphModule:
    """Create a graph executor over the kernels of ``libmod``.

    The graph is validated, storage is planned and allocated, and every kernel is looked
    up and bound here, so a bad graph or a missing kernel fails now, not in ``run``.

    Parameters
    ----------
    graph_json_str
        The graph JSON text.
    libmod
        Module with the kernels (a loaded library, or a :class:`~tvmrt.runtime.PyModule`).
    device
        One Device, or a list for heterogeneous graphs (the first is the host/fallback).

    Returns
    -------
    GraphModule
        The executor's Python interface.

    Raises
    ------
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
    >>> m.run(x=np.arange(4, dtype="float32"))
    >>> m.get_output(0).numpy()
    array([1., 2., 3., 4.], dtype=float32)
    """
    if not isinstance(graph_json_str, str):
        raise ArgumentTypeError(
            "graph_json_str must be a str (the graph JSON text), "
            f"got {type(graph_json_str).__name__}"
        )
    devices, num_rpc, flat = get_device(libmod, device)
    if num_rpc:  # the server builds the executor (TVM's tvm.graph_executor.create)
        fcreate = libmod.remote_global_func("tvm.graph_executor.create")  # type: ignore[attr-defined]
        return GraphModule(fcreate(graph_json_str, libmod, *flat), graph_json_str)
    made = native.create(graph_json_str, libmod, devices)  # the C runtime's, where it runs it
    if made is not None:
        return GraphModule(made, graph_json_str)
    return GraphModule(GraphExecutor(parse_graph(graph_json_str), libmod, devices), graph_json_str)


class GraphModule(ModuleFace):
    """Python interface of a graph executor module (TVM's ``GraphModule``).

    Every call goes through the module's packed functions, looked up once here, so any
    module with TVM's graph-executor functions works, local or on an RPC server; with
    tvmrt's executor, ``run`` is its straight-line program of kernel calls bound at create.

    It is also a :class:`~tvmrt.runtime.executor.protocol.Executor` (tvmrt extension):
    ``inputs`` and ``outputs`` come from ``get_input_info``/``get_output_info``, the
    labels and the weight check from the graph JSON.

    Parameters
    ----------
    module
        The executor module, e.g. ``lib["default"](dev)`` or the result of ``create``.
    graph_json
        The graph JSON text (tvmrt; ``create`` passes it, ``lib["get_graph_json"]()`` of a
        factory gives it): needed for ``output_labels`` and ``weight_problems``.
    weights
        Input names whose values the creator set as weights (a factory's params); the
        names of params loaded or shared later are added here.
    make_replica
        Given this module, a new one of the same graph using its weights (``replicate``);
        None: not replicated.

    Attributes
    ----------
    module
        The underlying executor module; ``module[name]`` gives its packed functions.
    """

    def __init__(
        self,
        module: Module,
        graph_json: str | None = None,
        weights: Collection[str] = (),
        make_replica: MakeReplica | None = None,
    ) -> None:
        super().__init__(module)
        self._set_input_zero_copy = module["set_input_zero_copy"]
        self._set_output_zero_copy = module["set_output_zero_copy"]
        self._get_input_info = module["get_input_info"]
        self._load_params = module["load_params"]
        self._share_params = module["share_params"]
        self._known_inputs: set[str] = set()
        # an executor on a TVM RPC server: inputs are copied into its arrays, as TVM does
        self._remote = module.type_key == "rpc"
        self._native = isinstance(module, NativeModule)  # the C runtime's executor
        if self._native:  # the Python engine's refusals of an out argument, made here
            self._out_check = check_out
        # the C runtime's executor carries its graph (graph_executor.native)
        self._graph_json = graph_json or getattr(module, "graph_json", None)
        self._parsed: Graph | None = None
        self._weights = set(weights)
        self._make_replica = make_replica

    # functions TVM's GraphModule does not look up: found on first use, so a remote
    # executor of a TVM that lacks them still works for everything else
    def _get_output_info(self) -> Any:
        return self.module["get_output_info"]()

    def _get_output_index(self, name: str) -> Any:
        return self.module["get_output_index"](name)

    def _load_params_from_file(self, path: str) -> Any:
        return self.module["load_params_from_file"](path)

    @property
    def executor(self) -> GraphExecutor:
        """The local :class:`GraphExecutor` behind this module (tvmrt extension)."""
        if not isinstance(self.module, GraphExecutor):
            raise ArgumentTypeError(f"module {self.module.type_key!r} is not a tvmrt GraphExecutor")
        return self.module

    @property
    def storage_plan(self) -> StoragePlan:
        """Pools and their sizes (tvmrt extension): the Python engine's, or for the C
        runtime's executor (on the CPU) the plan of the graph, which it allocates."""
        if isinstance(self.module, GraphExecutor):
            return self.module.plan
        if self._remote:
            raise ArgumentTypeError("the storage plan of a remote executor stays on its server")
        return plan_storage(self.graph, DLDeviceType.kDLCPU)

    # -- tvmrt's Executor interface --------------------------------------------------------
    @property
    def graph(self) -> Graph:
        """The graph, parsed from the JSON given at creation (tvmrt extension); an
        UnsupportedError if none was."""
        if self._parsed is None:
            if self._graph_json is None:
                raise UnsupportedError(
                    "this GraphModule was made without its graph JSON: pass graph_json= "
                    "(a factory's lib['get_graph_json']()) to use tvmrt's extensions"
                )
            self._parsed = parse_graph(self._graph_json)
        return self._parsed

    @property
    def inputs(self) -> list[TensorInfo]:
        """The graph's inputs that the params did not supply, in graph order."""
        graph, weights = self.graph, self.weight_names
        infos = []
        for nid in graph.arg_nodes:
            name = graph.nodes[nid].name
            if name not in weights:
                eid = graph.entry_id(nid)
                infos.append(TensorInfo(name, tuple(graph.shapes[eid]), str(graph.dltypes[eid])))
        return infos

    @property
    def outputs(self) -> list[TensorInfo]:
        """The graph's outputs under TVM's names (``node``, or ``node:i`` for a node with
        several), as ``get_output_info`` keys them."""
        shapes, dtypes = output_info(self.graph)
        return [TensorInfo(key, tuple(shapes[key]), dtypes[key]) for key in shapes]

    def output_labels(self) -> list[str]:
        """``node_i`` per output: TVM's key ``node:i`` with ``_`` (``output_labels``)."""
        return output_labels(self.graph)

    @property
    def weight_names(self) -> frozenset[str]:
        """The names the params supplied: the creator's, those loaded or shared, and the
        inputs a local executor keeps out of ``get_input_info`` (linked params)."""
        held: set[str] = set()
        if not self._remote:  # a server's info map stays on the server
            shown = set(self.get_input_info()[0])
            held = {self.graph.nodes[nid].name for nid in self.graph.arg_nodes} - shown
        return frozenset(self._weights | held)

    def weight_problems(self, given: Collection[str]) -> list[str]:
        """Weight inputs without a value, or params of another model (``classify_inputs``)."""
        return classify_inputs(self.graph, self.weight_names | set(given)).problems()

    def replicate(self, count: int) -> list[GraphModule]:
        """``count`` more executors over the same kernels, using this one's weight arrays.

        Raises
        ------
        UnsupportedError
            If this module was made without a way to share its weights.
        """
        make = self._make_replica
        if make is None:
            raise UnsupportedError(
                "this graph executor cannot be replicated (it was created without a way "
                "to share its weights); load the artifact again"
            )
        return [make(self) for _ in range(count)]

    # -- inputs ------------------------------------------------------------------------
    def _copy_input(self, key: int | str, value: object) -> None:
        if self._remote and not (
            isinstance(value, NDArray) and value.device.device_type >= RPC_SESS_MASK
        ):
            self._get_input(key).copyfrom(value)  # host data goes into the remote input
        elif self._native and not isinstance(value, NDArray):
            if not isinstance(value, np.ndarray):
                source = as_ndarray(value)  # a DLPack tensor, viewed
                if source is None:  # a list, a scalar: numpy makes an array of it
                    self._convert_input(key, value)
                else:
                    self._set_input(key, source)
                return
            try:  # an array of the input's shape and dtype goes in as it is
                self._set_input(key, value)
            except ArrayError:  # else numpy converts it, as TVM's set_input (copyfrom)
                self._convert_input(key, value)
        else:
            self._set_input(key, value)

    def _convert_input(self, key: int | str, value: object) -> None:
        """``value`` converted by ``copyfrom`` (numpy converts its dtype) into an array of
        input ``key``'s shape and dtype, in the Python engine's words, then set by the C
        executor (which refuses an input bound to read-only memory)."""
        target = self._get_input(key)
        staged = empty(target.shape, target.dtype, target.device)
        try:
            staged.copyfrom(value)
        except ArrayError as exc:
            name = self.graph.nodes[self.graph.arg_nodes[key]].name if isinstance(key, int) else key
            raise ArrayError(f"input {name!r}: {exc}") from None
        self._set_input(key, staged)

    def _check_input_name(self, key: object) -> None:
        if not isinstance(key, str) or key in self._known_inputs:
            return  # indices are checked by the executor
        if self._get_input_index(key) < 0:
            raise unknown_input(key, list(self.get_input_info()[0]))
        self._known_inputs.add(key)  # a graph's input names never change

    def set_input_zero_copy(
        self, key: int | str | None = None, value: object = None, **params: Any
    ) -> None:
        """Use the caller's memory as inputs, without copying.

        The array must have the input's shape, dtype and device, be contiguous and
        64-byte aligned (compiled kernels require it); every entry aliased with the
        input (through ``__nop`` reshapes) follows. The binding lasts until rebound.
        """
        if key is not None:
            self._check_input_name(key)
            self._set_input_zero_copy(key, *self._bindable(key, value, False))
        for name in params:
            self._check_input_name(name)
        for name, val in params.items():
            self._set_input_zero_copy(name, *self._bindable(name, val, False))

    def set_output_zero_copy(self, key: int | str, value: object) -> None:
        """Make the graph write output ``key`` (index or ``"node:i"``) into ``value``."""
        self._set_output_zero_copy(key, *self._bindable(key, value, True))

    def _bindable(self, key: int | str, value: object, output: bool) -> tuple[object, ...]:
        """The arguments after ``key`` of a zero-copy binding. The Python engine checks
        ``value`` itself; the C executor checks its shape, dtype, device, layout and
        alignment, and is told whether it is read-only (tvmrt's third argument: an output
        binding is refused, and an input one is never written), which only Python can see.
        A numpy array is refused here, in the Python engine's words, after the key."""
        if not self._native:
            return (value,)
        (self._get_output if output else self._get_input)(key)  # a bad key is refused
        arr = zero_copy_array(value, "set_output_zero_copy" if output else "set_input_zero_copy")
        return arr, int(is_read_only(arr))

    def get_input(self, index: int | str, out: NDArray | None = None) -> NDArray:
        """Input ``index`` (alias of the graph's memory), or a copy into ``out``."""
        self._check_input_name(index)
        if out is not None:
            if self._out_check is not None:
                self._out_check(out, f"get_input({index!r})")
            self._get_input(index, out)
            return out
        return self._get_input(index)  # type: ignore[no-any-return]

    def get_input_info(self) -> tuple[dict[str, tuple[int, ...]], dict[str, String]]:
        """``(shape_dict, dtype_dict)`` of inputs, without names loaded by ``load_params``;
        the dtypes are ``String`` objects, as TVM's (they compare equal to ``str``)."""
        info = self._get_input_info()
        return info["shape"], _strings(info["dtype"])

    def get_output_info(self) -> tuple[dict[str, tuple[int, ...]], dict[str, String]]:
        """``(shape_dict, dtype_dict)`` of outputs, keyed by node name (dtypes as above)."""
        info = self._get_output_info()
        return info["shape"], _strings(info["dtype"])

    def get_output_index(self, name: str) -> int:
        """Index of the output named ``name`` (``"node"`` or ``"node:i"``), or -1."""
        return int(self._get_output_index(name))

    def debug_get_output(self, node: int | str, out: NDArray | None = None) -> NDArray:
        """Not available here; use the debug executor."""
        raise UnsupportedError("Please use debugger.debug_executor as graph_executor instead.")

    def load_params(self, params_bytes: bytes | bytearray | memoryview) -> None:
        """Load a params blob (TVM's format); unknown names are ignored."""
        if self._native and not isinstance(params_bytes, bytes | bytearray | memoryview):
            params_bytes = blob_view(params_bytes)  # the Python engine's words, or a view
        self._load_params(params_bytes)  # read in place: no copy of the blob
        self._weights.update(read_param_names(params_bytes))

    def load_params_from_file(self, path: str | os.PathLike[str]) -> None:
        """Load a ``.params`` file, memory-mapped: the file is never read whole (tvmrt)."""
        self._load_params_from_file(os.fspath(path))
        if self._remote:
            return  # the path is the server's
        with mapped_file(path) as blob:
            self._weights.update(read_param_names(blob))

    def share_params(
        self, other: GraphModule, params_bytes: bytes | bytearray | memoryview
    ) -> None:
        """Use ``other``'s arrays for the params named in ``params_bytes`` (weights held once)."""
        self._share_params(other.module, params_bytes)
        self._weights.update(read_param_names(params_bytes))

    def benchmark(
        self,
        device: Device,
        func_name: str = "run",
        repeat: int = 5,
        number: int = 5,
        min_repeat_ms: float | None = None,
        limit_zero_time_iterations: int = 100,
        end_to_end: bool = False,
        cooldown_interval_ms: float = 0,
        repeats_to_cooldown: int = 1,
        **kwargs: Any,
    ) -> BenchmarkResult:
        """Time the graph (TVM's ``GraphModule.benchmark``).

        Parameters
        ----------
        device
            Device to synchronise around measurements.
        func_name
            Function to time (``"run"``); ignored with ``end_to_end``.
        repeat
            Number of measurements returned.
        number
            Runs per measurement (grows to reach ``min_repeat_ms``).
        min_repeat_ms
            Minimum length of one measurement in ms (``None`` = 0).
        limit_zero_time_iterations
            Retries of a zero-time measurement.
        end_to_end
            Time copying inputs in, running and copying outputs to fresh host arrays.
        cooldown_interval_ms
            Sleep between measurements (not used with ``end_to_end``, as in TVM).
        repeats_to_cooldown
            Measurements between sleeps.
        kwargs
            Inputs, set once before timing (or on every run with ``end_to_end``).

        Returns
        -------
        BenchmarkResult
            Seconds per run, one value per measurement.
        """
        min_ms = 0 if min_repeat_ms is None else min_repeat_ms
        if end_to_end:
            flat = [v for item in kwargs.items() for v in item]
            evaluator = self.module.time_evaluator(
                "run_from_inputs", device, number, repeat, min_ms, limit_zero_time_iterations
            )
            return evaluator(device.device_type % RPC_SESS_MASK, device.device_id, *flat)
        if kwargs:
            self.set_input(**kwargs)
        evaluator = self.module.time_evaluator(
            func_name,
            device,
            number,
            repeat,
            min_ms,
            limit_zero_time_iterations,
            cooldown_interval_ms,
            repeats_to_cooldown,
        )
        return evaluator()


def _strings(dtypes: Any) -> dict[str, String]:
    return {str(name): String(str(dtype)) for name, dtype in dtypes.items()}
