"""One library file that is a graph executor factory: ``export_library`` output.

A ``.so`` (system-lib builds included), an object file or an export tar whose module blob
holds a ``GraphExecutorFactory`` (graph JSON + params): the executor is
``lib["default"](*devices)`` and replicas use the factory's own param arrays. This is also
the form of every library file no other form claims, so that loading and inspection say
what is wrong with it. An AOT build packed as an object or tar is known only from its
blob: it is handed to :mod:`tvmrt.artifact.forms.aot`, and a Relay VM ``vm.so`` to
:mod:`tvmrt.artifact.forms.relay_vm`.
"""

from __future__ import annotations

from tvmrt.artifact.files import ArtifactFiles
from tvmrt.artifact.forms import aot, relay_vm
from tvmrt.artifact.forms.base import ArtifactForm, LoadRequest
from tvmrt.artifact.forms.graph_build import load_graph_model
from tvmrt.artifact.inspect_binary import Found, inspect_library_code
from tvmrt.artifact.model import LoadedModel
from tvmrt.runtime.loaders.dispatch import Sniffed
from tvmrt.runtime.module import Module

__all__ = ["FORM"]


def _claims(files: ArtifactFiles, sniffed: Sniffed | None) -> bool:
    return True  # the last entry of the table


def _load(request: LoadRequest, lib: Module) -> LoadedModel:
    root = request.root_key(lib)
    if aot.is_aot_factory(root):  # an AOT build packed as an object or export tar
        return aot.FORM.load(request, lib)
    if relay_vm.is_vm_executable(root):  # vm.so: the executable is the blob's root module
        return relay_vm.FORM.load(request, lib)
    return load_graph_model("factory", request, lib, None)


def _inspect(
    files: ArtifactFiles, sniffed: Sniffed | None, found: Found, problems: list[str]
) -> None:
    inspect_library_code(files.lib, sniffed, found, problems)
    aot.describe_embedded(found)
    relay_vm.describe_embedded(found, problems)


FORM = ArtifactForm(
    "factory",
    "graph executor factory library (export_library: .so, .o or .tar)",
    _claims,
    _load,
    _inspect,
    remote=True,
)
