"""Artifacts on disk, from files to a running model: the one owner of "files -> model".

An artifact is a folder (graph JSON + kernel library + params), one file that carries
everything (a factory library, an AOT build, a Model Library Format tar, a tvmc package),
or explicit files. :func:`find_artifact` resolves the files; :func:`load_artifact` loads
them as a :class:`LoadedModel` whose :class:`Executor` runs the model whatever the form
(:mod:`tvmrt.artifact.forms` lists the forms); :func:`inspect_artifact` describes them
without executing any of their code.

Layers: this package uses ``tvmrt.runtime`` and ``tvmrt.contrib``; ``tvmrt.cli``,
``tvmrt.serve`` and ``tvmrt.compiler`` use it.
"""

from __future__ import annotations

from tvmrt.artifact.devices import DEVICE_MODULE_KINDS, executor_devices
from tvmrt.artifact.files import ArtifactBytes, ArtifactFiles, find_artifact
from tvmrt.artifact.inspection import dumps, inspect_artifact
from tvmrt.artifact.loading import executor_from_graph, load_artifact
from tvmrt.artifact.model import Executor, GraphTiming, LoadedModel, ProfilingExecutor, TensorInfo

__all__ = [
    "DEVICE_MODULE_KINDS",
    "ArtifactBytes",
    "ArtifactFiles",
    "Executor",
    "LoadedModel",
    "GraphTiming",
    "ProfilingExecutor",
    "TensorInfo",
    "dumps",
    "executor_devices",
    "executor_from_graph",
    "find_artifact",
    "inspect_artifact",
    "load_artifact",
]
