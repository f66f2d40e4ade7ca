"""``tvmrt inspect``: what an artifact is and whether it can run here, executing none of it.

The form comes from :func:`tvmrt.artifact.forms.form_of` (the same table loading reads);
the form reads its files (:mod:`tvmrt.artifact.inspect_binary` for library code); then
the graph and the params are described and checked here, whatever the form. The report
is an :class:`~tvmrt.artifact.report.InspectionReport`; ``--json`` prints its
serialization.
"""

from __future__ import annotations

from collections.abc import Mapping

from tvmrt.artifact.files import ArtifactFiles
from tvmrt.artifact.forms import form_of
from tvmrt.artifact.inspect_binary import describe_library
from tvmrt.artifact.report import (
    GraphReport,
    HostReport,
    InspectionReport,
    ParamsReport,
    StorageReport,
    TensorReport,
)
from tvmrt.artifact.subnormals import count_subnormals, subnormal_note
from tvmrt.binfmt.files import read_graph
from tvmrt.error import TVMError
from tvmrt.runtime.graph_executor.graph import Graph, parse_graph
from tvmrt.runtime.graph_executor.roles import output_labels, runnability_problems
from tvmrt.runtime.graph_executor.storage import StoragePlan, plan_storage
from tvmrt.runtime.params import iter_param_records, mapped_file
from tvmrt.runtime.tensor_record import DtypeCodes

__all__ = ["describe_graph", "dumps", "inspect_artifact", "layout_problems"]


def inspect_artifact(files: ArtifactFiles) -> InspectionReport:
    """Describe an artifact without executing any of its code.

    Returns the report: the artifact ``form`` (:mod:`tvmrt.artifact.forms`), the
    library (its form as the loader's dispatcher sees it, architecture, TVM ABI, kernels
    it exports), the graph (inputs, outputs, nodes, kernels, storage plan), the params
    (count, bytes), and ``problems``: everything that would stop it from running here
    (``runnable`` is true only when there is none).
    """
    from tvmrt.binfmt import binary

    problems: list[str] = []
    form, sniffed, sniff_problem = form_of(files)
    if sniff_problem is not None:
        problems.append(sniff_problem)
    found = describe_library(files.lib, sniffed, problems)
    form.inspect(files, sniffed, found, problems)
    graph_json = read_graph(files.graph) if files.graph else found.graph_json
    if not found.graph_expected:  # an executable of its own (Relax VM): no graph to read
        graph_json = None
    params = {name: arr.nbytes for name, arr in found.params.items()}
    layouts = {name: (tuple(arr.shape), str(arr.dtype)) for name, arr in found.params.items()}
    subnormals: dict[str, int] = {}
    for name, arr in found.params.items():
        values = arr.numpy()
        subnormals[name] = count_subnormals(values, values.dtype)
    codes: DtypeCodes = "ffi" if (found.library.abi or "").startswith("tvm-ffi") else "legacy"
    if files.params is not None:
        try:
            with mapped_file(files.params) as view:
                for record in iter_param_records(view, codes):  # every record checked
                    params[record.name] = record.data.nbytes
                    layouts[record.name] = (record.shape, str(record.dtype))
                    dtype = record.dtype.numpy_dtype
                    subnormals[record.name] = count_subnormals(record.data, dtype)
        except (TVMError, OSError) as exc:
            problems.append(str(exc))
    described: GraphReport | None = None
    if graph_json is None:
        if not found.aot and found.library.relay_vm is None and found.graph_expected:
            problems.append("no graph JSON: the library carries none and none was given")
    else:
        try:
            graph = parse_graph(graph_json)
            described = describe_graph(graph, params, found.exported, problems)
            problems.extend(layout_problems(graph, layouts))
        except TVMError as exc:
            problems.append(str(exc))
    return InspectionReport(
        files={k: str(v) for k, v in vars(files).items() if v},
        form=form.name,
        library=found.library,
        graph=described,
        params=ParamsReport(
            count=len(params),
            bytes=sum(params.values()),
            subnormals=sum(subnormals.values()) or None,
            subnormal_note=subnormal_note(subnormals.items()),
        ),
        host=HostReport(machine=binary.host_machine(), os=binary.host_os()),
        problems=problems,
        runnable=not problems,
    )


def layout_problems(
    graph: Graph, layouts: Mapping[str, tuple[tuple[int, ...], str]], shown: int = 5
) -> list[str]:
    """Params named as graph inputs but of another shape or dtype (``run`` refuses them)."""
    found = []
    for nid in graph.arg_nodes:
        name = graph.nodes[nid].name
        if name not in layouts:
            continue
        eid = graph.entry_id(nid)
        want = (tuple(graph.shapes[eid]), str(graph.dltypes[eid]))
        if layouts[name] != want:
            (shape, dtype), (want_shape, want_dtype) = layouts[name], want
            found.append(
                f"param {name!r} has shape {shape} and dtype {dtype}, but the graph's input "
                f"has shape {want_shape} and dtype {want_dtype}"
            )
    if len(found) > shown:
        found[shown:] = [f"... and {len(found) - shown} more params that do not fit the graph"]
    return found


def dumps(report: InspectionReport) -> str:
    """The inspection report as indented JSON (``tvmrt inspect --json``)."""
    return report.to_json()


def describe_graph(
    graph: Graph, params: Mapping[str, int], exported: set[str] | None, problems: list[str]
) -> GraphReport:
    """Inputs, weights, outputs, kernels and storage plan of ``graph``; adds its problems."""
    ops = [n for n in graph.nodes if n.is_op]
    kernels = sorted({n.func_name for n in ops} - {"__nop", "__copy"})
    if exported is not None:
        missing = [k for k in kernels if k not in exported and f"__tvm_ffi_{k}" not in exported]
        if missing:
            shown = ", ".join(missing[:5])
            problems.append(f"the library lacks {len(missing)} kernel(s) the graph calls: {shown}")
    inputs: list[TensorReport] = []
    weights = 0  # counted only: a graph may have a million
    for nid in graph.arg_nodes:
        name = graph.nodes[nid].name
        if name in params:
            weights += 1
            continue
        eid = graph.entry_id(nid)
        inputs.append(TensorReport(name, list(graph.shapes[eid]), str(graph.dltypes[eid])))
    outputs = []
    for h, label in zip(graph.heads, output_labels(graph), strict=True):
        eid = graph.entry_id(h.node_id, h.index)
        # the one output name of every verb (artifact/output_names.py)
        outputs.append(TensorReport(label, list(graph.shapes[eid]), str(graph.dltypes[eid])))
    device_types = graph.device_types or (1,)
    storage: StorageReport | None = None
    plan: StoragePlan | None = None
    try:
        plan = plan_storage(graph, device_types[0])
    except TVMError as exc:  # a damaged plan: say so, and still describe the rest
        problems.append(str(exc))
    problems.extend(runnability_problems(graph, plan, params))  # weights, memory
    if plan is not None:
        storage = StorageReport(
            pools=plan.num_pools,
            bytes=plan.total_bytes,
            bytes_without_reuse=sum(graph.entry_nbytes(e) for e in range(graph.num_entries)),
            planned_by="graph" if graph.storage_ids is not None else "tvmrt (liveness)",
        )
    return GraphReport(
        inputs=inputs,
        outputs=outputs,
        nodes=len(graph.nodes),
        operators=len(ops),
        kernels=kernels,
        params_in_graph=weights,
        storage=storage,
        devices=sorted(set(device_types)),
    )
