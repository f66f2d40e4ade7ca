"""One name per output in every verb, the ``.npz`` keys and the served metadata (issue 22,
item 5): TVM v0.19's output key ``<node>:<i>`` (``src/runtime/graph_executor/
graph_executor.cc``, ``output_map_``; ``i`` the output's position) with ``_`` for ``:``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from support.cli import tvmrt
from tvmrt.artifact import find_artifact
from tvmrt.artifact.output_names import output_aliases
from tvmrt.contrib import graph_executor
from tvmrt.runtime import cpu, load_module
from tvmrt.serve import load_model


def test_every_verb_uses_one_name(artifacts: Path, tmp_path: Path) -> None:
    folder = artifacts / "mobilenet_v1"
    inspected = json.loads(tvmrt("inspect", folder, "--json").stdout)
    listed = [o["name"] for o in inspected["graph"]["outputs"]]
    saved = tmp_path / "out.npz"
    ran = tvmrt("run", folder, "--fill", "zeros", "-o", saved)
    assert ran.returncode == 0, ran.stderr
    with np.load(saved) as npz:
        keys = list(npz.files)
    served = load_model("m", find_artifact(folder))
    try:
        published = [o["name"] for o in served.metadata()["outputs"]]
    finally:
        served.close()
    assert listed == keys == published == ["fused_nn_softmax_0"]
    assert "  fused_nn_softmax_0: (1, 1000) float32" in ran.stdout

    # the name is TVM's own output key with '_' for ':'
    graph = (folder / "deploy_graph.json").read_text()
    module = graph_executor.create(graph, load_module(str(folder / "deploy_lib.so")), cpu())
    assert module.get_output_index("fused_nn_softmax:0") == 0


def test_the_other_names_an_output_answers_to() -> None:
    aliases = output_aliases(["split_0", "split_1", "relu_2"], ["split:0", "split:1", "relu"])
    assert aliases == {
        "split_0": 0,
        "split_1": 1,
        "relu_2": 2,
        "split:0": 0,
        "split:1": 1,
        "relu:2": 2,
        "split": 0,  # a bare node name: that node's first output
        "relu": 2,
        "output_0": 0,
        "output_1": 1,
        "output_2": 2,
    }
    # the rule's names win over an alias that spells another output's name
    assert output_aliases(["output_1_0", "output_1"])["output_1"] == 1
