"""DLPack exchange: what export and import share (versions, flags, capsules, dtype codes).

Export (:mod:`tvmrt.runtime.dlpack_export`, behind ``NDArray.__dlpack__``)
    numpy's own exporter builds the ``DLManagedTensor(Versioned)`` over a numpy view of
    the NDArray and supplies the capsule destructor and the deleter, both native code.
    tvmrt then rewrites what numpy cannot know: the device, the dtype (bfloat16, float8,
    vector lanes, sub-byte integers, handles) and the flags. The view numpy holds until
    the deleter runs is a private ndarray subclass that references the NDArray, so the
    NDArray and its memory stay alive for as long as the consumer uses them.

    Why not a capsule destructor written with ``ctypes``: a consumer that rejects a
    capsule (numpy refuses bfloat16 and vector dtypes, for example) drops it while its
    own exception is set. A ctypes callback cannot run in that state: the consumer's
    exception is replaced by ``SystemError`` and the deleter never runs. Native
    destructors have no such problem.

Import (:mod:`tvmrt.runtime.dlpack_import`, behind ``from_dlpack``)
    The capsule's tensor is wrapped as a numpy view over the producer's memory (any
    strides, including negative ones, zero-size and 0-d tensors, and ``byte_offset``).
    The view's base is an object that calls the producer's deleter exactly once, when
    the last view of the memory is gone.

dtype encoding
    * ``bool`` is exported as ``(code=6 kDLBool, bits=8)``, which numpy and torch read;
      TVM v0.19's own ``(1, 1)`` is what :class:`DataType` stores. Both import as
      ``"bool"``.
    * ``bfloat16`` is code 4. ``e4m3_float8`` and ``e5m2_float8`` are exported as
      DLPack 1.1's ``kDLFloat8_e4m3fn`` (10) and ``kDLFloat8_e5m2`` (12) and imported
      from those codes; DLPack's other float8/6/4 codes (7-9, 11, 13-17) have no tvmrt
      equivalent and are refused.
    * Sub-byte integers (``int4``...) take one byte per element, as in TVM; versioned
      capsules say so with the ``IS_SUBBYTE_TYPE_PADDED`` flag.
"""

from __future__ import annotations

import ctypes
import datetime
from typing import Any

from tvmrt.runtime.dtype import DataType, DataTypeCode

__all__ = [
    "DLPACK_VERSION",
    "FLAG_READ_ONLY",
    "FLAG_IS_COPIED",
    "FLAG_IS_SUBBYTE_TYPE_PADDED",
    "CAPSULE_TYPE",
    "LEGACY",
    "VERSIONED",
    "USED_LEGACY",
    "USED_VERSIONED",
    "TO_DL_CODE",
    "FROM_DL_CODE",
    "UNSUPPORTED_DL_CODES",
    "capsule_name",
    "capsule_pointer",
    "rename_capsule",
    "dlpack_dtype",
    "is_subbyte",
]

# The highest DLPack version tvmrt understands (1.1: float8 codes, sub-byte padding flag).
DLPACK_VERSION = (1, 1)

# DLManagedTensorVersioned.flags
FLAG_READ_ONLY = 1 << 0
FLAG_IS_COPIED = 1 << 1
FLAG_IS_SUBBYTE_TYPE_PADDED = 1 << 2

# Capsule names. The consumer renames a capsule it took so the producer's destructor
# leaves the tensor alone; PyCapsule_SetName keeps the pointer, so these live forever.
LEGACY = b"dltensor"
VERSIONED = b"dltensor_versioned"
USED_LEGACY = b"used_dltensor"
USED_VERSIONED = b"used_dltensor_versioned"

# DLPack 1.1 codes of the float8 formats tvmrt has, and names of those it has not.
_DL_FLOAT8_E4M3FN = 10
_DL_FLOAT8_E5M2 = 12
TO_DL_CODE: dict[int, int] = {
    DataTypeCode.E4M3_FLOAT8: _DL_FLOAT8_E4M3FN,
    DataTypeCode.E5M2_FLOAT8: _DL_FLOAT8_E5M2,
}
FROM_DL_CODE = {v: k for k, v in TO_DL_CODE.items()}
UNSUPPORTED_DL_CODES = {
    7: "float8_e3m4",
    8: "float8_e4m3",
    9: "float8_e4m3b11fnuz",
    11: "float8_e4m3fnuz",
    13: "float8_e5m2fnuz",
    14: "float8_e8m0fnu",
    15: "float6_e2m3fn",
    16: "float6_e3m2fn",
    17: "float4_e2m1fn",
}

CAPSULE_TYPE: type = type(datetime.datetime_CAPI)
"""The type of a ``PyCapsule``."""


def _pyapi(name: str, restype: Any, *argtypes: Any) -> Any:
    # Private prototypes: configuring ctypes.pythonapi.X itself would be shared state.
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


_capsule_get_name = _pyapi("PyCapsule_GetName", ctypes.c_char_p, ctypes.py_object)
_capsule_get_pointer = _pyapi(
    "PyCapsule_GetPointer", ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p
)
_capsule_set_name = _pyapi("PyCapsule_SetName", ctypes.c_int, ctypes.py_object, ctypes.c_char_p)


def capsule_name(capsule: Any) -> bytes | None:
    """The name of ``capsule`` (``b"dltensor"``, ``b"used_dltensor"``, ...)."""
    name: bytes | None = _capsule_get_name(capsule)
    return name


def capsule_pointer(capsule: Any, name: bytes | None) -> int:
    """The pointer ``capsule`` holds under ``name`` (its managed tensor's address)."""
    return int(_capsule_get_pointer(capsule, name) or 0)


def rename_capsule(capsule: Any, name: bytes) -> bool:
    """Rename ``capsule`` (mark it consumed); False if Python refused."""
    return int(_capsule_set_name(capsule, name)) == 0


def is_subbyte(dtype: DataType) -> bool:
    """Whether ``dtype`` has fewer than 8 bits (bool, one bit in TVM, is stored as a byte)."""
    return dtype.bits < 8 and not (dtype.type_code == DataTypeCode.UINT and dtype.bits == 1)


def dlpack_dtype(dtype: DataType) -> tuple[int, int, int]:
    """DLPack's ``(code, bits, lanes)`` of ``dtype`` (bool as ``kDLBool`` with 8 bits)."""
    code, bits = dtype.type_code, dtype.bits
    if code == DataTypeCode.UINT and bits == 1:
        return int(DataTypeCode.BOOL), 8, dtype.lanes
    return TO_DL_CODE.get(code, code), bits, dtype.lanes
