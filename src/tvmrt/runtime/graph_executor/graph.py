"""Parse and validate TVM's graph executor JSON into immutable objects; nothing executes here.

The JSON is what ``relay.build`` writes as ``graph_json`` (``nodes``, ``arg_nodes``,
``node_row_ptr``, ``heads`` and the ``attrs`` tables ``shape``, ``dltype``,
``storage_id``, ``device_index``, ``storage_scope``), read by TVM's
``src/runtime/graph_executor/graph_executor.h``; the objects are those of
:mod:`.graph_types`, re-exported here.

Everything TVM's loader reads is checked, and the cross-references TVM leaves
unchecked (undefined behaviour in C++) are checked too: ``node_row_ptr`` against
``num_outputs``, table lengths against the entry count, input references against
earlier nodes, ``arg_nodes`` against ``null`` nodes (each listed once by name, none left
out). libtvmrt_runtime makes the same checks with the same words (``_native/runtime/graph.c``,
``graph_checks.c``). A bad graph raises
:class:`~tvmrt.error.GraphFormatError` naming the node or field and what was expected.

JSON text is read as a stream (:mod:`.json_stream`): each node and table row is decoded,
checked and stored compactly (equal strings, attrs and shapes shared; the ``attrs`` tables
in :mod:`.graph_attrs`) before the next, so the document's object tree never exists and a
graph of a million nodes takes a few times its file's size, not ten or more.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tvmrt.error import GraphFormatError
from tvmrt.runtime.graph_executor.graph_attrs import (
    TABLES,
    Rows,
    as_int,
    as_list,
    fail,
    parse_attrs,
    rows,
)
from tvmrt.runtime.graph_executor.graph_types import (
    MAX_ENTRY_BYTES,
    NNVM_TYPE_FLAGS,
    Graph,
    Node,
    NodeEntry,
)
from tvmrt.runtime.graph_executor.json_stream import JsonCursor

__all__ = ["Graph", "Node", "NodeEntry", "parse_graph", "MAX_ENTRY_BYTES", "NNVM_TYPE_FLAGS"]

_REQUIRED_TOP = ("nodes", "arg_nodes", "heads", "attrs")
_KNOWN_TOP = {"nodes", "arg_nodes", "node_row_ptr", "heads", "attrs", "metadata"}
_KNOWN_NODE = {"op", "name", "inputs", "attrs", "attr", "control_deps"}
_OP_ATTRS = ("func_name", "num_inputs", "num_outputs", "flatten_data")


def _parse_entry(value: object, where: str) -> NodeEntry:
    items = as_list(value, where)
    if len(items) not in (2, 3):
        raise fail(where, f"expected [node_id, index] or [node_id, index, version], got {value!r}")
    nums = [as_int(x, where) for x in items]
    return NodeEntry(*nums)


def _parse_op_int(attrs: Mapping[str, str], key: str, where: str) -> int:
    text = attrs[key]
    try:
        value = int(text)
    except ValueError:
        shown = repr(text) if len(text) <= 40 else f"{text[:20]!r}... ({len(text)} characters)"
        message = f"attrs[{key!r}] must be a decimal integer string, got {shown}"
        raise fail(where, message) from None
    if value < 0:
        raise fail(where, f"attrs[{key!r}] must be >= 0, got {value}")
    return value


def _parse_node(nid: int, value: object, memo: dict[Any, Any]) -> Node:
    """One node; ``memo`` shares equal strings and attrs between nodes (a compact graph)."""
    where = f"nodes[{nid}]"
    if not isinstance(value, dict):
        raise fail(where, f"expected a JSON object, got {type(value).__name__}")
    for key in value:
        if key not in _KNOWN_NODE:
            raise fail(where, f"do not support key {key!r}; node keys are {sorted(_KNOWN_NODE)}")
    for key in ("op", "name", "inputs"):
        if key not in value:
            raise fail(where, f"missing required key {key!r}")
    op, name = value["op"], value["name"]
    if not isinstance(name, str):
        raise fail(where, f"'name' must be a string, got {name!r}")
    where = f"nodes[{nid}] ({name!r})"
    if op not in ("null", "tvm_op"):
        raise fail(where, f"op must be 'null' or 'tvm_op', got {op!r}")
    op = "tvm_op" if op == "tvm_op" else "null"  # one shared string, not one per node
    inputs = tuple(
        _parse_entry(e, f"{where} inputs[{k}]")
        for k, e in enumerate(as_list(value["inputs"], f"{where} inputs"))
    )
    if "control_deps" in value:
        as_list(value["control_deps"], f"{where} control_deps")
    raw_attrs = value.get("attrs", value.get("attr"))
    if raw_attrs is None:
        if op == "tvm_op":
            raise fail(where, f"a tvm_op node needs 'attrs' with {list(_OP_ATTRS)}")
        if inputs:
            raise fail(where, "a null node takes no inputs")
        return Node(op, name, attrs=_NO_ATTRS)
    if not isinstance(raw_attrs, dict):
        raise fail(where, f"'attrs' must be an object, got {type(raw_attrs).__name__}")
    for key, text in raw_attrs.items():
        if not isinstance(text, str):
            raise fail(where, f"attrs[{key!r}] must be a string, got {text!r}")
    attrs: dict[str, str] = _interned_attrs(raw_attrs, memo)
    if op == "null":
        if inputs:
            raise fail(where, "a null node takes no inputs")
        return Node(op, name, attrs=attrs)
    missing = [k for k in _OP_ATTRS if k not in attrs]
    if missing:
        raise fail(where, f"attrs misses {missing}; a tvm_op needs {list(_OP_ATTRS)}")
    func_name = attrs["func_name"]
    if not func_name:
        raise fail(where, "attrs['func_name'] is empty")
    num_outputs = _parse_op_int(attrs, "num_outputs", where)
    if num_outputs == 0 and func_name not in ("__nop",):
        raise fail(where, "attrs['num_outputs'] must be at least 1")
    return Node(
        op,
        name,
        inputs,
        attrs,
        attrs["func_name"],
        _parse_op_int(attrs, "num_inputs", where),
        num_outputs,
        _parse_op_int(attrs, "flatten_data", where) != 0,
    )


_NO_ATTRS: dict[str, str] = {}  # shared by every node without attrs: never mutated


def _interned_attrs(raw: dict[str, str], memo: dict[Any, Any]) -> dict[str, str]:
    """``raw`` as a dict shared with every earlier node of equal attrs (never mutated)."""
    key = tuple(raw.items())
    found: dict[str, str] | None = memo.get(key)
    if found is None:
        found = memo[key] = {memo.setdefault(k, k): memo.setdefault(v, v) for k, v in key}
    return found


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
    memo: dict[Any, Any] = {}
    if isinstance(graph_json, str | bytes | bytearray):
        text = graph_json if isinstance(graph_json, str) else graph_json.decode("utf-8", "replace")
        try:
            top = _read_top(JsonCursor(text), memo)
        except GraphFormatError:
            raise
        except (ValueError, RecursionError) as exc:  # ValueError: also ints > 4300 digits
            raise GraphFormatError(f"graph JSON is not valid JSON: {exc}") from None
    else:
        doc = dict(graph_json)
        text = json.dumps(doc)
        top = {}
        for key, value in doc.items():
            if key == "metadata":  # TVM's reader stops at this key: later keys are ignored
                break
            _check_top_key(key)
            top[key] = value
    for key in _REQUIRED_TOP:
        if key not in top:
            raise fail("top level", f"missing required key {key!r}")

    nodes = top["nodes"]
    if not isinstance(nodes, tuple):  # not streamed (not an array, or a decoded object)
        nodes = tuple(_parse_node(i, n, memo) for i, n in enumerate(as_list(top["nodes"], "nodes")))
    row_ptr = _node_row_ptr(top.get("node_row_ptr"), nodes)
    _check_inputs(nodes, row_ptr)
    arg_nodes = tuple(
        as_int(a, f"arg_nodes[{k}]") for k, a in enumerate(as_list(top["arg_nodes"], "arg_nodes"))
    )
    for k, nid in enumerate(arg_nodes):
        if nid >= len(nodes):
            raise fail(f"arg_nodes[{k}]", f"node {nid} does not exist ({len(nodes)} nodes)")
        if nodes[nid].is_op:
            raise fail(f"arg_nodes[{k}]", f"node {nid} ({nodes[nid].name!r}) is not a null node")
    _check_unique_inputs(nodes, arg_nodes)
    _check_null_nodes_listed(nodes, arg_nodes)
    heads = tuple(
        _parse_entry(h, f"heads[{k}]") for k, h in enumerate(as_list(top["heads"], "heads"))
    )
    for k, head in enumerate(heads):
        _check_ref(head, nodes, f"heads[{k}]", len(nodes))
    shapes, dltypes, sids, devs, scopes = parse_attrs(top["attrs"], row_ptr[-1], memo)
    return Graph(nodes, arg_nodes, row_ptr, heads, shapes, dltypes, sids, devs, scopes, text)


def _check_top_key(key: str) -> None:
    if key not in _KNOWN_TOP:
        raise fail("top level", f"key {key!r} is not supported; keys are {sorted(_KNOWN_TOP)}")


def _read_top(cursor: JsonCursor, memo: dict[Any, Any]) -> dict[str, Any]:
    """The top-level fields, streaming ``nodes`` and the ``attrs`` tables row by row.

    Nodes and table rows are converted to their compact, shared form as they are read
    (:mod:`.json_stream`), so the document's full object tree never exists: the working
    set stays a small multiple of the text. Other fields are decoded whole.
    """
    if cursor.peek() != "{":
        doc = cursor.value()
        cursor.end()
        raise fail("top level", f"expected an object, got {type(doc).__name__}")
    top: dict[str, Any] = {}
    stopped = False
    for key in cursor.members():
        if stopped or key == "metadata":  # TVM's reader stops here: later keys are ignored
            stopped = True
            cursor.value()  # still valid JSON, as json.loads would require
            continue
        _check_top_key(key)
        if key == "nodes" and cursor.peek() == "[":
            top[key] = tuple(_parse_node(i, n, memo) for i, n in enumerate(cursor.values()))
        elif key == "attrs" and cursor.peek() == "{":
            top[key] = _read_attrs(cursor, memo)
        else:
            top[key] = cursor.value()
    cursor.end()
    return top


def _read_attrs(cursor: JsonCursor, memo: dict[Any, Any]) -> dict[str, Any]:
    """The ``attrs`` object; a known table of the expected shape is converted row by row."""
    attrs: dict[str, Any] = {}
    for key in cursor.members():
        known = TABLES.get(key)
        if known is None or cursor.peek() != "[":
            attrs[key] = cursor.value()
            continue
        items: list[Any] = []
        for k, _ in enumerate(cursor.elements()):
            if k == 1 and items[0] == known[0] and cursor.peek() == "[":
                items.append(rows(key, cursor.values(), memo))
            else:
                items.append(cursor.value())
        attrs[key] = items[1] if len(items) == 2 and isinstance(items[1], Rows) else items
    return attrs


def _check_unique_inputs(nodes: Sequence[Node], arg_nodes: Sequence[int]) -> None:
    """Inputs are set by name, so two inputs of one name would leave one unsettable."""
    seen: dict[str, int] = {}
    for nid in arg_nodes:
        name = nodes[nid].name
        first = seen.setdefault(name, nid)
        if first != nid:
            raise fail(
                "arg_nodes",
                f"inputs {first} and {nid} are both named {name!r}; input names must be "
                "unique (only one of them could be set)",
            )


def _check_null_nodes_listed(nodes: Sequence[Node], arg_nodes: Sequence[int]) -> None:
    """A null node that ``arg_nodes`` leaves out is memory nothing can set: every run would
    read whatever it holds (TVM runs it so)."""
    listed = set(arg_nodes)
    for nid, node in enumerate(nodes):
        if not node.is_op and nid not in listed:
            raise fail(
                "arg_nodes",
                f'node {nid} ({node.name!r}) is an input or param (op "null") but arg_nodes '
                "does not list it, so nothing could set it",
            )


def _node_row_ptr(value: object, nodes: Sequence[Node]) -> tuple[int, ...]:
    expected = [0]
    for node in nodes:
        expected.append(expected[-1] + (node.num_outputs if node.is_op else 1))
    if value is None:  # TVM requires it; it is fully determined by num_outputs
        return tuple(expected)
    items = as_list(value, "node_row_ptr")
    row_ptr = [as_int(x, f"node_row_ptr[{k}]") for k, x in enumerate(items)]
    if len(row_ptr) != len(nodes) + 1:
        raise fail(
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
            raise fail(where, detail)
    return tuple(row_ptr)


def _check_ref(ref: NodeEntry, nodes: Sequence[Node], where: str, limit: int) -> None:
    if ref.node_id >= limit:
        raise fail(
            where,
            f"refers to node {ref.node_id}, but only nodes 0..{limit - 1} can be used here",
        )
    src = nodes[ref.node_id]
    outputs = src.num_outputs if src.is_op else 1
    if ref.index >= outputs:
        raise fail(
            where,
            f"refers to output {ref.index} of node {ref.node_id} ({src.name!r}), "
            f"which has {outputs} output(s)",
        )


def _check_inputs(nodes: Sequence[Node], row_ptr: Sequence[int]) -> None:
    for nid, node in enumerate(nodes):
        for k, ref in enumerate(node.inputs):
            # nodes run in array order, so an input must come from an earlier node
            _check_ref(ref, nodes, f"nodes[{nid}] ({node.name!r}) inputs[{k}]", nid)
