"""Parse and validate TVM's graph executor JSON into immutable objects; nothing executes here.

The JSON is what ``relay.build`` writes as ``graph_json`` (``nodes``, ``arg_nodes``,
``node_row_ptr``, ``heads`` and the ``attrs`` tables ``shape``, ``dltype``,
``storage_id``, ``device_index``, ``storage_scope``), read by TVM's
``src/runtime/graph_executor/graph_executor.h``; the objects are those of
:mod:`.graph_types`, re-exported here.

Everything TVM's loader reads is checked, and the cross-references TVM leaves
unchecked (undefined behaviour in C++) are checked too: ``node_row_ptr`` against
``num_outputs``, table lengths against the entry count, input references against
earlier nodes, ``arg_nodes`` against ``null`` nodes. A bad graph raises
:class:`~tvmrt.error.GraphFormatError` naming the node or field and what was expected.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from tvmrt.error import DataTypeError, GraphFormatError
from tvmrt.runtime.dtype import DataType
from tvmrt.runtime.graph_executor.graph_types import (
    MAX_ENTRY_BYTES,
    NNVM_TYPE_FLAGS,
    Graph,
    Node,
    NodeEntry,
)

__all__ = ["Graph", "Node", "NodeEntry", "parse_graph", "MAX_ENTRY_BYTES", "NNVM_TYPE_FLAGS"]

_REQUIRED_TOP = ("nodes", "arg_nodes", "heads", "attrs")
_KNOWN_TOP = {"nodes", "arg_nodes", "node_row_ptr", "heads", "attrs", "metadata"}
_KNOWN_NODE = {"op", "name", "inputs", "attrs", "attr", "control_deps"}
_OP_ATTRS = ("func_name", "num_inputs", "num_outputs", "flatten_data")
_MAX_NDIM = 64


def _fail(where: str, message: str) -> GraphFormatError:
    return GraphFormatError(f"graph JSON: {where}: {message}")


def _as_int(value: object, where: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(where, f"expected an integer, got {value!r}")
    if value < minimum:
        raise _fail(where, f"expected an integer >= {minimum}, got {value}")
    return value


def _as_list(value: object, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _fail(where, f"expected a JSON array, got {type(value).__name__}")
    return value


def _parse_entry(value: object, where: str) -> NodeEntry:
    items = _as_list(value, where)
    if len(items) not in (2, 3):
        raise _fail(where, f"expected [node_id, index] or [node_id, index, version], got {value!r}")
    nums = [_as_int(x, where) for x in items]
    return NodeEntry(*nums)


def _parse_op_int(attrs: Mapping[str, str], key: str, where: str) -> int:
    text = attrs[key]
    try:
        value = int(text)
    except ValueError:
        shown = repr(text) if len(text) <= 40 else f"{text[:20]!r}... ({len(text)} characters)"
        message = f"attrs[{key!r}] must be a decimal integer string, got {shown}"
        raise _fail(where, message) from None
    if value < 0:
        raise _fail(where, f"attrs[{key!r}] must be >= 0, got {value}")
    return value


def _parse_node(nid: int, value: object) -> Node:
    where = f"nodes[{nid}]"
    if not isinstance(value, dict):
        raise _fail(where, f"expected a JSON object, got {type(value).__name__}")
    for key in value:
        if key not in _KNOWN_NODE:
            raise _fail(where, f"do not support key {key!r}; node keys are {sorted(_KNOWN_NODE)}")
    for key in ("op", "name", "inputs"):
        if key not in value:
            raise _fail(where, f"missing required key {key!r}")
    op, name = value["op"], value["name"]
    if not isinstance(name, str):
        raise _fail(where, f"'name' must be a string, got {name!r}")
    where = f"nodes[{nid}] ({name!r})"
    if op not in ("null", "tvm_op"):
        raise _fail(where, f"op must be 'null' or 'tvm_op', got {op!r}")
    inputs = tuple(
        _parse_entry(e, f"{where} inputs[{k}]")
        for k, e in enumerate(_as_list(value["inputs"], f"{where} inputs"))
    )
    if "control_deps" in value:
        _as_list(value["control_deps"], f"{where} control_deps")
    raw_attrs = value.get("attrs", value.get("attr"))
    if raw_attrs is None:
        if op == "tvm_op":
            raise _fail(where, f"a tvm_op node needs 'attrs' with {list(_OP_ATTRS)}")
        if inputs:
            raise _fail(where, "a null node takes no inputs")
        return Node(op, name)
    if not isinstance(raw_attrs, dict):
        raise _fail(where, f"'attrs' must be an object, got {type(raw_attrs).__name__}")
    for key, text in raw_attrs.items():
        if not isinstance(text, str):
            raise _fail(where, f"attrs[{key!r}] must be a string, got {text!r}")
    attrs: dict[str, str] = dict(raw_attrs)
    if op == "null":
        if inputs:
            raise _fail(where, "a null node takes no inputs")
        return Node(op, name, attrs=attrs)
    missing = [k for k in _OP_ATTRS if k not in attrs]
    if missing:
        raise _fail(where, f"attrs misses {missing}; a tvm_op needs {list(_OP_ATTRS)}")
    func_name = attrs["func_name"]
    if not func_name:
        raise _fail(where, "attrs['func_name'] is empty")
    num_outputs = _parse_op_int(attrs, "num_outputs", where)
    if num_outputs == 0 and func_name not in ("__nop",):
        raise _fail(where, "attrs['num_outputs'] must be at least 1")
    return Node(
        op,
        name,
        inputs,
        attrs,
        func_name,
        _parse_op_int(attrs, "num_inputs", where),
        num_outputs,
        _parse_op_int(attrs, "flatten_data", where) != 0,
    )


def _table(attrs: dict[str, Any], key: str, tag: str, required: bool) -> list[Any] | None:
    if key not in attrs:
        if required:
            raise _fail("attrs", f"missing required table {key!r}")
        return None
    value = _as_list(attrs[key], f"attrs[{key!r}]")
    if len(value) != 2 or value[0] != tag:
        raise _fail(f"attrs[{key!r}]", f"expected [{tag!r}, [...]], got type tag {value[:1]!r}")
    return _as_list(value[1], f"attrs[{key!r}] data")


def _parse_attrs(
    attrs_obj: object, num_entries: int
) -> tuple[
    tuple[tuple[int, ...], ...],
    tuple[DataType, ...],
    tuple[int, ...] | None,
    tuple[int, ...] | None,
    tuple[str, ...] | None,
]:
    if not isinstance(attrs_obj, dict):
        raise _fail("attrs", f"expected an object, got {type(attrs_obj).__name__}")
    known = {"shape", "dltype", "storage_id", "device_index", "storage_scope", "dtype"}
    for key, value in attrs_obj.items():
        if key in known:
            continue
        tag = value[0] if isinstance(value, list) and value else None
        if tag not in ("list_int", "size_t"):
            raise _fail("attrs", f"cannot skip graph attr {key!r} with type tag {tag!r}")

    def check_len(table: list[Any], key: str) -> list[Any]:
        if len(table) != num_entries:
            raise _fail(
                f"attrs[{key!r}]",
                f"has {len(table)} items but the graph has {num_entries} entries",
            )
        return table

    raw_shapes = check_len(_table(attrs_obj, "shape", "list_shape", True) or [], "shape")
    shapes = []
    for eid, shp in enumerate(raw_shapes):
        dims = _as_list(shp, f"attrs['shape'][{eid}]")
        if len(dims) > _MAX_NDIM:
            raise _fail(f"attrs['shape'][{eid}]", f"has {len(dims)} dims, at most {_MAX_NDIM}")
        shapes.append(tuple(_as_int(d, f"attrs['shape'][{eid}]") for d in dims))

    dltype_table = _table(attrs_obj, "dltype", "list_str", False)
    if dltype_table is not None:
        dltypes = []
        for eid, text in enumerate(check_len(dltype_table, "dltype")):
            if not isinstance(text, str):
                raise _fail(f"attrs['dltype'][{eid}]", f"expected a dtype string, got {text!r}")
            try:
                dltypes.append(DataType(text))
            except DataTypeError as exc:
                raise _fail(f"attrs['dltype'][{eid}]", str(exc)) from None
    else:  # NNVM graphs: mshadow type flags in "dtype"
        flags = _table(attrs_obj, "dtype", "list_int", False)
        if flags is None:
            raise _fail("attrs", "missing required table 'dltype'")
        dltypes = []
        for eid, flag in enumerate(check_len(flags, "dtype")):
            if flag not in NNVM_TYPE_FLAGS:
                raise _fail(
                    f"attrs['dtype'][{eid}]",
                    f"unknown NNVM type flag {flag!r}; known flags are {sorted(NNVM_TYPE_FLAGS)}",
                )
            dltypes.append(DataType(NNVM_TYPE_FLAGS[flag]))
    for eid, dt in enumerate(dltypes):
        bits = dt.bits * dt.lanes
        if not (bits % 8 == 0 or bits in (1, 4)):
            raise _fail(f"attrs['dltype'][{eid}]", f"{dt} has {bits} bits per element")
        nbytes = math.prod(shapes[eid]) * dt.itemsize
        if nbytes >= MAX_ENTRY_BYTES:
            raise _fail(
                f"attrs['shape'][{eid}]",
                f"shape {shapes[eid]} of {dt} takes {nbytes} bytes; no machine can hold an "
                f"entry of {MAX_ENTRY_BYTES} bytes (2**48) or more",
            )

    sid_table = _table(attrs_obj, "storage_id", "list_int", False)
    sids = None
    if sid_table is not None:
        sids = tuple(
            _as_int(s, f"attrs['storage_id'][{eid}]")
            for eid, s in enumerate(check_len(sid_table, "storage_id"))
        )
        if sids and max(sids) >= 4 * num_entries + 1024:
            raise _fail("attrs['storage_id']", f"storage id {max(sids)} is implausibly large")
    dev_table = _table(attrs_obj, "device_index", "list_int", False)
    devs = None
    if dev_table is not None:
        devs = tuple(
            _as_int(d, f"attrs['device_index'][{eid}]", 1)
            for eid, d in enumerate(check_len(dev_table, "device_index"))
        )
    scope_table = _table(attrs_obj, "storage_scope", "list_str", False)
    scopes = None
    if scope_table is not None:
        scopes_list = []
        for eid, scope in enumerate(check_len(scope_table, "storage_scope")):
            if not isinstance(scope, str):
                raise _fail(f"attrs['storage_scope'][{eid}]", f"expected a string, got {scope!r}")
            if "texture" in scope:
                raise _fail(
                    f"attrs['storage_scope'][{eid}]",
                    f"texture scope {scope!r} needs an OpenCL texture backend, which tvmrt lacks",
                )
            scopes_list.append(scope)
        scopes = tuple(scopes_list)
    return tuple(shapes), tuple(dltypes), sids, devs, scopes


def parse_graph(graph_json: str | bytes | Mapping[str, Any]) -> Graph:
    """Parse and fully validate a graph JSON document.

    Parameters
    ----------
    graph_json
        The JSON text (or an already-decoded object).

    Returns
    -------
    Graph
        The validated graph.

    Raises
    ------
    GraphFormatError
        If the JSON is malformed or the graph is inconsistent; the message names the
        node or field and what was expected.
    """
    if isinstance(graph_json, str | bytes | bytearray):
        text = graph_json if isinstance(graph_json, str) else graph_json.decode("utf-8", "replace")
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError) as exc:  # ValueError: also ints > 4300 digits
            raise GraphFormatError(f"graph JSON is not valid JSON: {exc}") from None
    else:
        doc = dict(graph_json)
        text = json.dumps(doc)
    if not isinstance(doc, dict):
        raise _fail("top level", f"expected an object, got {type(doc).__name__}")
    top: dict[str, Any] = {}
    for key, value in doc.items():
        if key == "metadata":  # TVM's reader stops at this key: later keys are ignored
            break
        if key not in _KNOWN_TOP:
            raise _fail("top level", f"key {key!r} is not supported; keys are {sorted(_KNOWN_TOP)}")
        top[key] = value
    for key in _REQUIRED_TOP:
        if key not in top:
            raise _fail("top level", f"missing required key {key!r}")

    nodes = tuple(_parse_node(i, n) for i, n in enumerate(_as_list(top["nodes"], "nodes")))
    row_ptr = _node_row_ptr(top.get("node_row_ptr"), nodes)
    _check_inputs(nodes, row_ptr)
    arg_nodes = tuple(
        _as_int(a, f"arg_nodes[{k}]") for k, a in enumerate(_as_list(top["arg_nodes"], "arg_nodes"))
    )
    for k, nid in enumerate(arg_nodes):
        if nid >= len(nodes):
            raise _fail(f"arg_nodes[{k}]", f"node {nid} does not exist ({len(nodes)} nodes)")
        if nodes[nid].is_op:
            raise _fail(f"arg_nodes[{k}]", f"node {nid} ({nodes[nid].name!r}) is not a null node")
    _check_unique_inputs(nodes, arg_nodes)
    heads = tuple(
        _parse_entry(h, f"heads[{k}]") for k, h in enumerate(_as_list(top["heads"], "heads"))
    )
    for k, head in enumerate(heads):
        _check_ref(head, nodes, f"heads[{k}]", len(nodes))
    shapes, dltypes, sids, devs, scopes = _parse_attrs(top["attrs"], row_ptr[-1])
    return Graph(nodes, arg_nodes, row_ptr, heads, shapes, dltypes, sids, devs, scopes, text)


def _check_unique_inputs(nodes: Sequence[Node], arg_nodes: Sequence[int]) -> None:
    """Inputs are set by name, so two inputs of one name would leave one unsettable."""
    seen: dict[str, int] = {}
    for nid in arg_nodes:
        name = nodes[nid].name
        first = seen.setdefault(name, nid)
        if first != nid:
            raise _fail(
                "arg_nodes",
                f"inputs {first} and {nid} are both named {name!r}; input names must be "
                "unique (only one of them could be set)",
            )


def _node_row_ptr(value: object, nodes: Sequence[Node]) -> tuple[int, ...]:
    expected = [0]
    for node in nodes:
        expected.append(expected[-1] + (node.num_outputs if node.is_op else 1))
    if value is None:  # TVM requires it; it is fully determined by num_outputs
        return tuple(expected)
    items = _as_list(value, "node_row_ptr")
    row_ptr = [_as_int(x, f"node_row_ptr[{k}]") for k, x in enumerate(items)]
    if len(row_ptr) != len(nodes) + 1:
        raise _fail(
            "node_row_ptr", f"has {len(row_ptr)} items, expected {len(nodes) + 1} (nodes + 1)"
        )
    for nid, (got, want) in enumerate(zip(row_ptr, expected, strict=True)):
        if got != want:
            where = "node_row_ptr[0]" if nid == 0 else f"node_row_ptr[{nid}]"
            detail = (
                "must be 0"
                if nid == 0
                else f"is {got} but node {nid - 1} ({nodes[nid - 1].name!r}) "
                f"has {want - expected[nid - 1]} outputs, so it must be {want}"
            )
            raise _fail(where, detail)
    return tuple(row_ptr)


def _check_ref(ref: NodeEntry, nodes: Sequence[Node], where: str, limit: int) -> None:
    if ref.node_id >= limit:
        raise _fail(
            where,
            f"refers to node {ref.node_id}, but only nodes 0..{limit - 1} can be used here",
        )
    src = nodes[ref.node_id]
    outputs = src.num_outputs if src.is_op else 1
    if ref.index >= outputs:
        raise _fail(
            where,
            f"refers to output {ref.index} of node {ref.node_id} ({src.name!r}), "
            f"which has {outputs} output(s)",
        )


def _check_inputs(nodes: Sequence[Node], row_ptr: Sequence[int]) -> None:
    for nid, node in enumerate(nodes):
        for k, ref in enumerate(node.inputs):
            # nodes run in array order, so an input must come from an earlier node
            _check_ref(ref, nodes, f"nodes[{nid}] ({node.name!r}) inputs[{k}]", nid)
