"""An AOT build: ``relay.build(..., executor=Executor("aot"))`` exported as a library.

No graph JSON: the library exports ``get_c_metadata`` (the inputs and outputs) and the
entry function, and its module blob holds an ``AotExecutorFactory``. The executor is
``lib["default"](dev)`` behind :class:`~tvmrt.artifact.aot_executors.AotExecutorAdapter`;
with ``debug`` the whole run is timed as one call. It runs on a device of an RPC session
too (the server makes the executor), but is profiled only here.
"""

from __future__ import annotations

import tempfile

from tvmrt.artifact.aot_executors import (
    AotExecutorAdapter,
    AotProfilingAdapter,
    create_aot_executor,
)
from tvmrt.artifact.files import ArtifactFiles
from tvmrt.artifact.forms.base import ArtifactForm, LoadRequest
from tvmrt.artifact.inspect_binary import Found, inspect_library_code
from tvmrt.artifact.model import LoadedModel
from tvmrt.error import UnsupportedError
from tvmrt.runtime.executor import AotExecutor, AotExecutorFactory
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
    executor = create_aot_executor(lib, dev)
    bound = None if request.remote is None else request.remote.params
    if request.debug:  # no graph, no per-operator timing: the whole model is one call
        if not isinstance(executor, AotExecutor):
            raise UnsupportedError(
                f"artifact form 'aot' ({FORM.description}) is profiled only on a local "
                f"device, not on {dev} of an RPC session: tvmrt run and bench time it there"
            )
        dump_root = request.dump_root or tempfile.mkdtemp(prefix="tvmrt_aot_profile_")
        profiler = AotProfilingAdapter(executor, lib, dev, dump_root)
        return LoadedModel(profiler, lib, files, "aot", profiler.param_names, profiler)
    adapter = AotExecutorAdapter(executor, lib, dev, bound)
    return LoadedModel(adapter, lib, files, "aot", adapter.param_names)


def describe_embedded(found: Found) -> None:
    """Note an ``AotExecutorFactory`` in the module blob: an AOT build (no graph expected)."""
    for module in found.embedded:
        if isinstance(module, AotExecutorFactory):
            found.aot = True
            found.out["form_text"] = f"{found.out.get('form_text', '')}: AOT executor build"
            found.params.update(module.params)
            found.out["embedded"] = (
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
