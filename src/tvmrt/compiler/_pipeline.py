"""The steps of :func:`tvmrt.compiler.compile`, in order (imports TVM)."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from tvmrt.compiler import build, cuda, emitter, frontend
from tvmrt.compiler import tune as tuning
from tvmrt.compiler._tvm import require_tvm
from tvmrt.compiler.result import GRAPH, LIB, PARAMS, STANDALONE, TUNING_DIR, CompileResult
from tvmrt.compiler.target import TargetSpec, resolve_target
from tvmrt.error import InvalidArgumentError
from tvmrt.runtime.graph_executor import parse_graph
from tvmrt.runtime.params import save_param_dict

__all__ = ["run_pipeline"]


class _Clock:
    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._t = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.timings[name] = self.timings.get(name, 0.0) + now - self._t
        self._t = now


def _num_cores() -> int:
    return os.cpu_count() or 1


def run_pipeline(
    model: Any,
    *,
    target: TargetSpec,
    input_shapes: Mapping[str, Sequence[int]] | None,
    tune: int | None,
    output_dir: str,
    tuning_dir: str | None,
    progress: TextIO | None,
) -> CompileResult:
    """Load, lower, emit, (tune), build and write; see :func:`tvmrt.compiler.compile`."""
    clock = _Clock()
    proto = frontend.load_onnx(model)
    inputs = frontend.model_inputs(proto)
    shapes = frontend.fix_input_shapes(inputs, input_shapes)
    output_names = frontend.model_output_names(proto)
    target_dict = resolve_target(target)
    if tune is not None:
        # MetaSchedule sizes parallel loops by num-cores; build with the same target
        target_dict.setdefault("num-cores", _num_cores())
    tvm = require_tvm()
    on_cuda = target_dict.get("kind") == "cuda"
    if on_cuda and tune is not None:
        raise InvalidArgumentError("--tune is for CPU targets; a cuda build is not tuned")
    tgt = cuda.cuda_target(target_dict) if on_cuda else tvm.target.Target(target_dict)
    clock.lap("import")

    mod = frontend.lower(frontend.import_onnx(proto, shapes), tgt)
    clock.lap("lower")
    names = [i.name for i in inputs]
    art = emitter.emit_graph(mod, names, output_names)  # refuse before tuning or linking
    build.check_c_compiler()
    clock.lap("emit")

    report = None
    if tune is not None:
        work_dir = tuning_dir or os.path.join(output_dir, TUNING_DIR)
        if tune > 0:
            report = tuning.tune_kernels(mod, art.kernels, tgt, work_dir, tune, progress=progress)
        else:
            report = tuning.TuneReport(work_dir, 0, (), "none", 0.0)
        if tuning.has_database(work_dir):
            tuned = tuning.apply_database(mod, tgt, work_dir)
            mod, kept = tuning.keep_faster_kernels(mod, tuned, art.kernel_args, tgt)
            report = dataclasses.replace(report, kept_untuned=kept)
            art = emitter.emit_graph(mod, names, output_names)
        clock.lap("tune")

    lib = None if on_cuda else build.build_kernels(mod, art.kernels, tgt)
    clock.lap("build")

    os.makedirs(output_dir, exist_ok=True)
    paths = {k: os.path.join(output_dir, k) for k in (GRAPH, LIB, PARAMS, STANDALONE)}
    graph_json = art.json
    parse_graph(graph_json)  # what we emit must pass tvmrt's own validation
    with open(paths[GRAPH], "w", encoding="utf-8") as f:
        f.write(graph_json)
    with open(paths[PARAMS], "wb") as f:
        # the kernels are today's TVM (tvm-ffi): their params use its dtype codes, which
        # the graph executor reads for a tvm-ffi library (and TVM itself reads)
        f.write(save_param_dict(art.params, dtype_codes="ffi"))
    if on_cuda:  # built here: the kernels are scheduled, compiled (nvcc) and linked at once
        cuda.build_cuda_libraries(
            mod, art.kernels, tgt, graph_json, art.params, paths[LIB], paths[STANDALONE]
        )
    else:
        build.export_library(lib, paths[LIB])
        build.write_factory_library(lib, paths[STANDALONE], graph_json, art.params, tgt)
    clock.lap("write")

    return CompileResult(
        output_dir=output_dir,
        graph_json=paths[GRAPH],
        lib=paths[LIB],
        params=paths[PARAMS],
        standalone=paths[STANDALONE],
        input_names=art.input_names,
        input_shapes=art.input_shapes,
        input_dtypes=art.input_dtypes,
        output_names=tuple(output_names)
        if len(output_names) == len(art.output_shapes)
        else tuple(f"output{i}" for i in range(len(art.output_shapes))),
        output_shapes=art.output_shapes,
        output_dtypes=art.output_dtypes,
        target=json.loads(json.dumps(target_dict)),
        kernels=art.kernels,
        num_nodes=len(art.graph["nodes"]),
        num_nops=art.num_nops,
        tuning=report,
        timings=clock.timings,
        relax_module=mod,
    )
