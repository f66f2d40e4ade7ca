"""A Model Library Format tar (``export_model_library_format``, microTVM's export).

Loaded by the runtime's package loader (:mod:`tvmrt.runtime.loaders.packages`) into a
graph executor factory over the linked host code, so the executor is the factory's own;
inspection reads ``metadata.json``, the host code, the graph and the params members.
"""

from __future__ import annotations

from tvmrt.artifact.files import ArtifactFiles
from tvmrt.artifact.forms.base import ArtifactForm, LoadRequest
from tvmrt.artifact.forms.graph_build import load_graph_model
from tvmrt.artifact.inspect_binary import Found, archive_members, inspect_code
from tvmrt.artifact.model import LoadedModel
from tvmrt.artifact.report import MlfReport
from tvmrt.error import ModuleLoadError, TVMError
from tvmrt.runtime.loaders.dispatch import FileKind, Sniffed
from tvmrt.runtime.module import Module
from tvmrt.runtime.params import load_param_dict

__all__ = ["FORM"]


def _claims(files: ArtifactFiles, sniffed: Sniffed | None) -> bool:
    return sniffed is not None and sniffed.form is FileKind.MLF


def _load(request: LoadRequest, lib: Module) -> LoadedModel:
    return load_graph_model("mlf", request, lib, None)


def _inspect(
    files: ArtifactFiles, sniffed: Sniffed | None, found: Found, problems: list[str]
) -> None:
    path = files.lib
    from tvmrt.runtime.loaders import packages

    members = archive_members(path, problems)
    if members is None:
        return
    try:
        summary_fields = packages.mlf_summary(members.get("metadata.json", b"{}"), str(path))
    except ModuleLoadError as exc:
        problems.append(str(exc))
        return
    summary = MlfReport(**summary_fields)
    found.library.mlf = summary
    model = summary.model
    if "graph" not in summary.executors:
        problems.append(
            f"{str(path)!r} is a Model Library Format tar built for the "
            f"{', '.join(summary.executors) or 'unknown'} executor but holds a graph executor "
            "config (an MLF AOT package has no executor-config/graph/)"
        )
    code = [(n, d) for n, d in sorted(members.items()) if n.startswith("codegen/host/")]
    if not code:
        problems.append(f"{str(path)!r} holds no host code under codegen/host/")
    inspect_code(code, str(path), found, problems)
    graph = members.get(f"executor-config/graph/{model}.graph")
    if graph is not None:
        found.graph_json = graph.decode("utf-8", errors="replace")
    params = members.get(f"parameters/{model}.params")
    if params is not None:
        try:
            found.params.update(load_param_dict(params))
        except TVMError as exc:
            problems.append(str(exc))
    found.library.members = sorted(members)


FORM = ArtifactForm(
    "mlf",
    "Model Library Format tar (graph JSON, params and host code as members)",
    _claims,
    _load,
    _inspect,
)
