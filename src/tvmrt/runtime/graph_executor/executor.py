"""``GraphExecutor``: the executor module (TVM's C++ ``GraphExecutor``) over any kernel module.

Everything is resolved at creation: the graph is validated, pools are allocated once,
every entry becomes a view of its pool, and every kernel is looked up and bound to its
argument arrays. :meth:`GraphExecutor.run` is then a plain loop over bound calls.
Zero-copy rebinding swaps the views of an alias group and rebinds only the kernels
that touch it.
"""

from __future__ import annotations

import os
import threading
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from tvmrt.error import (
    ArgumentTypeError,
    ArrayError,
    InputNotFoundError,
    InvalidArgumentError,
    KernelError,
    TVMError,
    add_note,
)
from tvmrt.runtime.device import Device
from tvmrt.runtime.graph_executor.binding import OpBinding, find_op, noop, prepare_step
from tvmrt.runtime.graph_executor.checks import (
    check_index,
    copy_out,
    external_problem,
    is_read_only,
    unknown_input,
    unknown_output,
)
from tvmrt.runtime.graph_executor.graph import Graph
from tvmrt.runtime.graph_executor.linked import linked_params, param_codes
from tvmrt.runtime.graph_executor.memory import alias_groups, allocate_entries, device_for_type
from tvmrt.runtime.graph_executor.program import compile_steps, failed_step, replace_step
from tvmrt.runtime.graph_executor.storage import StoragePlan, check_host_memory, plan_storage
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray, empty, from_dlpack
from tvmrt.runtime.object import ShapeTuple
from tvmrt.runtime.packed_func import BoundCall, PackedFunc
from tvmrt.runtime.params import iter_param_records, mapped_file, read_param_names

__all__ = ["GraphExecutor", "as_ndarray", "output_info", "zero_copy_array"]


def as_ndarray(value: object) -> NDArray | None:
    """``value`` as an NDArray without copying if it is one or a DLPack producer, else None."""
    if isinstance(value, NDArray):
        return value
    if isinstance(value, np.ndarray):
        return None
    if hasattr(value, "__dlpack__"):
        return from_dlpack(value)
    return None


def zero_copy_array(value: object, what: str) -> NDArray:
    """:func:`as_ndarray` of ``value`` for ``what`` (``set_input_zero_copy``), which refuses
    anything else (a numpy array among them: its memory is bound by NDArray, explicitly)."""
    arr = as_ndarray(value)
    if arr is None:
        raise ArgumentTypeError(
            f"{what} needs an NDArray or a DLPack tensor, got {type(value).__name__}"
        )
    return arr


