"""Issue 23 item 2: a storage plan that puts two live entries in one pool is refused.

The hostile plans are made here from MobileNet v2's real graph (a kernel's output put in
its own input's pool; every intermediate in one pool); every real graph in
the real artifacts (project-built and $TVMRT_ARTIFACTS) must still pass. See src/tvmrt/runtime/graph_executor/lifetimes.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tvmrt.artifact import find_artifact, inspect_artifact
from tvmrt.contrib import graph_executor
from tvmrt.error import GraphFormatError
from tvmrt.runtime import cpu
from tvmrt.runtime.graph_executor import parse_graph, plan_storage
from tvmrt.testing import GraphBuilder, numpy_op_library

CPU = cpu(0)

# Graph JSON files and single-file artifacts that carry a graph (every form of relay016).
REAL_GRAPHS = [
    "mobilenet_v1",
    "mobilenet_v2",
    "windows-dll/deploy.json",
    "wrn-arm32/wrn_8s_g0-rasp.json",
    "face-macos/deploy_graph.json",
    "cross/aarch64/deploy_graph.json",
    "cross/armv7hf/deploy_graph.json",
    "iris-factory/deploy_lib.tar",
    "relay016/hetero-opencl-cpu/deploy.so",
    "relay016/linkparams-so/deploy.so",
    "relay016/mlf-graph/model_llvm.tar",
    "relay016/mlf-graph/model_c_crt.tar",
    "relay016/opencl-factory/deploy.so",
    "relay016/opencl-factory/dense.so",
    "relay016/systemlib-seed-flow/deploy_devc_c.tar",
    "relay016/systemlib-so/deploy.so",
    "relay016/systemlib-tar/deploy.tar",
    "relay016/tvmc-package/module.tar",
    "contrib/sort-topk/deploy.so",
    "contrib/nms-static/deploy.so",
]


@pytest.mark.parametrize("name", REAL_GRAPHS)
def test_every_real_plan_passes(artifacts: Path, name: str) -> None:
    path = artifacts / name
    if path.suffix == ".json":
        graph = parse_graph(path.read_text())
        plan_storage(graph, (graph.device_types or (1,))[0])
        return
    report = inspect_artifact(find_artifact(path)).to_dict()
    assert "graph" in report, report["problems"]
    assert not [p for p in report["problems"] if "storage" in p], report["problems"]


def _mobilenet(artifacts: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((artifacts / "mobilenet_v2" / "deploy_graph.json").read_text())
    return doc


def _own_input_pool(doc: dict[str, Any]) -> tuple[int, int]:
    """Put the first kernel that reads a kernel's output into that input's pool."""
    nodes, row_ptr = doc["nodes"], doc["node_row_ptr"]
    sids = doc["attrs"]["storage_id"][1]
    for nid, node in enumerate(nodes):
        src = node["inputs"][0][0] if node["inputs"] else None
        if node["op"] == "tvm_op" and src is not None and nodes[src]["op"] == "tvm_op":
            sids[row_ptr[nid]] = sids[row_ptr[src]]
            return src, nid
    raise AssertionError("no kernel reads a kernel")


def _one_pool(doc: dict[str, Any]) -> None:
    """Every intermediate (kernel output that is not a graph output) in one pool."""
    row_ptr, sids = doc["node_row_ptr"], doc["attrs"]["storage_id"][1]
    heads = {row_ptr[h[0]] + h[1] for h in doc["heads"]}
    target = max(sids) + 1
    for nid, node in enumerate(doc["nodes"]):
        if node["op"] == "tvm_op" and row_ptr[nid] not in heads:
            sids[row_ptr[nid]] = target


def test_kernel_output_in_its_own_inputs_pool_is_refused(artifacts: Path) -> None:
    doc = _mobilenet(artifacts)
    src, nid = _own_input_pool(doc)
    names = [doc["nodes"][i]["name"] for i in (src, nid)]
    with pytest.raises(GraphFormatError) as info:
        plan_storage(parse_graph(json.dumps(doc)), 1)
    message = str(info.value)
    assert f"node {src} {names[0]!r}" in message
    assert f"node {nid} {names[1]!r}" in message
    assert f"both are alive at node {nid}" in message


def test_every_intermediate_in_one_pool_is_refused_by_create(artifacts: Path) -> None:
    doc = _mobilenet(artifacts)
    _one_pool(doc)
    lib = str(artifacts / "mobilenet_v2" / "deploy_lib.so")
    from tvmrt.runtime import load_module

    with pytest.raises(GraphFormatError, match=r"attrs\['storage_id'\] puts output 0 of node"):
        graph_executor.create(json.dumps(doc), load_module(lib), CPU)


def test_inspect_reports_a_damaged_plan_and_exits_1(artifacts: Path, tmp_path: Path) -> None:
    doc = _mobilenet(artifacts)
    _one_pool(doc)
    (tmp_path / "deploy_graph.json").write_text(json.dumps(doc))
    for name in ("deploy_lib.so", "deploy_param.params"):
        (tmp_path / name).symlink_to(artifacts / "mobilenet_v2" / name)
    report = inspect_artifact(find_artifact(tmp_path)).to_dict()
    assert not report["runnable"]
    assert any("both are alive at node" in p for p in report["problems"]), report["problems"]
    assert report["graph"]["storage"] is None  # the rest of the graph is still described
    done = subprocess.run(
        [sys.executable, "-m", "tvmrt", "inspect", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "both are alive at node" in done.stdout + done.stderr


def test_nop_reshape_shares_its_inputs_pool_and_runs() -> None:
    # as TVM's planner: a reshape-only function reuses its input's token, emitted as __nop
    b = GraphBuilder()
    x = b.input("x", (2, 2), storage_id=0)
    (y,) = b.op("relu", "relu", [x], [(2, 2)], storage_ids=[1])
    (r,) = b.op("reshape", "__nop", [y], [(4,)], storage_ids=[1])
    (z,) = b.op("relu2", "relu", [r], [(4,)], storage_ids=[2])
    (w,) = b.op("relu3", "relu", [z], [(4,)], storage_ids=[1])  # y and r are dead here
    b.output(w)
    mod = graph_executor.create(b.to_json(), numpy_op_library(), CPU)
    mod.run(x=np.array([[-1, 2], [-3, 4]], "float32"))
    np.testing.assert_equal(mod.get_output(0).numpy(), [0, 2, 0, 4])


def test_reading_a_reshape_after_its_pool_is_reused_is_refused() -> None:
    b = GraphBuilder()
    x = b.input("x", (4,), storage_id=0)
    (y,) = b.op("relu", "relu", [x], [(4,)], storage_ids=[1])
    (r,) = b.op("reshape", "__nop", [y], [(2, 2)], storage_ids=[1])
    (z,) = b.op("relu2", "relu", [x], [(4,)], storage_ids=[1])  # overwrites y while r lives
    (s,) = b.op("add", "add", [z, r], [(4,)], storage_ids=[2])
    b.output(s)
    with pytest.raises(GraphFormatError, match=r"node 1 'relu' .* node 3 'relu2' .* pool 1"):
        plan_storage(parse_graph(b.to_json()), 1)


def test_unread_output_frees_its_pool_after_its_node() -> None:
    # TVM releases an output nobody reads right after its call
    b = GraphBuilder()
    x = b.input("x", (4,), storage_id=0)
    b.op("dead", "relu", [x], [(4,)], storage_ids=[1])
    (y,) = b.op("relu", "relu", [x], [(4,)], storage_ids=[1])
    b.output(y)
    plan_storage(parse_graph(b.to_json()), 1)


def test_graph_output_pool_is_not_reused_later() -> None:
    b = GraphBuilder()
    x = b.input("x", (4,), storage_id=0)
    (y,) = b.op("relu", "relu", [x], [(4,)], storage_ids=[1])
    (z,) = b.op("relu2", "relu", [x], [(4,)], storage_ids=[1])  # y is an output: still needed
    b.output(y)
    b.output(z)
    with pytest.raises(GraphFormatError, match="to the end"):
        plan_storage(parse_graph(b.to_json()), 1)
