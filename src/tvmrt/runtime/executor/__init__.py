"""Executors of ``tvm.runtime.executor``: :class:`AotModule` for ``Executor("aot")`` builds.

Importing this package registers the AOT module loaders (``AotExecutorFactory`` and
``metadata_module`` in a library's module blob).
"""

from __future__ import annotations

from tvmrt.runtime.executor import _aot
from tvmrt.runtime.executor._aot import AotExecutor, AotExecutorFactory
from tvmrt.runtime.executor.aot_executor import AotModule

__all__ = ["AotExecutor", "AotExecutorFactory", "AotModule", "_aot"]
