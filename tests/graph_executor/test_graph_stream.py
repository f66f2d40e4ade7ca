"""The streamed graph parse (issue 23 item 9) reads exactly what ``json.loads`` would.

Real graphs parse to the same Graph from text (streamed) and from a decoded dict; JSON
syntax errors, trailing data, deep nesting and keys after ``metadata`` behave as before.
See src/tvmrt/runtime/graph_executor/json_stream.py.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tvmrt.error import GraphFormatError
from tvmrt.runtime.graph_executor import parse_graph
from tvmrt.testing import GraphBuilder

GRAPHS = [
    "mobilenet_v1/deploy_graph.json",
    "mobilenet_v2/deploy_graph.json",
    "wrn-arm32/wrn_8s_g0-rasp.json",  # NNVM: "dtype" flags instead of "dltype"
    "windows-dll/deploy.json",
    "cross/aarch64/deploy_graph.json",
]


def _fields(graph: object) -> dict[str, object]:
    out = {f.name: getattr(graph, f.name) for f in dataclasses.fields(graph)}  # type: ignore[arg-type]
    out.pop("json")
    return out


@pytest.mark.parametrize("name", GRAPHS)
def test_streamed_parse_equals_dict_parse(artifacts: Path, name: str) -> None:
    text = (artifacts / name).read_text()
    assert _fields(parse_graph(text)) == _fields(parse_graph(json.loads(text)))


def _small() -> str:
    b = GraphBuilder()
    x = b.input("x", (2,))
    (y,) = b.op("relu", "relu", [x], [(2,)])
    b.output(y)
    return b.to_json()


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda t: t + " x", "not valid JSON: Extra data"),
        (lambda t: t[: len(t) // 2], "not valid JSON"),
        (lambda t: t.replace('"nodes": [', '"nodes": [' + "[" * 100_000, 1), "not valid JSON"),
        (lambda t: t.replace('"inputs": []}', '"inputs": []} 5', 1), "Expecting ',' delimiter"),
        (lambda t: t.replace("{", '{"bogus": 1, ', 1), "key 'bogus' is not supported"),
        (lambda t: "[" + t + "]", "top level: expected an object, got list"),
    ],
)
def test_bad_json_is_a_graph_format_error(mutate, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(GraphFormatError, match=message):
        parse_graph(mutate(_small()))


def test_keys_after_metadata_are_ignored_but_must_be_json() -> None:
    doc = json.loads(_small())
    text = json.dumps(doc)[:-1] + ', "metadata": {}, "whatever": [1, 2]}'
    assert parse_graph(text).nodes == parse_graph(doc).nodes
    with pytest.raises(GraphFormatError, match="not valid JSON"):
        parse_graph(text[:-1] + ", nope}")


def test_equal_attrs_and_shapes_are_shared() -> None:
    b = GraphBuilder()
    ref = b.input("x", (4,))
    for i in range(3):
        (ref,) = b.op(f"add{i}", "add", [ref, b.input(f"w{i}", (4,))], [(4,)])
    b.output(ref)
    graph = parse_graph(b.to_json())
    ops = [n for n in graph.nodes if n.is_op]
    assert all(n.attrs is ops[0].attrs for n in ops)
    assert all(s is graph.shapes[0] for s in graph.shapes)
