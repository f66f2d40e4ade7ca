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

from tvmrt.contrib.graph_executor.graph import Graph, Node, parse_graph
from tvmrt.contrib.graph_executor.program import compile_steps, failed_step
from tvmrt.contrib.graph_executor.storage import StoragePlan, plan_storage
from tvmrt.error import (
    ArrayError,
    FunctionNotFoundError,
    InputNotFoundError,
    InternalError,
    KernelError,
    TVMError,
    add_note,
)
from tvmrt.runtime.device import Device, DLDeviceType
from tvmrt.runtime.device_api import ALLOC_ALIGNMENT, get_device_api
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


class GraphExecutor(Module):
    """Executes a graph over the kernels of ``lib`` on ``devices`` (the first is the host).

    Parameters
    ----------
    graph
        A parsed graph (:func:`~tvmrt.contrib.graph_executor.graph.parse_graph`).
    lib
        Module supplying every ``func_name`` of the graph (its imports are searched too).
    devices
        Devices of the graph; the first is the fallback for entries of other types.
    preset
        Arrays to bind to inputs of the same name without copying (the factory's
        params): inputs bound this way get no pool of their own.
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
            raise ValueError("a graph executor needs at least one device")
        self.graph = graph
        self.lib = lib
        self.devices = tuple(devices)
        self.plan: StoragePlan = plan_storage(graph, self.devices[0].device_type)
        self._run_lock = threading.Lock()
        self._packed: dict[str, PackedFunc] | None = None
        self._param_names: set[str] = set()
        self._input_map = {graph.nodes[nid].name: i for i, nid in enumerate(graph.arg_nodes)}
        self._output_map = {
            f"{graph.nodes[h.node_id].name}:{h.index}": i for i, h in enumerate(graph.heads)
        }
        self._alias_groups = self._find_alias_groups()
        self.entries: list[NDArray] = self._allocate(preset or {})
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
        copies: list[tuple[int, NDArray]] = []
        for name, arr in preset.items():
            index = self._input_map.get(name)
            if index is None:
                continue
            eid = g.entry_id(g.arg_nodes[index])
            if self._fits(eid, arr) is None:
                for member in self._alias_groups[eid]:
                    bound[member] = arr._create_view(g.shapes[member], g.dltypes[member])
            elif arr.device != self.device_of_entry(eid) and arr.shape == g.shapes[eid]:
                copies.append((eid, arr))  # a param for another device: copied there below
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
        for eid, arr in copies:
            arr.copyto(entries[eid])
        return entries

    def _make_op(self, nid: int, node: Node) -> OpBinding:
        g = self.graph
        arg_eids = tuple(g.entry_id(r.node_id, r.index) for r in node.inputs) + tuple(
            g.entry_id(nid, k) for k in range(node.num_outputs)
        )
        func: PackedFunc | None = None
        if node.func_name not in ("__nop", "__copy"):
            func = self.lib._find_function(node.func_name, True)
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

    # -- inputs and outputs ----------------------------------------------------------------
    @property
    def input_names(self) -> list[str]:
        """Names of ``arg_nodes`` (inputs and params), by input index."""
        return [self.graph.nodes[nid].name for nid in self.graph.arg_nodes]

    def input_index(self, key: int | str) -> int:
        """Input index of a name or index; raises InputNotFoundError / IndexError."""
        if isinstance(key, str):
            index = self._input_map.get(key)
            if index is None:
                raise InputNotFoundError(
                    f"graph has no input {key!r}; inputs are {_preview(self.input_names)}"
                )
            return index
        if isinstance(key, bool) or not isinstance(key, int | np.integer):
            raise TypeError(f"input key must be a name or an index, got {type(key).__name__}")
        n = len(self.graph.arg_nodes)
        if not 0 <= key < n:
            raise IndexError(f"input index {key} is out of range: the graph has {n} inputs")
        return int(key)

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
                names = list(self._output_map)
                raise InputNotFoundError(
                    f"Invalid output node:{key}; outputs are {_preview(names)}"
                )
            return matches[-1]
        if isinstance(key, bool) or not isinstance(key, int | np.integer):
            raise TypeError(f"output key must be a name or an index, got {type(key).__name__}")
        if not 0 <= key < len(heads):
            raise IndexError(
                f"output index {key} is out of range: the graph has {len(heads)} outputs"
            )
        return int(key)

    def output_entry(self, key: int | str) -> int:
        """Entry id of an output."""
        head = self.graph.heads[self.output_index(key)]
        return self.graph.entry_id(head.node_id, head.index)

    def set_input(self, key: int | str, value: object) -> None:
        """Copy ``value`` into input ``key``; NDArrays must match shape and dtype exactly."""
        eid = self.input_entry(key)
        target = self.entries[eid]
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

    def check_external(self, label: str, eid: int, arr: NDArray) -> None:
        """Raise ArrayError unless ``arr`` can stand in for entry ``eid`` without copying."""
        problem = self._fits(eid, arr)
        if problem is not None:
            raise ArrayError(f"{label}: {problem}")

    def _fits(self, eid: int, arr: NDArray) -> str | None:
        g = self.graph
        want_dev = self.device_of_entry(eid)
        if arr.shape != g.shapes[eid] or arr.dtype != g.dltypes[eid]:
            return (
                f"expected shape {g.shapes[eid]} and dtype {g.dltypes[eid]}, "
                f"got shape {arr.shape} and dtype {arr.dtype}"
            )
        if arr.device != want_dev:
            return f"expected an array on {want_dev}, got one on {arr.device}"
        if not arr.is_contiguous:
            return "the array is not contiguous (kernels need dense row-major data)"
        if arr.data_ptr % ALLOC_ALIGNMENT:
            return (
                f"data at {arr.data_ptr:#x} is not {ALLOC_ALIGNMENT}-byte aligned, which "
                "compiled kernels require; use set_input (it copies) or allocate with "
                "tvmrt.runtime.empty"
            )
        return None

    def rebind(self, eid: int, arr: NDArray) -> None:
        """Make entry ``eid`` and every entry aliased with it (``__nop``) use ``arr``'s memory."""
        g = self.graph
        touched: set[int] = set()
        for member in self._alias_groups[eid]:
            self.entries[member] = arr._create_view(g.shapes[member], g.dltypes[member])
            touched.add(member)
        ops = {id(op): op for e in touched for op in self._ops_by_eid.get(e, ())}
        for op in ops.values():
            self._bind(op)
        self._refresh_steps()

    def set_input_zero_copy(self, key: int | str, value: object) -> None:
        """Use ``value``'s memory as input ``key`` (no copy); checks alignment and layout."""
        eid = self.input_entry(key)
        arr = as_ndarray(value)
        if arr is None:
            raise TypeError(
                "set_input_zero_copy needs an NDArray or a DLPack tensor, "
                f"got {type(value).__name__}"
            )
        self.check_external(f"zero-copy input {self._input_label(eid)}", eid, arr)
        self.rebind(eid, arr)

    def set_output_zero_copy(self, key: int | str, value: object) -> None:
        """Make the producer of output ``key`` write into ``value``'s memory."""
        index = self.output_index(key)
        head = self.graph.heads[index]
        eid = self.graph.entry_id(head.node_id, head.index)
        arr = as_ndarray(value)
        if arr is None:
            raise TypeError(
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
            target = self.entries[eid]
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
            raise TypeError(
                f"share_params needs another graph executor, got {type(other).__name__}"
            )
        for name in read_param_names(params_bytes):
            if name not in self._input_map or name not in other._input_map:
                continue
            eid = self.input_entry(name)
            self.check_external(f"shared param {name!r}", eid, other.get_input(name))
            self.rebind(eid, other.get_input(name))
            self._param_names.add(name)

    def input_info(self) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
        """Shapes and dtypes of inputs not loaded by :meth:`load_params`."""
        shapes, dtypes = {}, {}
        for nid in self.graph.arg_nodes:
            name = self.graph.nodes[nid].name
            if name in self._param_names:
                continue
            eid = self.graph.entry_id(nid)
            shapes[name] = self.graph.shapes[eid]
            dtypes[name] = str(self.graph.dltypes[eid])
        return shapes, dtypes

    def output_info(self) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
        """Shapes and dtypes of outputs, keyed by node name (``"name:i"`` when it has several)."""
        g = self.graph
        counts: dict[int, int] = defaultdict(int)
        for h in g.heads:
            counts[h.node_id] += 1
        shapes, dtypes = {}, {}
        for h in g.heads:
            name = g.nodes[h.node_id].name
            key = name if counts[h.node_id] == 1 else f"{name}:{h.index}"
            eid = g.entry_id(h.node_id, h.index)
            shapes[key] = g.shapes[eid]
            dtypes[key] = str(g.dltypes[eid])
        return shapes, dtypes

    def run_from_inputs(self, host_device: Device, *key_values: object) -> list[NDArray]:
        """Set inputs from ``key, value`` pairs, run, and copy every output to the host."""
        if len(key_values) % 2:
            raise ValueError(
                "Number of arguments to run_from_inputs must be an even number of key-value pairs"
            )
        for i in range(0, len(key_values), 2):
            key = key_values[i]
            if isinstance(key, str) and key not in self._input_map:
                raise InputNotFoundError(f"{key} is not a valid input name")
            self.set_input(key, key_values[i + 1])  # type: ignore[arg-type]
        self.run()
        return [self.get_output(i).copyto(host_device) for i in range(len(self.graph.heads))]

    # -- TVM's packed-function table ---------------------------------------------------------
    def _get_function(self, name: str) -> PackedFunc | None:
        if self._packed is None:  # built on first lookup, once per executor
            self._packed = {n: PackedFunc(f, n) for n, f in self._packed_functions().items()}
        return self._packed.get(name)

    def _packed_functions(self) -> dict[str, Callable[..., Any]]:
        def set_input(key: int | str, value: object) -> None:
            if isinstance(key, str) and key not in self._input_map:
                return  # TVM's packed set_input ignores unknown names
            self.set_input(key, value)

        def get_input(key: int | str) -> NDArray | None:
            if isinstance(key, str) and key not in self._input_map:
                return None
            return self.get_input(key)

        def get_output(key: int | str, out: NDArray | None = None) -> NDArray | None:
            arr = self.get_output(key)
            if out is None:
                return arr
            _copy_checked(arr, out, f"get_output({key!r})")
            return None

        def get_input_index(name: object) -> int:
            if not isinstance(name, str):
                raise TypeError("Input key is not a string")
            return self._input_map.get(name, -1)

        def get_output_index(name: object) -> int:
            if not isinstance(name, str):
                raise TypeError("Output key is not a string")
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
                raise TypeError(f"share_params needs a GraphExecutor, got {other.type_key!r}")
            self.share_params(other, params)  # type: ignore[arg-type]

        return {
            "set_input": set_input,
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


def _check_fallback(device_type: int, dev: Device) -> None:
    """Refuse to put host-kernel memory on a device whose memory the host cannot address."""
    on_host = device_type == DLDeviceType.kDLCPU
    if on_host and dev.device_type != device_type and not get_device_api(dev).host_visible:
        raise ArrayError(
            f"the graph places entries on the CPU (device_index 1), but no cpu device "
            f"was given and the fallback {dev} is device memory that CPU kernels cannot "
            f"read; pass the CPU too, e.g. [{dev}, cpu(0)]"
        )


def _copy_checked(src: NDArray, out: NDArray, what: str) -> None:
    if out.shape != src.shape:
        raise ArrayError(f"{what}: out has shape {out.shape}, expected {src.shape}")
    src.copyto(out)


def _preview(names: Sequence[str], limit: int = 10) -> str:
    shown = ", ".join(repr(n) for n in names[:limit])
    more = f", ... ({len(names)} in all)" if len(names) > limit else ""
    return f"[{shown}{more}]"


def devices_from_packed_args(
    what: str, graph_json: object, lib: object, args: Sequence[object]
) -> list[Device]:
    """Check the arguments of TVM's packed ``create`` functions and return the devices.

    ``args`` are Device objects and/or ``device_type, device_id`` integer pairs,
    optionally after a linked-param lookup function (accepted and ignored: tvmrt
    links no params).
    """
    if not isinstance(graph_json, str):
        raise TypeError(f"{what}: graph_json must be a str, got {type(graph_json).__name__}")
    if not isinstance(lib, Module):
        raise TypeError(f"{what}: lib must be a Module, got {type(lib).__name__}")
    rest = list(args)
    if rest and callable(rest[0]) and not isinstance(rest[0], Device):
        rest.pop(0)  # TVM's lookup_linked_param function
    devices: list[Device] = []
    i = 0
    while i < len(rest):
        arg = rest[i]
        if isinstance(arg, Device):
            devices.append(arg)
            i += 1
            continue
        dev_id = rest[i + 1] if i + 1 < len(rest) else None
        if not _is_int(arg) or not _is_int(dev_id):
            raise TypeError(
                f"{what}: expected Devices or device type and id pairs, got {rest[i : i + 2]!r}"
            )
        devices.append(Device(int(arg), int(dev_id)))  # type: ignore[call-overload]
        i += 2
    if not devices:
        raise TypeError(
            f"{what} needs at least one device (a Device or a device type and id), "
            f"got {len(args) + 2} arguments in all"
        )
    return devices


def _is_int(value: object) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def create_executor(graph_json: str, lib: Module, *args: object) -> GraphExecutor:
    """The global function ``tvm.graph_executor.create`` (TVM's C++ entry point)."""
    devices = devices_from_packed_args("tvm.graph_executor.create", graph_json, lib, args)
    return GraphExecutor(parse_graph(graph_json), lib, devices)