class GraphExecutor(Module):
    """Executes a graph over the kernels of ``lib`` on ``devices`` (the first is the host).

    Parameters
    ----------
    graph
        A parsed graph (:func:`~tvmrt.runtime.graph_executor.graph.parse_graph`).
    lib
        Module supplying every ``func_name`` of the graph (its imports are searched too).
    devices
        Devices of the graph; the first is the fallback for entries of other types.
    preset
        Arrays to bind to inputs of the same name without copying (the factory's
        params): inputs bound this way get no pool of their own.

    Inputs are found by name or index, outputs by index, ``"name:i"`` or a bare node name
    (``input_index``, ``output_index``); each miss has one error
    (:mod:`~tvmrt.runtime.graph_executor.checks`).
    """

    def __init__(
        self,
        graph: Graph,
        lib: Module,
        devices: Sequence[Device],
        preset: Mapping[str, NDArray] | None = None,
    ) -> None:
        super().__init__()
        if not devices:
            raise InvalidArgumentError("a graph executor needs at least one device")
        self.graph = graph
        self.lib = lib
        self.devices = tuple(devices)
        self.param_codes = param_codes(lib)
        self.plan: StoragePlan = plan_storage(graph, self.devices[0].device_type)
        check_host_memory(self.plan)
        self._run_lock = threading.Lock()
        self._packed: dict[str, PackedFunc] | None = None
        self._input_map = {graph.nodes[nid].name: i for i, nid in enumerate(graph.arg_nodes)}
        self._output_map = {
            f"{graph.nodes[h.node_id].name}:{h.index}": i for i, h in enumerate(graph.heads)
        }
        self._param_names: set[str] = set()
        self._alias_groups = alias_groups(graph)
        linked = linked_params(lib, graph)  # TVM 0.7/0.8 link-params libraries
        self._param_names.update(linked)
        self.linked_param_names = frozenset(linked)
        self.entries: list[NDArray] = allocate_entries(
            graph,
            self.plan,
            self.devices,
            self._input_map,
            self._alias_groups,
            {**linked, **(preset or {})},
        )
        self.node_calls: list[BoundCall | None] = [None] * len(graph.nodes)
        self._ops: list[OpBinding] = []
        self._ops_by_eid: dict[int, list[OpBinding]] = defaultdict(list)
        for nid, node in enumerate(graph.nodes):
            if node.is_op:
                op = find_op(graph, lib, nid, node)
                self._bind(op)
                self._ops.append(op)
        for op in self._ops:
            for eid in set(op.arg_eids):
                self._ops_by_eid[eid].append(op)
        self._step_ops: list[OpBinding] = []
        self._program: Callable[[], None] = noop
        self._refresh_steps()

    # -- set-up ------------------------------------------------------------------------
    @property
    def type_key(self) -> str:
        return "GraphExecutor"

    def device_of_entry(self, eid: int) -> Device:
        """Device holding entry ``eid`` (by its pool's device type)."""
        dev_type = self.plan.pools[self.plan.entry_storage[eid]].device_type
        return device_for_type(self.devices, dev_type)

    def _bind(self, op: OpBinding) -> None:
        op.step = prepare_step(op, self.entries)
        self.node_calls[op.node_id] = op.call

    def _refresh_steps(self) -> None:
        self._step_ops = [op for op in self._ops if op.node.func_name != "__nop"]
        for k, op in enumerate(self._step_ops):
            op.step_index = k
        self._program = compile_steps([op.step for op in self._step_ops])

    # -- running -------------------------------------------------------------------------
    def run(self) -> None:
        """Run every node once, in graph order."""
        if not self._run_lock.acquire(blocking=False):
            raise TVMError(
                "this graph executor is already running in another thread; use one "
                "executor per thread (share weights between them with share_params)"
            )
        try:
            self._program()
        except KernelError as exc:
            raise KernelError(f"{self._where(exc)}: {exc}") from exc
        except Exception as exc:
            add_note(exc, f"while running {self._where(exc)}")
            raise
        finally:
            self._run_lock.release()

    def _where(self, exc: BaseException) -> str:
        index = failed_step(self._program, exc.__traceback__)
        if index is None or not 0 <= index < len(self._step_ops):
            return "the graph"
        op = self._step_ops[index]
        return f"node {op.node_id} {op.node.name!r} (kernel {op.node.func_name!r})"

    # -- input and output keys and info ------------------------------------------------------
    @property
    def input_names(self) -> list[str]:
        """Names of ``arg_nodes`` (inputs and params), by input index."""
        return [self.graph.nodes[nid].name for nid in self.graph.arg_nodes]

    def has_input(self, name: str) -> bool:
        """Whether the graph has an input (data or weight) called ``name``."""
        return name in self._input_map

    def input_index(self, key: int | str) -> int:
        """Input index of a name or index.

        Raises InputNotFoundError (a LookupError) for an unknown name, InputIndexError
        (also an IndexError) for an index out of range, ArgumentTypeError (a TypeError)
        for any other key.
        """
        if isinstance(key, str):
            index = self._input_map.get(key)
            if index is None:
                raise unknown_input(key, self.input_names)
            return index
        return check_index("input", key, len(self.graph.arg_nodes))

    def input_entry(self, key: int | str) -> int:
        """Entry id of an input."""
        return self.graph.entry_id(self.graph.arg_nodes[self.input_index(key)])

    def output_index(self, key: int | str) -> int:
        """Output index of an index, an ``"name:i"`` key or a bare node name (last wins)."""
        heads = self.graph.heads
        if isinstance(key, str):
            if key in self._output_map:
                return self._output_map[key]
            matches = [i for i, h in enumerate(heads) if self.graph.nodes[h.node_id].name == key]
            if not matches:
                raise unknown_output(key, list(self._output_map))
            return matches[-1]
        return check_index("output", key, len(heads))

    def output_entry(self, key: int | str) -> int:
        """Entry id of an output."""
        head = self.graph.heads[self.output_index(key)]
        return self.graph.entry_id(head.node_id, head.index)

    def _input_label(self, eid: int) -> str:
        return repr(self.graph.nodes[self._node_of_entry(eid)].name)

    def _node_of_entry(self, eid: int) -> int:
        row = self.graph.node_row_ptr
        lo, hi = 0, len(row) - 1
        while lo < hi - 1:  # largest nid with row[nid] <= eid
            mid = (lo + hi) // 2
            if row[mid] <= eid:
                lo = mid
            else:
                hi = mid
        return lo

    def input_info(self) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
        """Shapes and dtypes of inputs not loaded by :meth:`load_params`."""
        shapes: dict[str, tuple[int, ...]] = {}
        dtypes: dict[str, str] = {}
        for nid in self.graph.arg_nodes:
            name = self.graph.nodes[nid].name
            if name in self._param_names:
                continue
            eid = self.graph.entry_id(nid)
            shapes[name] = ShapeTuple(self.graph.shapes[eid])  # TVM returns ShapeTuples
            dtypes[name] = str(self.graph.dltypes[eid])
        return shapes, dtypes

    def output_info(self) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
        """Shapes and dtypes of outputs, keyed by node name (``"name:i"`` when it has several)."""
        return output_info(self.graph)

    # -- inputs and outputs ------------------------------------------------------------------
    def set_input(self, key: int | str, value: object) -> None:
        """Copy ``value`` into input ``key``; NDArrays must match shape and dtype exactly."""
        eid = self.input_entry(key)
        target = self._writable_input(eid)
        source = as_ndarray(value)
        if source is not None:
            if source.shape != target.shape or source.dtype != target.dtype:
                raise ArrayError(
                    f"input {self._input_label(eid)} expects shape {target.shape} and dtype "
                    f"{target.dtype}, got shape {source.shape} and dtype {source.dtype}"
                )
            source.copyto(target)
            return
        try:
            target.copyfrom(value)
        except ArrayError as exc:
            raise ArrayError(f"input {self._input_label(eid)}: {exc}") from None

    def _writable_input(self, eid: int) -> NDArray:
        target = self.entries[eid]
        if is_read_only(target):
            raise ArrayError(
                f"input {self._input_label(eid)} is bound to read-only memory "
                "(set_input_zero_copy); bind writable memory to copy into it"
            )
        return target

    def check_external(self, label: str, eid: int, arr: NDArray, written: bool = True) -> None:
        """Raise ArrayError unless ``arr`` can stand in for entry ``eid`` without copying.

        ``written``: a kernel writes the entry, so read-only memory is refused.
        """
        problem = self._fits(eid, arr, written)
        if problem is not None:
            raise ArrayError(f"{label}: {problem}")

    def _fits(self, eid: int, arr: NDArray, written: bool) -> str | None:
        g = self.graph
        return external_problem(
            arr, g.shapes[eid], g.dltypes[eid], self.device_of_entry(eid), written
        )

    def rebind(self, eid: int, arr: NDArray) -> None:
        """Make entry ``eid`` and every entry aliased with it (``__nop``) use ``arr``'s memory."""
        self.rebind_many([(eid, arr)])

    def rebind_many(self, bindings: Sequence[tuple[int, NDArray]]) -> None:
        """:meth:`rebind` for several entries; the run program is patched in place."""
        g = self.graph
        touched: set[int] = set()
        for eid, arr in bindings:
            for member in self._alias_groups[eid]:
                shape, dtype = g.shapes[member], g.dltypes[member]
                same = arr.shape == shape and arr.dtype == dtype
                self.entries[member] = arr if same else arr._create_view(shape, dtype)
                touched.add(member)
        ops = {id(op): op for e in touched for op in self._ops_by_eid.get(e, ())}
        in_place = True
        for op in ops.values():
            self._bind(op)
            if op.step_index >= 0:
                in_place = replace_step(self._program, op.step_index, op.step) and in_place
        if not in_place:
            self._refresh_steps()

    def set_input_zero_copy(self, key: int | str, value: object) -> None:
        """Use ``value``'s memory as input ``key`` (no copy); checks alignment and layout."""
        eid = self.input_entry(key)
        arr = zero_copy_array(value, "set_input_zero_copy")
        # no kernel writes an input's pool (plan_storage refuses such plans)
        label = f"zero-copy input {self._input_label(eid)}"
        self.check_external(label, eid, arr, written=False)
        self.rebind(eid, arr)

    def set_output_zero_copy(self, key: int | str, value: object) -> None:
        """Make the producer of output ``key`` write into ``value``'s memory."""
        index = self.output_index(key)
        head = self.graph.heads[index]
        eid = self.graph.entry_id(head.node_id, head.index)
        arr = zero_copy_array(value, "set_output_zero_copy")
        self.check_external(f"zero-copy output {index}", eid, arr)
        arg_eids = {self.graph.entry_id(nid) for nid in self.graph.arg_nodes}
        if arg_eids & set(self._alias_groups[eid]):
            raise ArrayError(
                f"zero-copy output {index} is a graph input (or a reshape of one), so no "
                "kernel writes it; read it with get_output instead"
            )
        self.rebind(eid, arr)

    def get_output(self, key: int | str) -> NDArray:
        """Output ``key`` as an alias of the executor's memory (the next run overwrites it)."""
        return self.entries[self.output_entry(key)]

    def get_input(self, key: int | str) -> NDArray:
        """Input ``key`` as an alias of the executor's memory."""
        return self.entries[self.input_entry(key)]

    def load_params(self, params_bytes: bytes | bytearray | memoryview) -> None:
        """Copy every param of a params blob whose name is an input; other names are ignored.

        Each tensor is copied straight from the blob into the input's memory (no
        intermediate arrays), so loading holds the weights once.
        """
        for record in iter_param_records(params_bytes, self.param_codes):
            self._param_names.add(record.name)
            index = self._input_map.get(record.name)
            if index is None:
                continue
            eid = self.graph.entry_id(self.graph.arg_nodes[index])
            target = self._writable_input(eid)
            if record.shape != target.shape or record.dtype != target.dtype:
                raise ArrayError(
                    f"param {record.name!r} has shape {record.shape} and dtype "
                    f"{record.dtype}, but the graph's input has shape {target.shape} and "
                    f"dtype {target.dtype}"
                )
            if target.host_view is not None:
                record.copy_into(target.numpy_view())
            else:  # device memory: stage through the host
                staging = empty(target.shape, target.dtype)
                record.copy_into(staging.numpy_view())
                staging.copyto(target)

    def load_params_from_file(self, path: str | os.PathLike[str]) -> None:
        """:meth:`load_params` from a ``.params`` file, memory-mapped rather than read."""
        with mapped_file(path) as data:
            self.load_params(data)

    def share_params(
        self, other: GraphExecutor, params_bytes: bytes | bytearray | memoryview
    ) -> None:
        """Use ``other``'s input arrays for every input named in ``params_bytes`` (no copy)."""
        if not isinstance(other, GraphExecutor):
            raise ArgumentTypeError(
                f"share_params needs another graph executor, got {type(other).__name__}"
            )
        bindings: list[tuple[int, NDArray]] = []
        names: list[str] = []
        for name in read_param_names(params_bytes):
            if name not in self._input_map or name not in other._input_map:
                continue
            eid = self.input_entry(name)
            shared = other.get_input(name)
            self.check_external(f"shared param {name!r}", eid, shared, written=False)
            bindings.append((eid, shared))
            names.append(name)
        self.rebind_many(bindings)  # one pass over the touched kernels, no recompiling
        self._param_names.update(names)

    def run_from_inputs(self, host_device: Device, *key_values: object) -> list[NDArray]:
        """Set inputs from ``key, value`` pairs, run, and copy every output to the host."""
        if len(key_values) % 2:
            raise InvalidArgumentError(
                "Number of arguments to run_from_inputs must be an even number of key-value pairs"
            )
        for i in range(0, len(key_values), 2):
            key = key_values[i]
            self.set_input(key, key_values[i + 1])  # type: ignore[arg-type]
        self.run()
        return [self.get_output(i).copyto(host_device) for i in range(len(self.graph.heads))]

    # -- TVM's packed-function table (GraphExecutor::GetFunction) -------------------------------
    def _get_function(self, name: str) -> PackedFunc | None:
        if self._packed is None:  # built on first lookup, once per executor
            self._packed = {n: PackedFunc(f, n) for n, f in self._packed_functions().items()}
        return self._packed.get(name)

    def _packed_functions(self) -> dict[str, Callable[..., Any]]:
        """Name -> callable for every packed function (the debug executor adds its own).

        Departures from TVM, on purpose: ``set_input`` with a name the graph lacks raises
        instead of being ignored (a misspelled name would otherwise run on stale data), and
        ``get_output``/``get_input`` with ``out`` refuse an array of another shape or dtype
        instead of reinterpreting its bytes.
        """

        def get_input(key: int | str, out: NDArray | None = None) -> NDArray | None:
            if isinstance(key, str) and not self.has_input(key):
                return None  # as TVM: GraphModule turns this into InputNotFoundError
            arr = self.get_input(key)
            if out is None:
                return arr
            copy_out(arr, out, f"get_input({key!r})")
            return None

        def get_output(key: int | str, out: NDArray | None = None) -> NDArray | None:
            arr = self.get_output(key)
            if out is None:
                return arr
            copy_out(arr, out, f"get_output({key!r})")
            return None

        def get_input_index(name: object) -> int:
            if not isinstance(name, str):
                raise ArgumentTypeError(f"input key must be a str, got {type(name).__name__}")
            return self._input_map.get(name, -1)

        def get_output_index(name: object) -> int:
            if not isinstance(name, str):
                raise ArgumentTypeError(f"output key must be a str, got {type(name).__name__}")
            try:
                return self.output_index(name)
            except InputNotFoundError:
                return -1

        def input_info() -> dict[str, dict[str, Any]]:
            shapes, dtypes = self.input_info()
            return {"shape": shapes, "dtype": dtypes}

        def output_info() -> dict[str, dict[str, Any]]:
            shapes, dtypes = self.output_info()
            return {"shape": shapes, "dtype": dtypes}

        def run_from_inputs(dev_type: int, dev_id: int, *kv: object) -> list[NDArray]:
            return self.run_from_inputs(Device(dev_type, dev_id), *kv)

        def share_params(other: Module, params: bytes | bytearray | memoryview) -> None:
            if other.type_key != "GraphExecutor":
                raise ArgumentTypeError(
                    f"share_params needs a GraphExecutor, got {other.type_key!r}"
                )
            self.share_params(other, params)  # type: ignore[arg-type]

        return {
            "set_input": self.set_input,
            "set_input_zero_copy": self.set_input_zero_copy,
            "set_output_zero_copy": self.set_output_zero_copy,
            "get_output": get_output,
            "get_input": get_input,
            "get_num_outputs": lambda: len(self.graph.heads),
            "get_num_inputs": lambda: len(self.graph.arg_nodes),
            "run": self.run,
            "run_from_inputs": run_from_inputs,
            "load_params": self.load_params,
            "load_params_from_file": self.load_params_from_file,
            "share_params": share_params,
            "get_input_index": get_input_index,
            "get_output_index": get_output_index,
            "get_input_info": input_info,
            "get_output_info": output_info,
        }


def output_info(g: Graph) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
    """Shapes and dtypes of ``g``'s outputs, keyed as the executor's ``get_output_info``."""
    counts: dict[int, int] = defaultdict(int)
    for h in g.heads:
        counts[h.node_id] += 1
    shapes: dict[str, tuple[int, ...]] = {}
    dtypes: dict[str, str] = {}
    for h in g.heads:
        name = g.nodes[h.node_id].name
        key = name if counts[h.node_id] == 1 else f"{name}:{h.index}"
        eid = g.entry_id(h.node_id, h.index)
        shapes[key] = ShapeTuple(g.shapes[eid])
        dtypes[key] = str(g.dltypes[eid])
    return shapes, dtypes
