"""An AOT build: ``relay.build(..., executor=Executor("aot"))`` exported as a library.

No graph JSON: the library exports ``get_c_metadata`` (the inputs and outputs) and the
entry function, and its module blob holds an ``AotExecutorFactory``. The executor is
TVM's face :class:`~tvmrt.runtime.executor.AotModule` over ``lib["default"](dev)``;
with ``debug`` the whole run is timed as one call. It runs on a device of an RPC session
too: the server makes the executor, and the face reads and times it through its packed
functions.
"""

from __future__ import annotations

import tempfile

from tvmrt.artifact.files import ArtifactFiles
from tvmrt.artifact.forms.base import ArtifactForm, LoadRequest
from tvmrt.artifact.inspect_binary import Found, inspect_library_code
from tvmrt.artifact.model import LoadedModel
from tvmrt.error import ModuleLoadError
from tvmrt.runtime.executor import AotExecutorFactory, AotModule
from tvmrt.runtime.loaders.dispatch import Sniffed
from tvmrt.runtime.module import Module

__all__ = ["FORM", "describe_embedded", "is_aot_factory"]

_METADATA_FUNCTION = "get_c_metadata"


def is_aot_factory(type_key: str) -> bool:
    """Whether a loaded root module of this type key is TVM's AOT executor factory."""
    return type_key == "AotExecutorFactory"


def _claims(files: ArtifactFiles, sniffed: Sniffed | None) -> bool:
    if sniffed is None or sniffed.facts is None or sniffed.facts.symbols is None:
        return False
    return _METADATA_FUNCTION in sniffed.facts.symbols.functions


def _load(request: LoadRequest, lib: Module) -> LoadedModel:
    files, dev = request.files, request.device

    def make_module() -> Module:
        executor: Module = lib["default"](dev)
        if executor.type_key not in ("AotExecutor", "rpc"):  # "rpc": made on a server
            raise ModuleLoadError(
                f"the AOT factory's default() made a {executor.type_key!r} module, "
                "not an AotExecutor"
            )
        return executor

    if request.remote is not None:  # the server's factory: its params read from the file
        bound = request.remote.params
    else:
        bound = frozenset(lib.params if isinstance(lib, AotExecutorFactory) else ())
    if request.debug:  # no graph, no per-operator timing: the whole model is one call
        dump_root = request.dump_root or tempfile.mkdtemp(prefix="tvmrt_aot_profile_")
        profiler = AotModule(make_module(), bound, make_module, dump_root)
        return LoadedModel(profiler, lib, files, "aot", bound, profiler)
    return LoadedModel(AotModule(make_module(), bound, make_module), lib, files, "aot", bound)


def describe_embedded(found: Found) -> None:
    """Note an ``AotExecutorFactory`` in the module blob: an AOT build (no graph expected)."""
    for module in found.embedded:
        if isinstance(module, AotExecutorFactory):
            found.aot = True
            found.library.form_text = f"{found.library.form_text or ''}: AOT executor build"
            found.params.update(module.params)
            found.library.embedded = (
                "AOT executor factory (no graph: the inputs and outputs are described by "
                "the library's get_c_metadata, read when it is loaded)"
            )
            return


def _inspect(
    files: ArtifactFiles, sniffed: Sniffed | None, found: Found, problems: list[str]
) -> None:
    inspect_library_code(files.lib, sniffed, found, problems)
    describe_embedded(found)


FORM = ArtifactForm(
    "aot",
    "AOT executor build (no graph JSON; get_c_metadata describes inputs and outputs)",
    _claims,
    _load,
    _inspect,
    remote=True,
)
