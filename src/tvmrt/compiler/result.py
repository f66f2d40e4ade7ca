"""What :func:`tvmrt.compiler.compile` writes and returns: file names and ``CompileResult``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tvmrt.compiler.tune import TuneReport
    from tvmrt.contrib.graph_executor import GraphModule
    from tvmrt.runtime.device import Device

__all__ = ["CompileResult", "GRAPH", "LIB", "PARAMS", "STANDALONE", "TUNING_DIR"]

GRAPH, LIB, PARAMS, STANDALONE = "deploy.json", "deploy.so", "deploy.params", "standalone.so"
"""File names written into ``output_dir``."""

TUNING_DIR = "tuning"


@dataclass(frozen=True)
class CompileResult:
    """What :func:`compile` wrote and what the model looks like.

    Attributes
    ----------
    output_dir
        The folder with the artifacts.
    graph_json, lib, params
        Paths of ``deploy.json``, ``deploy.so`` and ``deploy.params``.
    standalone
        Path of ``standalone.so``: kernels, graph and params in one library;
        ``load_module(path)["default"](dev)`` creates an executor.
    input_names, input_shapes, input_dtypes
        The graph's inputs (params excluded).
    output_names, output_shapes, output_dtypes
        The graph's outputs, in head order.
    target
        The TVM target the kernels were compiled for, as a dict.
    kernels
        Names of the compiled kernels.
    num_nodes, num_nops
        Graph nodes, and how many of them are ``__nop`` reshapes.
    tuning
        What tuning did, or ``None`` without ``tune``.
    timings
        Seconds per stage (``import``, ``lower``, ``emit``, ``tune``, ``build``, ``write``).
    relax_module
        The fused Relax ``IRModule`` whose ``main`` the graph mirrors, with the PrimFuncs
        exactly as compiled (tuned where tuning won); e.g. to build a Relax VM of the very
        same kernels for comparison.
    """

    output_dir: str
    graph_json: str
    lib: str
    params: str
    standalone: str
    input_names: tuple[str, ...]
    input_shapes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[str, ...]
    output_names: tuple[str, ...]
    output_shapes: tuple[tuple[int, ...], ...]
    output_dtypes: tuple[str, ...]
    target: dict[str, Any]
    kernels: tuple[str, ...]
    num_nodes: int
    num_nops: int
    tuning: TuneReport | None = None
    timings: dict[str, float] = field(default_factory=dict)
    relax_module: Any = field(default=None, repr=False, compare=False)

    def load(self, device: Device | None = None) -> GraphModule:
        """Create a tvmrt executor over the artifacts, with the params loaded."""
        from tvmrt.contrib import graph_executor
        from tvmrt.runtime import cpu, load_module

        with open(self.graph_json, encoding="utf-8") as f:
            graph = f.read()
        module = graph_executor.create(graph, load_module(self.lib), device or cpu())
        with open(self.params, "rb") as f:
            module.load_params(f.read())
        return module

    def summary(self) -> str:
        """A few lines for people: files, inputs, outputs, kernels, timings."""
        lines = [f"wrote {self.output_dir}: {GRAPH}, {LIB}, {PARAMS}, {STANDALONE}"]
        for n, s, d in zip(self.input_names, self.input_shapes, self.input_dtypes, strict=True):
            lines.append(f"  input  {n}: {d}{list(s)}")
        for n, s, d in zip(self.output_names, self.output_shapes, self.output_dtypes, strict=True):
            lines.append(f"  output {n}: {d}{list(s)}")
        lines.append(
            f"  {self.num_nodes} nodes, {len(self.kernels)} kernels, {self.num_nops} __nop; "
            f"target {json.dumps(self.target)}"
        )
        if self.tuning is not None:
            t = self.tuning
            lines.append(
                f"  tuned {t.trials} trials over {len(t.tasks)} kernels "
                f"({t.cost_model} cost model), database {t.work_dir}"
            )
            if t.kept_untuned:
                lines.append(f"  untuned kernels kept (faster): {', '.join(t.kept_untuned)}")
        lines.append("  " + ", ".join(f"{k} {v:.2f}s" for k, v in self.timings.items()))
        return "\n".join(lines)
