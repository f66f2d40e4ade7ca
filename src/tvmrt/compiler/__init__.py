"""``tvmrt.compile``: ONNX model in, graph-executor artifact out, compiled by today's TVM.

TVM removed ``relay.build``, but its Relax + TIR stack still compiles good kernels: after
fusion, Relax ``main`` is a flat list of ``call_tir`` calls, which is the old ``tvm_op``
graph. :func:`compile` turns it into the classic artifact that tvmrt (and TVM's graph
executor) runs::

    result = tvmrt.compile("model.onnx", input_shapes={"x": (1, 3, 224, 224)},
                           output_dir="build")
    # build/deploy.json, build/deploy.so, build/deploy.params, build/standalone.so

Importing this package does not import TVM; :func:`compile` does, and needs the
``compile`` extra (``pip install 'tvmrt[compile]'``) plus a C compiler to link.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from tvmrt.compiler.target import PORTABLE_CPUS, TargetSpec
from tvmrt.error import InvalidArgumentError

if TYPE_CHECKING:
    from tvmrt.compiler.tune import TuneReport
    from tvmrt.contrib.graph_executor import GraphModule
    from tvmrt.runtime.device import Device

__all__ = ["compile", "CompileResult", "PORTABLE_CPUS", "GRAPH", "LIB", "PARAMS", "STANDALONE"]

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


def compile(
    model: Any,
    target: TargetSpec = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    tune: int | None = None,
    *,
    output_dir: str | os.PathLike[str],
    tuning_dir: str | os.PathLike[str] | None = None,
    progress: TextIO | None = sys.stderr,
) -> CompileResult:
    """Compile an ONNX model into a graph-executor artifact.

    Parameters
    ----------
    model
        An ``onnx.ModelProto`` or the path of an ``.onnx`` file.
    target
        ``None``/``"host"``: this machine's CPU by name (``target.llvm_get_system_cpu``;
        never ``"native"``, which TVM's LLVM turns into generic code). A portable level
        (``"x86-64-v3"``, ``"x86-64-v2"``), another CPU name, ``"llvm -mcpu=..."`` or a
        target dict are also accepted; see :func:`tvmrt.compiler.target.resolve_target`.
    input_shapes
        Input name → static shape, for inputs with symbolic dimensions (or to override).
    tune
        MetaSchedule trial budget for all kernels together; ``0`` applies an existing
        tuning database without new trials; ``None`` (default) does not tune.
    output_dir
        Folder for ``deploy.json``, ``deploy.so``, ``deploy.params`` and
        ``standalone.so`` (created if needed).
    tuning_dir
        The tuning database folder (default ``output_dir/tuning``); reused across runs.
    progress
        Stream for the tuning progress bar (stderr), or ``None`` for none.

    Returns
    -------
    CompileResult
        Paths, input/output names and shapes, target, timings.

    Raises
    ------
    CompileError
        If the model uses something a static graph cannot express (symbolic shapes not
        fixed by ``input_shapes``, control flow, packed-function calls, ...), TVM rejects
        it, or building/linking fails. The message names the construct and the binding.
    FileNotFoundError
        If ``model`` is a path that does not exist.
    ValueError
        If an argument is invalid (unknown input in ``input_shapes``, bad target).
    ImportError
        If apache-tvm or onnx is missing (``pip install 'tvmrt[compile]'``).

    Examples
    --------
    >>> result = tvmrt.compile("mnist.onnx", output_dir="out")  # doctest: +SKIP
    >>> module = result.load()  # doctest: +SKIP
    >>> module.run(Input3=x); module.get_output(0).numpy()  # doctest: +SKIP
    """
    if tune is not None and (isinstance(tune, bool) or not isinstance(tune, int) or tune < 0):
        raise InvalidArgumentError(f"tune must be a trial count >= 0 or None, got {tune!r}")
    from tvmrt.compiler._pipeline import run_pipeline

    start = time.perf_counter()
    result = run_pipeline(
        model,
        target=target,
        input_shapes=input_shapes,
        tune=tune,
        output_dir=os.fspath(output_dir),
        tuning_dir=None if tuning_dir is None else os.fspath(tuning_dir),
        progress=progress,
    )
    result.timings["total"] = time.perf_counter() - start
    return result
