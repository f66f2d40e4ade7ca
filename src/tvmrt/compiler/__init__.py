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

import os
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from tvmrt.compiler.result import GRAPH, LIB, PARAMS, STANDALONE, TUNING_DIR, CompileResult
from tvmrt.compiler.target import PORTABLE_CPUS, TargetSpec
from tvmrt.error import InvalidArgumentError

__all__ = [
    "compile",
    "CompileResult",
    "PORTABLE_CPUS",
    "GRAPH",
    "LIB",
    "PARAMS",
    "STANDALONE",
    "TUNING_DIR",
]


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
