"""What an artifact form is: how it is recognised, loaded and inspected.

One :class:`ArtifactForm` per file of :mod:`tvmrt.artifact.forms`; the table there is
read by both :func:`~tvmrt.artifact.loading.load_artifact` and
:func:`~tvmrt.artifact.inspection.inspect_artifact`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tvmrt.artifact.files import ArtifactFiles
from tvmrt.artifact.inspect_binary import Found
from tvmrt.artifact.model import LoadedModel
from tvmrt.runtime.device import Device
from tvmrt.runtime.loaders.dispatch import Sniffed
from tvmrt.runtime.module import Module

__all__ = ["ArtifactForm", "LoadRequest"]


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
    """

    files: ArtifactFiles
    device: Device
    debug: bool = False
    dump_root: str | None = None


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
    """

    name: str
    description: str
    claims: Callable[[ArtifactFiles, Sniffed | None], bool]
    load: Callable[[LoadRequest, Module], LoadedModel]
    inspect: Callable[[ArtifactFiles, Sniffed | None, Found, list[str]], None]
