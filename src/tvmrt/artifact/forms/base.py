"""What an artifact form is: how it is recognised, loaded and inspected.

One :class:`ArtifactForm` per file of :mod:`tvmrt.artifact.forms`; the table there is
read by both :func:`~tvmrt.artifact.loading.load_artifact` and
:func:`~tvmrt.artifact.inspection.inspect_artifact`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tvmrt.artifact.files import ArtifactFiles
from tvmrt.artifact.inspect_binary import Found
from tvmrt.artifact.model import LoadedModel
from tvmrt.error import UnsupportedError
from tvmrt.runtime.device import Device
from tvmrt.runtime.loaders.dispatch import Sniffed
from tvmrt.runtime.module import Module

__all__ = ["ArtifactForm", "LoadRequest", "RemoteLibrary", "remote_refusal"]


@dataclass(frozen=True)
class RemoteLibrary:
    """What the library a remote session loaded holds, read here from its file.

    A module on an RPC server answers calls of its packed functions only (its type key is
    ``"rpc"``), so what a form would ask of a local root module is read from the module
    blob of the file that was uploaded (nothing of it runs here).

    Attributes
    ----------
    root
        The type key of the factory in the module blob (``"GraphExecutorFactory"``,
        ``"AotExecutorFactory"``, ``"VMExecutable"``), or ``""`` when it holds none.
    params
        The names of the params the factory binds.
    """

    root: str = ""
    params: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class LoadRequest:
    """What the caller of ``load_artifact`` asked for.

    Attributes
    ----------
    files
        The artifact's files.
    device
        Where to run.
    debug
        Whether to create a profiling (debug) executor.
    dump_root
        The debug dump folder (None: a new temporary folder).
    remote
        For a device of an RPC session: what the uploaded library holds (None: local).
    """

    files: ArtifactFiles
    device: Device
    debug: bool = False
    dump_root: str | None = None
    remote: RemoteLibrary | None = None

    def root_key(self, lib: Module) -> str:
        """The type key of the loaded root module (a remote one's, read from its file)."""
        return lib.type_key if self.remote is None else self.remote.root


@dataclass(frozen=True)
class ArtifactForm:
    """One artifact form.

    Attributes
    ----------
    name
        Short name (``LoadedModel.form``, the ``form`` of ``tvmrt inspect --json``).
    description
        The form as a phrase.
    claims
        Whether these files are this form, given what the loader's dispatcher sniffed
        from the library file (None when it could not read it). Reads no more than that.
    load
        Build the executor over the loaded library (``load_module(files.lib)``).
    inspect
        Add to ``found`` (the report's library section, graph, params) and ``problems``,
        executing nothing from the artifact.
    remote
        Whether it runs on a device of an RPC session: its library is one file a server
        loads, and ``load`` calls only packed functions of it (``request.remote`` tells
        what a local module's type key would). ``load_artifact`` refuses the others,
        naming the form, before anything is sent.
    """

    name: str
    description: str
    claims: Callable[[ArtifactFiles, Sniffed | None], bool]
    load: Callable[[LoadRequest, Module], LoadedModel]
    inspect: Callable[[ArtifactFiles, Sniffed | None, Found, list[str]], None]
    remote: bool = False


def remote_refusal(form: ArtifactForm, device: Device) -> UnsupportedError:
    """The error of a form that does not run on ``device``, a device of an RPC session."""
    return UnsupportedError(
        f"artifact form {form.name!r} ({form.description}) cannot run on {device}, a device "
        "of an RPC session: a server loads one library file and runs what its packed "
        "functions offer; run it on a local device (or with tvmrt on the board itself)"
    )
