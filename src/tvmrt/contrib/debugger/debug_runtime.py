"""Deprecated name of :mod:`tvmrt.contrib.debugger.debug_executor` (TVM's ``debug_runtime``)."""

from __future__ import annotations

from typing import Any

from tvmrt.contrib.debugger import debug_executor
from tvmrt.contrib.debugger.debug_executor import GraphModuleDebug
from tvmrt.runtime._deprecate import warn_deprecated

__all__ = ["create", "GraphModuleDebug"]


def create(*args: Any, **kwargs: Any) -> GraphModuleDebug:
    """Deprecated: use :func:`tvmrt.contrib.debugger.debug_executor.create`."""
    warn_deprecated("debug_runtime.create", instead="debug_executor.create")
    return debug_executor.create(*args, **kwargs)
