"""``GraphExecutor``: the executor module (TVM's C++ ``GraphExecutor``) over any kernel module.

Everything is resolved at creation: the graph is validated, pools are allocated once,
every entry becomes a view of its pool, and every kernel is looked up and bound to its
argument arrays. :meth:`GraphExecutor.run` is then a plain loop over bound calls.
Zero-copy rebinding swaps the views of an alias group and rebinds only the kernels
that touch it.
"""

from __future__ import annotations

import functools
import math
import os
import threading
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tvmrt.error import (
    ArgumentTypeError,
    ArrayError,
    FunctionNotFoundError,
    InternalError,
    InvalidArgumentError,
    KernelError,
    TVMError,
    add_note,
)
from tvmrt.runtime.device import Device, DLDeviceType
from tvmrt.runtime.device_api import get_device_api
from tvmrt.runtime.graph_executor.checks import (
    external_problem,
    is_read_only,
)
from tvmrt.runtime.graph_executor.graph import Graph, Node, parse_graph
from tvmrt.runtime.graph_executor.keys import GraphKeys
from tvmrt.runtime.graph_executor.linked import linked_params
from tvmrt.runtime.graph_executor.packed import devices_from_packed_args, packed_functions
from tvmrt.runtime.graph_executor.program import compile_steps, failed_step, replace_step
from tvmrt.runtime.graph_executor.storage import StoragePlan, check_host_memory, plan_storage
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray, empty, from_dlpack
from tvmrt.runtime.packed_func import BoundCall, PackedFunc, PreparedCall
from tvmrt.runtime.params import iter_param_records, mapped_file, read_param_names

__all__ = [
    "GraphExecutor",
    "OpBinding",
    "as_ndarray",
    "devices_from_packed_args",
    "create_executor",
]


def _noop() -> None:
    return None


@dataclass
class OpBinding:
    """A ``tvm_op`` node bound to its kernel and argument entries."""

    node_id: int
    node: Node
    arg_eids: tuple[int, ...]
    func: PackedFunc | None
    step: PreparedCall
    step_index: int = -1  # position in the run program; -1: not in it (``__nop``)

    @property
    def call(self) -> BoundCall:
        """The step as one zero-argument callable."""
        fn, fn_args = self.step
        return functools.partial(fn, *fn_args)


def as_ndarray(value: object) -> NDArray | None:
    """``value`` as an NDArray without copying if it is one or a DLPack producer, else None."""
    if isinstance(value, NDArray):
        return value
    if isinstance(value, np.ndarray):
        return None
    if hasattr(value, "__dlpack__"):
        return from_dlpack(value)
    return None


