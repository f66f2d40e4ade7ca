"""TVM's graph debug executor (``tvm.contrib.debugger``): per-node timing, outputs, profiles.

The engine is :mod:`tvmrt.runtime.graph_executor.debug` (``tvm.graph_executor_debug.create``).
"""

from __future__ import annotations

from tvmrt.contrib.debugger import debug_executor, debug_result, debug_runtime
from tvmrt.contrib.debugger.debug_executor import GraphModuleDebug, create
from tvmrt.contrib.debugger.debug_result import DebugResult
from tvmrt.runtime.graph_executor.debug import GraphExecutorDebug

__all__ = [
    "debug_executor",
    "debug_result",
    "debug_runtime",
    "create",
    "GraphModuleDebug",
    "GraphExecutorDebug",
    "DebugResult",
]
