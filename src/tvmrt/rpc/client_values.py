"""Values between a client and its RPC session: Python objects out, wire values back in.

:func:`to_wire` turns a call's arguments into wire values (arrays and devices only of the
session they are sent to, whole floats as ints as TVM's servers expect); :func:`from_return`
turns a ``kCallFunc`` reply into client objects (remote modules, functions and arrays of
the session), checking each value as bad input.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tvmrt.error import ArgumentTypeError, InvalidArgumentError, RPCProtocolError
from tvmrt.rpc.codec import (
    Dialect,
    Handle,
    Kind,
    Value,
    WireDevice,
    WireDType,
    WireTensor,
    kind_of_code,
)
from tvmrt.rpc.remote import RemoteFunc, RemoteObject, RPCModule
from tvmrt.runtime.device import RPC_SESS_MASK, Device
from tvmrt.runtime.dtype import DataType
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.packed_func import PackedFunc

if TYPE_CHECKING:
    from tvmrt.rpc.client_endpoint import ClientEndpoint

__all__ = ["from_return", "handle_value", "single_handle", "to_wire"]


def to_wire(endpoint: ClientEndpoint, value: object, index: int, func: str) -> Value:
    """``value``, argument ``index`` of ``func``, as a wire value of ``endpoint``'s session."""
    if isinstance(value, bool | np.bool_):
        # TVM <= 0.17 has no bool code: an int, as its own clients send
        return bool(value) if endpoint.dialect is Dialect.FFI else int(value)
    if isinstance(value, float | np.floating) and float(value).is_integer():
        # TVM's servers read an int wherever a float is expected, not the reverse
        # (the debug executor's min_repeat_ms): send whole numbers as ints
        return int(value)
    if value is None or isinstance(value, int | float | bytes):
        return value
    if isinstance(value, np.integer | np.floating):
        return value.item()
    if isinstance(value, str):  # DataType too: servers read strings as dtypes
        return str(value)
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, Device):
        return endpoint._wire_device(value)
    if isinstance(value, NDArray):
        return _wire_array(endpoint, value, index, func)
    if isinstance(value, RPCModule | RemoteFunc | RemoteObject):
        if value._endpoint is not endpoint:
            raise InvalidArgumentError(
                f"{func}: argument {index} ({value!r}) belongs to another RPC session"
            )
        kind = {RPCModule: Kind.MODULE, RemoteFunc: Kind.FUNC}.get(type(value), Kind.OBJECT)
        return Handle(kind, value.handle)
    if isinstance(value, Module | PackedFunc):
        raise ArgumentTypeError(
            f"{func}: argument {index} is a local {type(value).__name__}; a remote function "
            "takes modules and functions of its own session (upload and load_module first)"
        )
    raise ArgumentTypeError(
        f"{func}: argument {index} of type {type(value).__name__} cannot be sent over RPC; "
        "expected int, float, str, bytes, a Device or NDArray of this session, "
        "or a remote module or function"
    )


def _wire_array(endpoint: ClientEndpoint, arr: NDArray, index: int, func: str) -> WireTensor:
    dev = arr.device
    if dev.device_type // RPC_SESS_MASK - 1 != endpoint.table_index:
        raise InvalidArgumentError(
            f"{func}: argument {index} is an array on {dev}; a remote function takes arrays "
            "on its session's devices (copy it there with tvmrt.nd.array(x, remote_dev))"
        )
    dtype = DataType(arr.dtype)
    return WireTensor(
        arr._device_storage().handle,
        endpoint._wire_device(dev),
        WireDType(dtype.type_code, dtype.bits, dtype.lanes),
        tuple(arr.shape),
        arr.byte_offset,
    )


def from_return(endpoint: ClientEndpoint, values: list[Value], name: str) -> Any:
    """A kCallFunc reply ``[type code, value...]`` as a client object."""
    if not values or not isinstance(values[0], int) or isinstance(values[0], bool):
        raise RPCProtocolError(f"the reply of {name} does not start with a type code")
    kind = kind_of_code(endpoint.dialect, values[0])
    rest = values[1:]
    if kind is Kind.NDARRAY:
        if len(rest) != 2 or not isinstance(rest[0], WireTensor):
            raise RPCProtocolError(f"the reply of {name}: an NDArray needs a DLTensor and a handle")
        handle = handle_value(rest[1], name)
        tensor = rest[0]
        dev = endpoint.remote_device(tensor.device.device_type, tensor.device.device_id)
        return endpoint._device_apis[dev.device_type].wrap_returned(tensor, dev, handle)
    if len(rest) != 1:
        raise RPCProtocolError(f"the reply of {name} has {len(rest)} values after its type code")
    value = rest[0]
    if kind is Kind.MODULE:
        return RPCModule(endpoint, handle_value(value, name), f"ret_of({name})")
    if kind is Kind.FUNC:
        return RemoteFunc(endpoint, handle_value(value, name), f"ret_of({name})")
    if kind is Kind.OBJECT:
        return RemoteObject(endpoint, handle_value(value, name))
    if isinstance(value, WireDevice):
        return endpoint.remote_device(value.device_type, value.device_id)
    if isinstance(value, WireDType):
        return DataType.from_code(value.code, value.bits, value.lanes)
    if isinstance(value, Handle):
        return value.value
    return value


def handle_value(value: Value, what: str) -> int:
    if isinstance(value, Handle):
        return value.value
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise RPCProtocolError(f"the reply of {what}: expected a handle, got {value!r}")


def single_handle(values: list[Value], what: str) -> int:
    if len(values) != 1:
        raise RPCProtocolError(f"{what}: expected one value in the reply, got {len(values)}")
    if values[0] is None:
        return 0
    return handle_value(values[0], what)
