"""Deprecated name of :mod:`tvmrt.contrib.graph_executor` (TVM's ``graph_runtime``)."""

from __future__ import annotations

from collections.abc import Sequence

from tvmrt.contrib.graph_executor import GraphModule
from tvmrt.contrib.graph_executor import create as _create
from tvmrt.runtime._deprecate import warn_deprecated
from tvmrt.runtime.device import Device
from tvmrt.runtime.module import Module

__all__ = ["create", "GraphModule"]


def create(graph_json_str: str, libmod: Module, device: Device | Sequence[Device]) -> GraphModule:
    """Deprecated: use :func:`tvmrt.contrib.graph_executor.create`."""
    warn_deprecated("graph_runtime.create", instead="graph_executor.create")
    return _create(graph_json_str, libmod, device)
