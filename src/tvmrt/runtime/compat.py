"""Pieces of ``tvm.runtime`` that ported code calls: ``enabled``, ``numpyasarray``."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from tvmrt.error import ArgumentTypeError, ArrayError, InvalidArgumentError
from tvmrt.runtime._ctypes_api import DLDataType, DLDevice, DLTensor
from tvmrt.runtime.device import Device, DLDeviceType
from tvmrt.runtime.dtype import DataType

__all__ = ["enabled", "numpyasarray"]

# TVM's RuntimeEnabled names, by the device type whose backend they ask about
_RUNTIME_NAMES: dict[str, int | None] = {
    "cpu": int(DLDeviceType.kDLCPU),
    "llvm": int(DLDeviceType.kDLCPU),
    "cuda": int(DLDeviceType.kDLCUDA),
    "gpu": int(DLDeviceType.kDLCUDA),
    "nvptx": int(DLDeviceType.kDLCUDA),
    "cl": int(DLDeviceType.kDLOpenCL),
    "opencl": int(DLDeviceType.kDLOpenCL),
    "sdaccel": int(DLDeviceType.kDLOpenCL),
    "mtl": int(DLDeviceType.kDLMetal),
    "metal": int(DLDeviceType.kDLMetal),
    "vulkan": int(DLDeviceType.kDLVulkan),
    "rocm": int(DLDeviceType.kDLROCM),
    "hexagon": int(DLDeviceType.kDLHexagon),
    "tflite": None,
    "stackvm": None,
    "rpc": None,
}


def enabled(target: str) -> bool:
    """Whether tvmrt can run code for ``target`` here (``tvm.runtime.enabled``).

    ``"cpu"`` and ``"llvm ..."`` are always true (host kernels); a device target
    (``"cuda"``, ``"gpu"``, ``"opencl"``, ``"vulkan"``, ``"metal"``, ``"rocm"``,
    ``"nvptx..."``, ``"hexagon"``) is true when tvmrt has a backend for it and device 0
    exists. ``"tflite"``, ``"stackvm"`` and ``"rpc"`` are runtimes tvmrt does not have.
    TVM answered whether its library was *built* with the runtime; tvmrt answers whether
    it can run it on this machine.

    >>> enabled("cpu"), enabled("llvm -mcpu=skylake"), enabled("stackvm")
    (True, True, False)

    Raises
    ------
    InvalidArgumentError
        For a name TVM does not know either (``Unknown optional runtime``).
    """
    if not isinstance(target, str):
        raise ArgumentTypeError(f"enabled() takes a target name, got {type(target).__name__}")
    name = target.strip()
    key = name.split(maxsplit=1)[0] if name else name
    for prefix in ("nvptx", "rocm", "llvm"):
        if key.startswith(prefix):
            key = prefix
    if key not in _RUNTIME_NAMES:
        raise InvalidArgumentError(
            f"Unknown optional runtime {target!r}; expected one of {', '.join(_RUNTIME_NAMES)}"
        )
    device_type = _RUNTIME_NAMES[key]
    if device_type is None:
        return False
    return Device(device_type, 0).exist


def numpyasarray(np_data: np.ndarray[Any, Any]) -> tuple[DLTensor, Any]:
    """A ``DLTensor`` describing a C-contiguous numpy array, and its shape array.

    As TVM's ``nd.numpyasarray``: the tensor borrows ``np_data``'s memory (keep the
    array and the returned shape alive while the tensor is used) and is on ``cpu(0)``.

    Raises
    ------
    ArrayError
        If the array is not C-contiguous.
    """
    if not isinstance(np_data, np.ndarray):
        raise ArgumentTypeError(f"numpyasarray takes a numpy array, got {type(np_data).__name__}")
    if not np_data.flags["C_CONTIGUOUS"]:
        raise ArrayError("numpyasarray needs a C-contiguous array; use np.ascontiguousarray")
    dtype = DataType(np_data.dtype)
    shape = (ctypes.c_int64 * max(np_data.ndim, 1))(*np_data.shape)
    tensor = DLTensor(
        data=np_data.ctypes.data,
        device=DLDevice(int(DLDeviceType.kDLCPU), 0),
        ndim=np_data.ndim,
        dtype=DLDataType(dtype.type_code, dtype.bits, dtype.lanes),
        shape=ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)),
        strides=None,
        byte_offset=0,
    )
    return tensor, shape