class GraphExecutor(Module, GraphKeys):
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

    Input and output keys (``input_index``, ``output_index``, ``input_info``, ...) come
    from :class:`~tvmrt.runtime.graph_executor.keys.GraphKeys`.
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
        self.plan: StoragePlan = plan_storage(graph, self.devices[0].device_type)
        check_host_memory(self.plan)
        self._run_lock = threading.Lock()
        self._packed: dict[str, PackedFunc] | None = None
        self._init_keys(graph)
        self._alias_groups = self._find_alias_groups()
        linked = linked_params(lib, graph)  # TVM 0.7/0.8 link-params libraries
        self._param_names.update(linked)
        self.linked_param_names = frozenset(linked)
        self.entries: list[NDArray] = self._allocate({**linked, **(preset or {})})
        self.node_calls: list[BoundCall | None] = [None] * len(graph.nodes)
        self._ops: list[OpBinding] = []
        self._ops_by_eid: dict[int, list[OpBinding]] = defaultdict(list)
        for nid, node in enumerate(graph.nodes):
            if node.is_op:
                self._ops.append(self._make_op(nid, node))
        for op in self._ops:
            for eid in set(op.arg_eids):
                self._ops_by_eid[eid].append(op)
        self._step_ops: list[OpBinding] = []
        self._program: Callable[[], None] = _noop
        self._refresh_steps()

    # -- set-up ------------------------------------------------------------------------
    @property
    def type_key(self) -> str:
        return "GraphExecutor"

    def device_of_entry(self, eid: int) -> Device:
        """Device holding entry ``eid`` (by its pool's device type)."""
        dev_type = self.plan.pools[self.plan.entry_storage[eid]].device_type
        return self._device_for_type(dev_type)

    def _device_for_type(self, device_type: int) -> Device:
        for dev in self.devices:
            if dev.device_type == device_type:
                return dev
        return self.devices[0]

    def _find_alias_groups(self) -> list[list[int]]:
        """Entries joined by ``__nop`` nodes (a reshape aliases its input): group per entry."""
        g = self.graph
        parent = list(range(g.num_entries))

        def root(e: int) -> int:
            while parent[e] != e:
                parent[e] = parent[parent[e]]
                e = parent[e]
            return e

        for nid, node in enumerate(g.nodes):
            if node.is_op and node.func_name == "__nop":
                for k, ref in enumerate(node.inputs[: node.num_outputs]):
                    src, dst = g.entry_id(ref.node_id, ref.index), g.entry_id(nid, k)
                    if g.entry_nbytes(src) == g.entry_nbytes(dst):
                        parent[root(dst)] = root(src)
        members: dict[int, list[int]] = defaultdict(list)
        for eid in range(g.num_entries):
            members[root(eid)].append(eid)
        return [members[root(eid)] for eid in range(g.num_entries)]

    def _allocate(self, preset: Mapping[str, NDArray]) -> list[NDArray]:
        g, plan = self.graph, self.plan
        bound: dict[int, NDArray] = {}
        copied: list[tuple[int, NDArray]] = []
        for name, arr in preset.items():
            index = self._input_map.get(name)
            if index is None:
                continue  # as TVM: params the graph does not use are ignored
            eid = g.entry_id(g.arg_nodes[index])
            problem = self._fits(eid, arr, written=False)
            if problem is None:
                pass
            elif arr.device != self.device_of_entry(eid) and arr.shape == g.shapes[eid]:
                copied.append((eid, arr))  # a param for another device: copied there below
                continue
            elif arr.dtype == g.dltypes[eid] and arr.nbytes == g.entry_nbytes(eid):
                copied.append((eid, arr))  # same bytes, other shape or layout: copy, as TVM
                continue
            else:
                raise ArrayError(
                    f"param {name!r} embedded in the factory does not fit the graph's input "
                    f"{name!r}: {problem}"
                )
            for member in self._alias_groups[eid]:
                bound[member] = arr._create_view(g.shapes[member], g.dltypes[member])
        needed = {plan.entry_storage[eid] for eid in range(g.num_entries) if eid not in bound}
        pools: dict[int, NDArray] = {}
        for pool in plan.pools:
            if pool.storage_id in needed:
                dev = self._device_for_type(pool.device_type)
                _check_fallback(pool.device_type, dev)
                pools[pool.storage_id] = empty((pool.alloc_bytes // 4,), "float32", dev)
        entries = []
        for eid in range(g.num_entries):
            if eid in bound:
                entries.append(bound[eid])
                continue
            pool_arr = pools[plan.entry_storage[eid]]
            try:
                entries.append(pool_arr._create_view(g.shapes[eid], g.dltypes[eid]))
            except ArrayError as exc:  # cannot happen for a consistent plan
                raise InternalError(f"entry {eid} does not fit its pool: {exc}") from exc
        for eid, arr in copied:
            arr.copyto(entries[eid])
        return entries

    def _make_op(self, nid: int, node: Node) -> OpBinding:
        g = self.graph
        arg_eids = tuple(g.entry_id(r.node_id, r.index) for r in node.inputs) + tuple(
            g.entry_id(nid, k) for k in range(node.num_outputs)
        )
        func: PackedFunc | None = None
        if node.func_name not in ("__nop", "__copy"):
            func = self.lib.find_function(node.func_name, True)
            if func is None:
                raise FunctionNotFoundError(
                    f"node {nid} ({node.name!r}) calls kernel {node.func_name!r}, which the "
                    f"library ({self.lib.type_key!r} module) does not have: "
                    f"no such function in module: {node.func_name}"
                )
        elif node.func_name == "__copy" and len(arg_eids) != 2:
            raise ArrayError(
                f"node {nid} ({node.name!r}): __copy takes one input and one output, "
                f"got {len(node.inputs)} and {node.num_outputs}"
            )
        op = OpBinding(nid, node, arg_eids, func, (_noop, ()))
        self._bind(op)
        return op

    def _bind(self, op: OpBinding) -> None:
        args = tuple(self.entries[e] for e in op.arg_eids)
        if op.node.flatten_data:
            args = tuple(a._create_view((math.prod(a.shape),)) for a in args)
        name = op.node.func_name
        if name == "__nop":
            op.step = (_noop, ())
        elif name == "__copy":
            src, dst = args
            if src.nbytes != dst.nbytes:
                raise ArrayError(
                    f"node {op.node_id} ({op.node.name!r}): __copy from {src.shape} {src.dtype} "
                    f"to {dst.shape} {dst.dtype}: the size in bytes must exactly match"
                )
            op.step = (src.copyto, (dst,))
        else:
            assert op.func is not None
            op.step = op.func.prepare_call(args)
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

    # -- inputs and outputs (keys and info: GraphKeys) ---------------------------------------
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
        arr = as_ndarray(value)
        if arr is None:
            raise ArgumentTypeError(
                "set_input_zero_copy needs an NDArray or a DLPack tensor, "
                f"got {type(value).__name__}"
            )
        # no kernel writes an input's pool (plan_storage refuses such plans)
        label = f"zero-copy input {self._input_label(eid)}"
        self.check_external(label, eid, arr, written=False)
        self.rebind(eid, arr)

    def set_output_zero_copy(self, key: int | str, value: object) -> None:
        """Make the producer of output ``key`` write into ``value``'s memory."""
        index = self.output_index(key)
        head = self.graph.heads[index]
        eid = self.graph.entry_id(head.node_id, head.index)
        arr = as_ndarray(value)
        if arr is None:
            raise ArgumentTypeError(
                "set_output_zero_copy needs an NDArray or a DLPack tensor, "
                f"got {type(value).__name__}"
            )
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
        for record in iter_param_records(params_bytes):
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
            if target._np is not None:
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

    # -- TVM's packed-function table ---------------------------------------------------------
    def _get_function(self, name: str) -> PackedFunc | None:
        if self._packed is None:  # built on first lookup, once per executor
            self._packed = {n: PackedFunc(f, n) for n, f in self._packed_functions().items()}
        return self._packed.get(name)

    def _packed_functions(self) -> dict[str, Callable[..., Any]]:
        return packed_functions(self)


def _check_fallback(device_type: int, dev: Device) -> None:
    """Refuse to put host-kernel memory on a device whose memory the host cannot address."""
    on_host = device_type == DLDeviceType.kDLCPU
    if on_host and dev.device_type != device_type and not get_device_api(dev).host_visible:
        raise ArrayError(
            f"the graph places entries on the CPU (device_index 1), but no cpu device "
            f"was given and the fallback {dev} is device memory that CPU kernels cannot "
            f"read; pass the CPU too, e.g. [{dev}, cpu(0)]"
        )


def create_executor(graph_json: str, lib: Module, *args: object) -> GraphExecutor:
    """The global function ``tvm.graph_executor.create`` (TVM's C++ entry point)."""
    devices = devices_from_packed_args("tvm.graph_executor.create", graph_json, lib, args)
    return GraphExecutor(parse_graph(graph_json), lib, devices)
