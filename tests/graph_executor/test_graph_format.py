"""Graph JSON parsing and validation: every malformed field gets a message naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tvmrt.error import GraphFormatError
from tvmrt.runtime import load_param_dict_from_file
from tvmrt.runtime.graph_executor import parse_graph
from tvmrt.testing import graphs


def base() -> dict:
    return json.loads(graphs.add_one(4))


def mutated(change) -> str:
    doc = base()
    change(doc)
    return json.dumps(doc)


def test_parses_the_simple_graph():
    g = parse_graph(graphs.add_one(4))
    assert [n.op for n in g.nodes] == ["null", "tvm_op"]
    assert g.nodes[1].func_name == "myadd"
    assert g.nodes[1].flatten_data
    assert g.shapes == ((4,), (4,))
    assert g.dltypes == ("float32", "float32")
    assert g.storage_ids == (0, 1)
    assert g.num_entries == 2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(extra=1), r"top level: key 'extra' is not supported"),
        (lambda d: d.pop("heads"), r"top level: missing required key 'heads'"),
        (lambda d: d["nodes"][1].update(foo=1), r"nodes\[1\]: do not support key 'foo'"),
        (lambda d: d["nodes"][1].pop("inputs"), r"nodes\[1\]: missing required key 'inputs'"),
        (lambda d: d["nodes"][1].update(op="conv"), r"op must be 'null' or 'tvm_op', got 'conv'"),
        (
            lambda d: d["nodes"][1]["attrs"].pop("num_outputs"),
            r"nodes\[1\] \('add'\): attrs misses \['num_outputs'\]",
        ),
        (
            lambda d: d["nodes"][1]["attrs"].update(num_outputs=1),
            r"attrs\['num_outputs'\] must be a string, got 1",
        ),
        (
            lambda d: d["nodes"][1]["attrs"].update(flatten_data="yes"),
            r"attrs\['flatten_data'\] must be a decimal integer string, got 'yes'",
        ),
        (
            lambda d: d["nodes"][1].update(inputs=[[0]]),
            r"inputs\[0\]: expected \[node_id, index\] or \[node_id, index, version\]",
        ),
        (
            lambda d: d["nodes"][1].update(inputs=[[1, 0, 0]]),
            r"inputs\[0\]: refers to node 1, but only nodes 0..0 can be used here",
        ),
        (
            lambda d: d["nodes"][1].update(inputs=[[0, 3, 0]]),
            r"refers to output 3 of node 0 \('x'\), which has 1 output\(s\)",
        ),
        (lambda d: d.update(arg_nodes=[1]), r"arg_nodes\[0\]: node 1 \('add'\) is not a null node"),
        (lambda d: d.update(arg_nodes=[7]), r"arg_nodes\[0\]: node 7 does not exist"),
        (  # issue 31: a weight nothing can set ran to NaN or garbage
            lambda d: d.update(arg_nodes=[]),
            r"arg_nodes: node 0 \('x'\) is an input or param \(op \"null\"\) but arg_nodes "
            r"does not list it, so nothing could set it",
        ),
        (lambda d: d.update(heads=[[5, 0, 0]]), r"heads\[0\]: refers to node 5"),
        (
            lambda d: d.update(node_row_ptr=[0, 1, 3]),
            r"node_row_ptr\[2\]: is 3 but node 1 \('add'\) has 1 outputs, so it must be 2",
        ),
        (lambda d: d.update(node_row_ptr=[0, 1]), r"node_row_ptr: has 2 items, expected 3"),
        (
            lambda d: d["attrs"].update(shape=["list_shape", [[4]]]),
            r"attrs\['shape'\]: has 1 items but the graph has 2 entries",
        ),
        (
            lambda d: d["attrs"].update(dltype=["list_str", ["float32", "floaty"]]),
            r"attrs\['dltype'\]\[1\]: unknown type 'floaty'",
        ),
        (
            lambda d: d["attrs"].update(storage_id=["list_str", [0, 1]]),
            r"attrs\['storage_id'\]: expected \['list_int', \[...\]\]",
        ),
        (
            lambda d: d["attrs"].update(storage_id=["list_int", [0, -1]]),
            r"attrs\['storage_id'\]\[1\]: expected an integer >= 0, got -1",
        ),
        (
            lambda d: d["attrs"].update(shape=["list_shape", [[4], [-4]]]),
            r"attrs\['shape'\]\[1\]: expected an integer >= 0, got -4",
        ),
        (
            lambda d: d["attrs"].update(weird=["list_str", []]),
            r"cannot skip graph attr 'weird' with type tag 'list_str'",
        ),
        (
            lambda d: d["attrs"].update(storage_scope=["list_str", ["global.texture", ""]]),
            r"texture scope 'global.texture' needs an OpenCL texture backend",
        ),
        (lambda d: d["attrs"].pop("dltype"), r"attrs: missing required table 'dltype'"),
        (lambda d: d["attrs"].pop("shape"), r"attrs: missing required table 'shape'"),
    ],
)
def test_invalid_graphs(change, message):
    with pytest.raises(GraphFormatError, match=message):
        parse_graph(mutated(change))


def test_not_json_and_not_an_object():
    with pytest.raises(GraphFormatError, match="graph JSON is not valid JSON"):
        parse_graph("{nodes: }")
    with pytest.raises(GraphFormatError, match="top level: expected an object, got list"):
        parse_graph("[]")


def test_metadata_stops_reading_like_tvm():
    doc = base()
    text = json.dumps(doc)[:-1] + ', "metadata": {}, "ignored_after_metadata": 1}'
    assert parse_graph(text).num_entries == 2


def test_legacy_dtype_table_and_missing_node_row_ptr():
    doc = base()
    doc["attrs"].pop("dltype")
    doc["attrs"]["dtype"] = ["list_int", [0, 1]]
    doc.pop("node_row_ptr")
    g = parse_graph(json.dumps(doc))
    assert g.dltypes == ("float32", "float64")
    assert g.node_row_ptr == (0, 1, 2)
    doc["attrs"]["dtype"] = ["list_int", [0, 99]]
    with pytest.raises(GraphFormatError, match=r"unknown NNVM type flag 99"):
        parse_graph(json.dumps(doc))


@pytest.mark.parametrize(
    ("graph_file", "params_file"),
    [
        ("mobilenet_v1/deploy_graph.json", "mobilenet_v1/deploy_param.params"),
        ("mobilenet_v2/deploy_graph.json", "mobilenet_v2/deploy_param.params"),
        ("wrn-arm32/wrn_8s_g0-rasp.json", "wrn-arm32/wrn_8s_g0-rasp.params"),
        ("windows-dll/deploy.json", "windows-dll/deploy.params"),
        ("face-macos/deploy_graph.json", None),
    ],
)
def test_real_graphs_parse_and_params_match_inputs(artifacts: Path, graph_file, params_file):
    g = parse_graph((artifacts / graph_file).read_text())
    assert g.num_entries == g.node_row_ptr[-1] > 0
    ops = [n for n in g.nodes if n.is_op]
    assert ops
    assert all(n.func_name for n in ops)
    if params_file is None:
        return
    params = load_param_dict_from_file(artifacts / params_file)
    inputs = {g.nodes[nid].name: g.entry_id(nid) for nid in g.arg_nodes}
    assert set(params) <= set(inputs)
    for name, arr in params.items():
        eid = inputs[name]
        assert arr.shape == g.shapes[eid], name
        assert arr.dtype == g.dltypes[eid], name
