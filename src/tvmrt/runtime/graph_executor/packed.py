"""TVM's packed entry point ``tvm.graph_executor.create`` and its argument convention.

The executor's own packed functions (``set_input``, ``run``, ...) are its
``GraphExecutor::GetFunction`` table, in :mod:`tvmrt.runtime.graph_executor.executor`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tvmrt.error import ArgumentTypeError
from tvmrt.runtime.device import Device
from tvmrt.runtime.graph_executor.executor import GraphExecutor
from tvmrt.runtime.graph_executor.graph import parse_graph
from tvmrt.runtime.module import Module

__all__ = ["devices_from_packed_args", "create_executor"]


def devices_from_packed_args(
    what: str, graph_json: object, lib: object, args: Sequence[object]
) -> list[Device]:
    """Check the arguments of TVM's packed ``create`` functions and return the devices.

    ``args`` are Device objects and/or ``device_type, device_id`` integer pairs,
    optionally after a linked-param lookup function (accepted and ignored: tvmrt
    links no params).
    """
    if not isinstance(graph_json, str):
        raise ArgumentTypeError(
            f"{what}: graph_json must be a str, got {type(graph_json).__name__}"
        )
    if not isinstance(lib, Module):
        raise ArgumentTypeError(f"{what}: lib must be a Module, got {type(lib).__name__}")
    rest = list(args)
    if rest and callable(rest[0]) and not isinstance(rest[0], Device):
        rest.pop(0)  # TVM's lookup_linked_param function
    devices: list[Device] = []
    i = 0
    while i < len(rest):
        arg = rest[i]
        if isinstance(arg, Device):
            devices.append(arg)
            i += 1
            continue
        dev_id = rest[i + 1] if i + 1 < len(rest) else None
        if not _is_int(arg) or not _is_int(dev_id):
            raise ArgumentTypeError(
                f"{what}: expected Devices or device type and id pairs, got {rest[i : i + 2]!r}"
            )
        devices.append(Device(int(arg), int(dev_id)))  # type: ignore[call-overload]
        i += 2
    if not devices:
        raise ArgumentTypeError(
            f"{what} needs at least one device (a Device or a device type and id), "
            f"got {len(args) + 2} arguments in all"
        )
    return devices


def _is_int(value: object) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def create_executor(graph_json: str, lib: Module, *args: object) -> GraphExecutor:
    """The global function ``tvm.graph_executor.create`` (TVM's C++ entry point)."""
    devices = devices_from_packed_args("tvm.graph_executor.create", graph_json, lib, args)
    return GraphExecutor(parse_graph(graph_json), lib, devices)
