"""Helpers for testing code that uses tvmrt: numpy kernels, graph builders, an emulated device.

These are public (like ``tvm.testing``): downstream projects can build graphs by hand
and run them over numpy kernels without any compiled library.
"""

from __future__ import annotations

from tvmrt.testing import graphs
from tvmrt.testing.devices import EmulatedDeviceAPI, emulated_device
from tvmrt.testing.graphs import GraphBuilder
from tvmrt.testing.ops import FrontendTestModule, numpy_op_library

__all__ = [
    "graphs",
    "GraphBuilder",
    "numpy_op_library",
    "FrontendTestModule",
    "EmulatedDeviceAPI",
    "emulated_device",
]
