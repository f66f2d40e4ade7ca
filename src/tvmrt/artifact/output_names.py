"""The one name of each output, and the other names it answers to.

**The rule.** Output ``i`` of a graph is named ``<node>_<i>``: TVM's own output key
``<node>:<i>`` (what TVM v0.19's ``GraphExecutor`` maps in ``output_map_`` and
``get_output_index`` takes; ``i`` is the output's position) with ``:`` written as ``_``, so
the name is also a valid ``.npz`` key and file name. An AOT build's outputs keep the names
of its metadata (``output_<i>`` where it has none). ``run`` prints and saves these names,
``inspect`` lists them, ``serve`` publishes them in its metadata and Triton config.

**Also accepted** wherever a name is read (``serve`` requests, ``run --compare`` and the
keys of an input ``.npz``): TVM's key ``<node>:<i>``, the bare node name ``serve`` used
before (for a node with one output; else its first), and ``output_<i>`` (by position, as reference
outputs are often saved). A ``serve`` response names each output as it was asked for.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["output_aliases"]


def output_aliases(names: Sequence[str], tvm_names: Sequence[str] = ()) -> dict[str, int]:
    """Every name an output answers to -> its position; the rule's names win any clash.

    ``names`` are the rule's names (``Executor.output_labels``: for a graph,
    :func:`~tvmrt.runtime.graph_executor.roles.output_labels`), ``tvm_names`` what the
    executor calls its outputs besides (TVM's ``get_output_info`` keys).
    """
    aliases = {name: i for i, name in enumerate(names)}
    for i, name in enumerate(names):
        suffix = f"_{i}"
        if name.endswith(suffix):
            aliases.setdefault(f"{name[: -len(suffix)]}:{i}", i)
    for i, name in enumerate(tvm_names):
        aliases.setdefault(name, i)
        aliases.setdefault(name.partition(":")[0], i)
    for i in range(len(names)):
        aliases.setdefault(f"output_{i}", i)
    return aliases
