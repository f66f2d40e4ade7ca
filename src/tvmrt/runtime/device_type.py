"""Device types: DLPack's codes (``DLDeviceType``) and TVM's names for them.

``MASK2STR`` names a type code (``1 -> "cpu"``); ``STR2MASK`` reads a target or device
name (``"llvm"``, ``"cuda"``, ``"cl"``) as a type code. Codes at and above
``RPC_SESS_MASK`` are devices of an RPC session (which tvmrt has not).
"""

from __future__ import annotations

import enum
from typing import ClassVar

__all__ = ["DLDeviceType", "DeviceTypeNames", "MASK2STR", "STR2MASK", "RPC_SESS_MASK"]

# Device types at and above this value are RPC sessions (TVM's kRPCSessMask).
RPC_SESS_MASK = 128


class DLDeviceType(enum.IntEnum):
    """DLPack device types (``DLDeviceType``), keeping DLPack's ``kDL*`` names."""

    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLOpenCL = 4
    kDLVulkan = 7
    kDLMetal = 8
    kDLVPI = 9
    kDLROCM = 10
    kDLROCMHost = 11
    kDLExtDev = 12
    kDLCUDAManaged = 13
    kDLOneAPI = 14
    kDLWebGPU = 15
    kDLHexagon = 16


MASK2STR: dict[int, str] = {
    1: "cpu",
    2: "cuda",
    3: "cuda_host",
    4: "opencl",
    5: "aocl",
    6: "sdaccel",
    7: "vulkan",
    8: "metal",
    9: "vpi",
    10: "rocm",
    11: "rocm_host",
    12: "ext_dev",
    13: "cuda_managed",
    14: "oneapi",
    15: "webgpu",
    16: "hexagon",
}

STR2MASK: dict[str, int] = {
    "llvm": 1,
    "stackvm": 1,
    "cpu": 1,
    "c": 1,
    "test": 1,
    "hybrid": 1,
    "composite": 1,
    "cuda": 2,
    "nvptx": 2,
    "cl": 4,
    "opencl": 4,
    "sdaccel": 4,
    "aocl": 5,
    "aocl_sw_emu": 5,
    "vulkan": 7,
    "metal": 8,
    "vpi": 9,
    "rocm": 10,
    "ext_dev": 12,
    "hexagon": 16,
    "webgpu": 15,
}


class DeviceTypeNames:
    """The constants TVM v0.19's ``Device`` class carries (``Device.kDLCPU``, ``MASK2STR``).

    Values as in TVM v0.19's ``python/tvm/_ffi/runtime_ctypes.py``, including TVM's own
    extension types at 32-35 there.
    """

    __slots__ = ()

    kDLCPU: ClassVar[int] = 1
    kDLCUDA: ClassVar[int] = 2
    kDLCUDAHost: ClassVar[int] = 3
    kDLOpenCL: ClassVar[int] = 4
    kDLVulkan: ClassVar[int] = 7
    kDLMetal: ClassVar[int] = 8
    kDLVPI: ClassVar[int] = 9
    kDLROCM: ClassVar[int] = 10
    kDLROCMHost: ClassVar[int] = 11
    kDLExtDev: ClassVar[int] = 12
    kDLCUDAManaged: ClassVar[int] = 13
    kDLOneAPI: ClassVar[int] = 14
    kDLWebGPU: ClassVar[int] = 15
    kDLHexagon: ClassVar[int] = 16
    kDLAOCL: ClassVar[int] = 32
    kDLSDAccel: ClassVar[int] = 33
    kOpenGL: ClassVar[int] = 34
    kDLMicroDev: ClassVar[int] = 35
    MASK2STR: ClassVar[dict[int, str]] = MASK2STR
    STR2MASK: ClassVar[dict[str, int]] = STR2MASK
