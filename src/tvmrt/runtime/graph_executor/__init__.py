"""The graph executor engine: TVM's ``src/runtime/graph_executor/``, in Python.

``graph`` parses the JSON into the objects of ``graph_types``, ``storage`` plans memory,
``memory`` allocates the pools and entry views, ``binding`` looks each node's kernel up,
and ``executor`` binds every node at create into a straight-line run program
(``program``) and serves TVM's packed functions (``set_input``, ``run``, ...). ``packed``
is the global ``tvm.graph_executor.create``, ``factory`` is the module
``lib["default"](dev)`` comes from, and ``debug`` the per-node timing engine. TVM's
Python face over it is :mod:`tvmrt.contrib.graph_executor` (``GraphModule``).
"""

from __future__ import annotations

from tvmrt.runtime.graph_executor.executor import GraphExecutor
from tvmrt.runtime.graph_executor.factory import GraphExecutorFactory
from tvmrt.runtime.graph_executor.graph import Graph, parse_graph
from tvmrt.runtime.graph_executor.packed import create_executor
from tvmrt.runtime.graph_executor.storage import StoragePlan, plan_storage

__all__ = [
    "GraphExecutor",
    "GraphExecutorFactory",
    "Graph",
    "create_executor",
    "parse_graph",
    "StoragePlan",
    "plan_storage",
]
