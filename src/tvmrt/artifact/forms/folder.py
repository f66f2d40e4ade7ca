"""A graph JSON beside a kernel library (and a params file): a folder, or explicit files.

TVM's ``deploy_graph.json`` / ``deploy_lib.so`` / ``deploy_param.params`` layout (or
``--graph/--lib/--params``): the executor is ``create(graph_json, lib, devices)`` and the
params are loaded from the file (memory-mapped), then shared by every replica.
"""

from __future__ import annotations

from tvmrt.artifact.files import ArtifactFiles
from tvmrt.artifact.forms.base import ArtifactForm, LoadRequest
from tvmrt.artifact.forms.graph_build import load_graph_model
from tvmrt.artifact.inspect_binary import Found, inspect_library_code
from tvmrt.artifact.model import LoadedModel
from tvmrt.binfmt.files import read_graph
from tvmrt.runtime.loaders.dispatch import Sniffed
from tvmrt.runtime.module import Module

__all__ = ["FORM"]


def _claims(files: ArtifactFiles, sniffed: Sniffed | None) -> bool:
    return files.graph is not None


def _load(request: LoadRequest, lib: Module) -> LoadedModel:
    assert request.files.graph is not None  # claimed only with a graph
    return load_graph_model("folder", request, lib, read_graph(request.files.graph))


def _inspect(
    files: ArtifactFiles, sniffed: Sniffed | None, found: Found, problems: list[str]
) -> None:
    inspect_library_code(files.lib, sniffed, found, problems)  # the graph is read from its file


FORM = ArtifactForm(
    "folder",
    "graph JSON + kernel library (+ params file)",
    _claims,
    _load,
    _inspect,
    remote=True,
)
