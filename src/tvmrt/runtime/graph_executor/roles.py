"""What each input of a graph is (data or weight) and one unique label per output.

TVM does not mark weights in the graph: they are ``null`` nodes like the data inputs.
They are recognised here by what is known about them: the names a params blob (or a
factory) supplies, and the names TVM gives weights -- Relay's ``p0, p1, ...`` after
binding params, ``_param_N`` of its ONNX/Caffe2 importers, and NNVM/MXNet's
``*_weight``/``*_bias``/``*_gamma``/... A weight without a value runs on whatever the
memory holds (or on ``--fill`` noise), so tools refuse that unless asked explicitly.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from tvmrt.runtime.graph_executor.graph import Graph
from tvmrt.runtime.graph_executor.storage import StoragePlan, host_memory_problem

__all__ = [
    "WEIGHT_NAME",
    "InputRoles",
    "classify_inputs",
    "output_labels",
    "runnability_problems",
]

WEIGHT_NAME = re.compile(
    r"^(?:p\d+|_param_\d+)$"
    r"|_(?:weight|bias|gamma|beta|moving_mean|moving_var|running_mean|running_var)$"
)
"""Names TVM's frontends give weights (Relay ``p0``, ``_param_1``, NNVM ``conv0_weight``)."""

_SHOWN = 5


def _names(names: Collection[str]) -> str:
    listed = list(names)
    shown = ", ".join(listed[:_SHOWN])
    more = f", ... ({len(listed)} in all)" if len(listed) > _SHOWN else ""
    return shown + more


@dataclass(frozen=True)
class InputRoles:
    """The inputs of a graph split by role, against the params that were supplied.

    Attributes
    ----------
    data
        Inputs the user feeds (neither supplied by params nor named like a weight).
    weights
        Inputs whose value the params supply.
    missing
        Inputs named like weights that no param supplies.
    unused
        Param names that are no input of the graph (params of another model?).
    """

    data: tuple[str, ...]
    weights: tuple[str, ...]
    missing: tuple[str, ...]
    unused: tuple[str, ...]

    def problems(self) -> list[str]:
        """One sentence per way the weights do not match the graph (empty: they match)."""
        out = []
        if self.missing:
            out.append(
                f"{len(self.missing)} weight input(s) have no value in the params: "
                f"{_names(self.missing)} (no params file, or the params of another model)"
            )
        if self.unused:
            out.append(
                f"the params hold {len(self.unused)} tensor(s) the graph has no input for: "
                f"{_names(self.unused)} (the params of another model?)"
            )
        return out


def classify_inputs(graph: Graph, param_names: Collection[str]) -> InputRoles:
    """Split the inputs of ``graph`` by role, given the names the params supply."""
    supplied = set(param_names)
    inputs = [graph.nodes[nid].name for nid in graph.arg_nodes]
    data, weights, missing = [], [], []
    for name in inputs:
        if name in supplied:
            weights.append(name)
        elif WEIGHT_NAME.search(name):
            missing.append(name)
        else:
            data.append(name)
    unused = sorted(supplied - set(inputs))
    return InputRoles(tuple(data), tuple(weights), tuple(missing), tuple(unused))


def output_labels(graph: Graph) -> list[str]:
    """One unique label per output: ``name_i``, TVM's output key ``name:i`` (``i`` the
    output's position, as TVM v0.19's ``output_map_``) with ``:`` written as ``_``.

    The labels contain no ``:`` so they serve as ``.npz`` keys and file names as they are;
    they are unique because ``i`` is (the text after the last ``_`` is the position). The
    names tvmrt shows and accepts are described in :mod:`tvmrt.artifact.output_names`.
    """
    return [
        f"{graph.nodes[h.node_id].name}_{i}".replace(":", "_") for i, h in enumerate(graph.heads)
    ]


def runnability_problems(
    graph: Graph, plan: StoragePlan | None, param_names: Collection[str]
) -> list[str]:
    """What stops a graph with these params from giving meaningful results here.

    Weights missing or belonging to another model, and host pools larger than this
    machine's memory (for ``tvmrt inspect``; ``plan`` None: a plan that was refused).
    """
    problems = classify_inputs(graph, param_names).problems()
    memory = None if plan is None else host_memory_problem(plan)
    if memory is not None:
        problems.append(memory)
    return problems
