"""TVM's ``tvm.contrib`` executors: the graph executor and the debug executor."""

from __future__ import annotations
