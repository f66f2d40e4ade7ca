"""The executor's packed-function table (TVM's ``GraphExecutor::GetFunction``) and ``create``.

Departures from TVM, on purpose: ``set_input`` with a name the graph lacks raises
instead of being ignored (a misspelled name would otherwise run on stale data), and
``get_output``/``get_input`` with ``out`` refuse an array of another shape or dtype
instead of reinterpreting its bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tvmrt.error import ArgumentTypeError, InputNotFoundError
from tvmrt.runtime.device import Device
from tvmrt.runtime.graph_executor.checks import copy_out
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray

if TYPE_CHECKING:
    from tvmrt.runtime.graph_executor.executor import GraphExecutor

__all__ = ["packed_functions", "devices_from_packed_args"]


def packed_functions(ex: GraphExecutor) -> dict[str, Callable[..., Any]]:
    """Name -> callable for every packed function of executor ``ex``."""

    def get_input(key: int | str, out: NDArray | None = None) -> NDArray | None:
        if isinstance(key, str) and not ex.has_input(key):
            return None  # as TVM: GraphModule turns this into InputNotFoundError
        arr = ex.get_input(key)
        if out is None:
            return arr
        copy_out(arr, out, f"get_input({key!r})")
        return None

    def get_output(key: int | str, out: NDArray | None = None) -> NDArray | None:
        arr = ex.get_output(key)
        if out is None:
            return arr
        copy_out(arr, out, f"get_output({key!r})")
        return None

    def get_input_index(name: object) -> int:
        if not isinstance(name, str):
            raise ArgumentTypeError(f"input key must be a str, got {type(name).__name__}")
        return ex.input_index(name) if ex.has_input(name) else -1

    def get_output_index(name: object) -> int:
        if not isinstance(name, str):
            raise ArgumentTypeError(f"output key must be a str, got {type(name).__name__}")
        try:
            return ex.output_index(name)
        except InputNotFoundError:
            return -1

    def input_info() -> dict[str, dict[str, Any]]:
        shapes, dtypes = ex.input_info()
        return {"shape": shapes, "dtype": dtypes}

    def output_info() -> dict[str, dict[str, Any]]:
        shapes, dtypes = ex.output_info()
        return {"shape": shapes, "dtype": dtypes}

    def run_from_inputs(dev_type: int, dev_id: int, *kv: object) -> list[NDArray]:
        return ex.run_from_inputs(Device(dev_type, dev_id), *kv)

    def share_params(other: Module, params: bytes | bytearray | memoryview) -> None:
        if other.type_key != "GraphExecutor":
            raise ArgumentTypeError(f"share_params needs a GraphExecutor, got {other.type_key!r}")
        ex.share_params(other, params)  # type: ignore[arg-type]

    return {
        "set_input": ex.set_input,
        "set_input_zero_copy": ex.set_input_zero_copy,
        "set_output_zero_copy": ex.set_output_zero_copy,
        "get_output": get_output,
        "get_input": get_input,
        "get_num_outputs": lambda: len(ex.graph.heads),
        "get_num_inputs": lambda: len(ex.graph.arg_nodes),
        "run": ex.run,
        "run_from_inputs": run_from_inputs,
        "load_params": ex.load_params,
        "load_params_from_file": ex.load_params_from_file,
        "share_params": share_params,
        "get_input_index": get_input_index,
        "get_output_index": get_output_index,
        "get_input_info": input_info,
        "get_output_info": output_info,
    }


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
