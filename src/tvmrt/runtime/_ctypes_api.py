"""ctypes mirrors of the C structures compiled kernels and DLPack exchange read, and the
one copy in Python of the C API's type codes.

Layouts are for LP64 platforms (x86-64 and aarch64 Linux: 8-byte pointers and
``int64_t``, natural alignment), as ``dlpack/dlpack.h`` and ``tvm/runtime/c_runtime_api.h``
under ``src/tvmrt/include`` declare them. :class:`ArgTypeCode` is ``TVMArgTypeCode`` of that
header (TVM v0.19's ``tvm._ffi.runtime_ctypes.ArgTypeCode``); :class:`FFITypeIndex` is
tvm-ffi's ``TVMFFITypeIndex`` (TVM >= 0.22). A type code appears in the Python source as a
member of one of them, never as a number (``tests/runtime/test_type_codes.py``).
"""

from __future__ import annotations

import ctypes
import enum

__all__ = [
    "DLDevice",
    "DLDataType",
    "DLTensor",
    "DLManagedTensor",
    "DLPackVersion",
    "DLManagedTensorVersioned",
    "DLTensorDeleter",
    "DLVersionedDeleter",
    "TVMValue",
    "TVMByteArray",
    "TVMFuncCallType",
    "TVM_CALL_ARGTYPES",
    "TVMParallelGroupEnv",
    "TVMFFIAny",
    "ArgTypeCode",
    "FFITypeIndex",
]


class ArgTypeCode(enum.IntEnum):
    """``TVMArgTypeCode``: what a ``TVMValue`` of the legacy packed-function ABI holds."""

    INT = 0  # kTVMArgInt (kDLInt)
    UINT = 1  # kDLUInt
    FLOAT = 2  # kTVMArgFloat (kDLFloat)
    HANDLE = 3  # kTVMOpaqueHandle
    NULL = 4  # kTVMNullptr
    TVM_TYPE = 5  # kTVMDataType
    DLDEVICE = 6  # kDLDevice
    DLTENSOR_HANDLE = 7  # kTVMDLTensorHandle
    OBJECT_HANDLE = 8  # kTVMObjectHandle
    MODULE_HANDLE = 9  # kTVMModuleHandle
    PACKED_FUNC_HANDLE = 10  # kTVMPackedFuncHandle
    STR = 11  # kTVMStr
    BYTES = 12  # kTVMBytes
    NDARRAY_HANDLE = 13  # kTVMNDArrayHandle
    OBJECT_RVALUE_REF_ARG = 14  # kTVMObjectRValueRefArg
    BOOL = 15  # kTVMArgBool
    EXT_BEGIN = 16  # kTVMExtBegin


class FFITypeIndex(enum.IntEnum):
    """tvm-ffi's ``TVMFFITypeIndex`` (TVM >= 0.22; TVM 0.21 numbered the objects from 71:
    ``Shape`` 71, ``NDArray`` 72)."""

    NONE = 0
    INT = 1
    BOOL = 2
    FLOAT = 3
    OPAQUE_PTR = 4
    DATA_TYPE = 5
    DEVICE = 6
    DLTENSOR_PTR = 7
    RAW_STR = 8
    BYTE_ARRAY_PTR = 9
    OBJECT_RVALUE_REF = 10
    SMALL_STR = 11
    SMALL_BYTES = 12
    STATIC_OBJECT_BEGIN = 64
    STR = 65
    BYTES = 66
    ERROR = 67
    FUNCTION = 68
    SHAPE = 69
    TENSOR = 70
    ARRAY = 71
    MAP = 72
    MODULE = 73


class DLDevice(ctypes.Structure):
    """``DLDevice``: device type and id (8 bytes)."""

    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    """``DLDataType``: code, bits, lanes (4 bytes)."""

    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    """``DLTensor`` (48 bytes); compiled kernels read these offsets directly."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


DLTensorDeleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
DLVersionedDeleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    """``DLManagedTensor``: the payload of a ``"dltensor"`` capsule (DLPack < 1.0)."""

    _fields_ = [
        ("dl_tensor", DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", DLTensorDeleter),
    ]


class DLPackVersion(ctypes.Structure):
    """``DLPackVersion``: major and minor."""

    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    """``DLManagedTensorVersioned``: the payload of a ``"dltensor_versioned"`` capsule."""

    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", DLVersionedDeleter),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


class TVMValue(ctypes.Union):
    """Legacy ``TVMValue``: the 8-byte union of the packed-function ABI."""

    _fields_ = [
        ("v_int64", ctypes.c_int64),
        ("v_float64", ctypes.c_double),
        ("v_handle", ctypes.c_void_p),
        ("v_str", ctypes.c_char_p),
        ("v_device", DLDevice),
    ]


class TVMByteArray(ctypes.Structure):
    """``TVMByteArray``: what a ``kTVMBytes`` argument points at (the bytes are not copied)."""

    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_size_t)]


# TVMFuncCall's arguments after the function handle: args, type_codes, num_args, ret_val,
# ret_type_code (also what a C caller hands a Python function through another handle)
TVM_CALL_ARGTYPES = (
    ctypes.POINTER(TVMValue),
    ctypes.POINTER(ctypes.c_int),
    ctypes.c_int,
    ctypes.POINTER(TVMValue),
    ctypes.POINTER(ctypes.c_int),
)
# int TVMFuncCall(handle, ...): the C function's type, and that of a Python callback
# standing in for it
TVMFuncCallType = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *TVM_CALL_ARGTYPES)


class TVMParallelGroupEnv(ctypes.Structure):
    """``TVMParallelGroupEnv``: barrier handle and task count of one parallel launch."""

    _fields_ = [("sync_handle", ctypes.c_void_p), ("num_task", ctypes.c_int32)]


class _FFIAnyValue(ctypes.Union):
    _fields_ = [
        ("v_int64", ctypes.c_int64),
        ("v_float64", ctypes.c_double),
        ("v_ptr", ctypes.c_void_p),
        ("v_dtype", DLDataType),
        ("v_device", DLDevice),
    ]


class TVMFFIAny(ctypes.Structure):
    """tvm-ffi ``TVMFFIAny`` (16 bytes): type index, padding, 8-byte value."""

    _anonymous_ = ("value",)
    _fields_ = [
        ("type_index", ctypes.c_int32),
        ("zero_padding", ctypes.c_uint32),
        ("value", _FFIAnyValue),
    ]
