"""Argument sequences of TVM's RPC in both dialects, and the values they carry.

TVM <= 0.20 (``Dialect.LEGACY``) sends ``i32 n, i32 type_codes[n]`` then the values;
TVM >= 0.21 (``Dialect.FFI``, tvm-ffi) sends ``i32 n`` then ``i32 type_index`` + value per
argument. Both announce protocol ``0.8.0``. Values decode to plain Python (``None``,
``bool``, ``int``, ``float``, ``str``, ``bytes``) or to the small records below; a remote
object is a :class:`Handle` whose ``kind`` says what the peer called it.

Decoding reads from a payload already in memory (:func:`tvmrt.rpc.wire.recv_packet`
bounded it) and checks every count and length against what is left, so a malformed
sequence raises :class:`~tvmrt.error.RPCProtocolError`, never reads past the end.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from tvmrt.error import RPCProtocolError
from tvmrt.rpc.wire import DEFAULT_LIMITS, Limits
from tvmrt.runtime._ctypes_api import ArgTypeCode, FFITypeIndex

__all__ = [
    "Dialect",
    "Kind",
    "Handle",
    "WireDevice",
    "WireDType",
    "WireTensor",
    "Reader",
    "Value",
    "encode_args",
    "decode_args",
    "encode_tensor",
    "decode_tensor",
    "type_code",
    "kind_of_code",
    "guess_dialect",
]


class Dialect(enum.Enum):
    """How a peer encodes argument sequences."""

    LEGACY = "type-codes"  # TVM <= 0.20
    FFI = "tvm-ffi"  # TVM >= 0.21


class Kind(enum.Enum):
    """What a value is, independent of the dialect's number for it."""

    NULL = "null"
    INT = "int"
    UINT = "uint"
    FLOAT = "float"
    BOOL = "bool"
    OPAQUE = "opaque"
    DTYPE = "dtype"
    DEVICE = "device"
    TENSOR = "DLTensor"
    STR = "str"
    BYTES = "bytes"
    MODULE = "Module"
    FUNC = "Function"
    NDARRAY = "NDArray"
    OBJECT = "object"  # a remote object (RPCObjectRef)
    FFI_STR = "ffi.String"  # tvm-ffi's String object (a client's str argument)
    FFI_BYTES = "ffi.Bytes"  # tvm-ffi's Bytes object (a client's bytes argument)


# TVM <= 0.20 type codes (include/tvm/runtime/c_runtime_api.h)
_LEGACY: dict[Kind, int] = {
    Kind.INT: ArgTypeCode.INT,
    Kind.UINT: ArgTypeCode.UINT,
    Kind.FLOAT: ArgTypeCode.FLOAT,
    Kind.OPAQUE: ArgTypeCode.HANDLE,
    Kind.NULL: ArgTypeCode.NULL,
    Kind.DTYPE: ArgTypeCode.TVM_TYPE,
    Kind.DEVICE: ArgTypeCode.DLDEVICE,
    Kind.TENSOR: ArgTypeCode.DLTENSOR_HANDLE,
    Kind.OBJECT: ArgTypeCode.OBJECT_HANDLE,
    Kind.MODULE: ArgTypeCode.MODULE_HANDLE,
    Kind.FUNC: ArgTypeCode.PACKED_FUNC_HANDLE,
    Kind.STR: ArgTypeCode.STR,
    Kind.BYTES: ArgTypeCode.BYTES,
    Kind.NDARRAY: ArgTypeCode.NDARRAY_HANDLE,
    Kind.BOOL: ArgTypeCode.BOOL,
}
# TVM >= 0.21 type indices (tvm/ffi/c_api.h); 115 is the runtime's RPCObjectRef
_FFI: dict[Kind, int] = {
    Kind.NULL: FFITypeIndex.NONE,
    Kind.INT: FFITypeIndex.INT,
    Kind.BOOL: FFITypeIndex.BOOL,
    Kind.FLOAT: FFITypeIndex.FLOAT,
    Kind.OPAQUE: FFITypeIndex.OPAQUE_PTR,
    Kind.DTYPE: FFITypeIndex.DATA_TYPE,
    Kind.DEVICE: FFITypeIndex.DEVICE,
    Kind.TENSOR: FFITypeIndex.DLTENSOR_PTR,
    Kind.STR: FFITypeIndex.RAW_STR,
    Kind.BYTES: FFITypeIndex.BYTE_ARRAY_PTR,
    Kind.FFI_STR: FFITypeIndex.STR,
    Kind.FFI_BYTES: FFITypeIndex.BYTES,
    Kind.FUNC: FFITypeIndex.FUNCTION,
    Kind.NDARRAY: FFITypeIndex.TENSOR,
    Kind.MODULE: FFITypeIndex.MODULE,
    Kind.OBJECT: 115,  # RPCObjectRef: a type the runtime registers, not a static index
}
_CODES = {Dialect.LEGACY: _LEGACY, Dialect.FFI: _FFI}
_KINDS = {d: {v: k for k, v in table.items()} for d, table in _CODES.items()}
_LEGACY_RPC_OBJECT_REF = 9  # the object type index TVM <= 0.20 sends after code 8
_FFI_OBJECT_BEGIN = FFITypeIndex.STATIC_OBJECT_BEGIN


def type_code(dialect: Dialect, kind: Kind) -> int:
    """The number ``dialect`` uses for ``kind`` (a return's leading type code, too)."""
    if kind is Kind.FFI_STR and dialect is Dialect.LEGACY:
        kind = Kind.STR
    if kind is Kind.FFI_BYTES and dialect is Dialect.LEGACY:
        kind = Kind.BYTES
    if kind is Kind.UINT and dialect is Dialect.FFI:
        kind = Kind.INT
    return _CODES[dialect][kind]


def kind_of_code(dialect: Dialect, code: int) -> Kind | None:
    """The kind ``dialect`` means by ``code``, or ``None`` for a number it does not use."""
    return _KINDS[dialect].get(code)


@dataclass(frozen=True)
class Handle:
    """A remote object or pointer: its ``kind`` and the 64-bit value the peer issued."""

    kind: Kind
    value: int


@dataclass(frozen=True)
class WireDevice:
    """A ``DLDevice`` on the wire."""

    device_type: int
    device_id: int


@dataclass(frozen=True)
class WireDType:
    """A ``DLDataType`` on the wire."""

    code: int
    bits: int
    lanes: int


@dataclass(frozen=True)
class WireTensor:
    """A ``DLTensor`` on the wire: remote data pointer, device, dtype, shape, byte offset."""

    data: int
    device: WireDevice
    dtype: WireDType
    shape: tuple[int, ...]
    byte_offset: int = 0


Value = None | bool | int | float | str | bytes | Handle | WireDevice | WireDType | WireTensor


class Reader:
    """A bounds-checked cursor over one payload."""

    def __init__(self, data: bytes, what: str = "packet") -> None:
        self.data = data
        self.pos = 0
        self.what = what

    @property
    def left(self) -> int:
        return len(self.data) - self.pos

    def take(self, n: int) -> bytes:
        if n < 0 or n > self.left:
            raise RPCProtocolError(
                f"{self.what}: needs {n} more bytes at offset {self.pos}, has {self.left}"
            )
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str) -> tuple[int, ...]:
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self.take(size))

    def i32(self) -> int:
        return self.unpack("<i")[0]

    def u64(self) -> int:
        return self.unpack("<Q")[0]

    def blob(self) -> bytes:
        return self.take(self.u64())

    def end(self) -> None:
        if self.left:
            raise RPCProtocolError(f"{self.what}: {self.left} bytes left over after the last field")


def encode_tensor(t: WireTensor) -> bytes:
    """``u64 data, i32 dev_type, i32 dev_id, i32 ndim, u8 code, u8 bits, u16 lanes,
    i64 shape[ndim], u64 byte_offset`` (strides are never sent)."""
    head = struct.pack(
        "<QiiiBBH",
        t.data,
        t.device.device_type,
        t.device.device_id,
        len(t.shape),
        t.dtype.code,
        t.dtype.bits,
        t.dtype.lanes,
    )
    return head + struct.pack(f"<{len(t.shape)}q", *t.shape) + struct.pack("<Q", t.byte_offset)


def decode_tensor(r: Reader, limits: Limits = DEFAULT_LIMITS) -> WireTensor:
    """Read one DLTensor, refusing a rank above ``limits.max_ndim`` or a negative dim."""
    data, dev_type, dev_id, ndim, code, bits, lanes = r.unpack("<QiiiBBH")
    if not 0 <= ndim <= limits.max_ndim:
        raise RPCProtocolError(f"{r.what}: DLTensor ndim {ndim} is not in [0, {limits.max_ndim}]")
    shape = r.unpack(f"<{ndim}q")
    if any(d < 0 for d in shape):
        raise RPCProtocolError(f"{r.what}: DLTensor shape {shape} has a negative dimension")
    (offset,) = r.unpack("<Q")
    return WireTensor(
        data, WireDevice(dev_type, dev_id), WireDType(code, bits, lanes), shape, offset
    )


def _kind_of(value: Value, ffi_objects: bool) -> Kind:
    if value is None:
        return Kind.NULL
    if isinstance(value, bool):
        return Kind.BOOL
    if isinstance(value, int):
        return Kind.INT
    if isinstance(value, float):
        return Kind.FLOAT
    if isinstance(value, str):
        return Kind.STR
    if isinstance(value, bytes | bytearray):
        return Kind.FFI_BYTES if ffi_objects else Kind.BYTES
    if isinstance(value, Handle):
        return value.kind
    if isinstance(value, WireDevice):
        return Kind.DEVICE
    if isinstance(value, WireDType):
        return Kind.DTYPE
    if isinstance(value, WireTensor):
        return Kind.TENSOR
    raise RPCProtocolError(f"cannot send a {type(value).__name__} over RPC")


def _encode_value(dialect: Dialect, kind: Kind, value: Value) -> bytes:
    if kind is Kind.NULL:
        return b""
    if kind in (Kind.INT, Kind.UINT, Kind.BOOL):
        assert isinstance(value, int)
        return struct.pack("<Q" if value >= 1 << 63 else "<q", value)
    if kind is Kind.FLOAT:
        assert isinstance(value, int | float)
        return struct.pack("<d", float(value))
    if kind is Kind.DTYPE:
        assert isinstance(value, WireDType)
        return struct.pack("<BBHi", value.code, value.bits, value.lanes, 0)
    if kind is Kind.DEVICE:
        assert isinstance(value, WireDevice)
        return struct.pack("<ii", value.device_type, value.device_id)
    if kind is Kind.TENSOR:
        assert isinstance(value, WireTensor)
        return encode_tensor(value)
    if kind in (Kind.STR, Kind.BYTES, Kind.FFI_STR, Kind.FFI_BYTES):
        raw = value.encode() if isinstance(value, str) else bytes(value)  # type: ignore[arg-type]
        body = struct.pack("<Q", len(raw)) + raw
        if dialect is Dialect.FFI and kind in (Kind.FFI_STR, Kind.FFI_BYTES):
            return struct.pack("<I", type_code(dialect, kind)) + body
        return body
    if kind is Kind.NDARRAY:
        raise RPCProtocolError("an NDArray cannot be an RPC argument: send its DLTensor")
    assert isinstance(value, Handle)
    if kind is Kind.OBJECT:
        index = _LEGACY_RPC_OBJECT_REF if dialect is Dialect.LEGACY else _FFI[Kind.OBJECT]
        return struct.pack("<IQ", index, value.value)
    return struct.pack("<Q", value.value)  # opaque, module, function


def encode_args(values: Sequence[Value], dialect: Dialect, *, ffi_objects: bool = False) -> bytes:
    """An argument sequence in ``dialect``.

    ``ffi_objects`` sends ``bytes`` as tvm-ffi Bytes objects (66, what a TVM >= 0.21
    client sends) instead of byte arrays (9, what its server returns); strings are always
    raw strings (8). It does not matter in the legacy dialect.
    """
    kinds = [_kind_of(v, ffi_objects) for v in values]
    codes = [type_code(dialect, k) for k in kinds]
    out = [struct.pack("<i", len(values))]
    if dialect is Dialect.LEGACY:
        out.append(struct.pack(f"<{len(codes)}i", *codes))
        out.extend(_encode_value(dialect, k, v) for k, v in zip(kinds, values, strict=True))
    else:
        for k, c, v in zip(kinds, codes, values, strict=True):
            out.append(struct.pack("<i", c))
            out.append(_encode_value(dialect, k, v))
    return b"".join(out)


def _decode_value(r: Reader, dialect: Dialect, code: int, limits: Limits) -> Value:
    kind = kind_of_code(dialect, code)
    if kind is None or kind is Kind.NDARRAY:
        raise RPCProtocolError(
            f"{r.what}: unknown or unsupported type code {code} ({dialect.value})"
        )
    if kind is Kind.NULL:
        return None
    if kind in (Kind.INT, Kind.UINT):
        return r.unpack("<q")[0]
    if kind is Kind.BOOL:
        return bool(r.unpack("<q")[0])
    if kind is Kind.FLOAT:
        return struct.unpack("<d", r.take(8))[0]  # type: ignore[no-any-return]
    if kind is Kind.DTYPE:
        c, bits, lanes, _pad = r.unpack("<BBHi")
        return WireDType(c, bits, lanes)
    if kind is Kind.DEVICE:
        return WireDevice(*r.unpack("<ii"))
    if kind is Kind.TENSOR:
        return decode_tensor(r, limits)
    if kind in (Kind.FFI_STR, Kind.FFI_BYTES, Kind.OBJECT):
        inner = r.unpack("<I")[0]
        if kind is Kind.OBJECT and dialect is Dialect.LEGACY:
            if inner != _LEGACY_RPC_OBJECT_REF:
                raise RPCProtocolError(
                    f"{r.what}: object type index {inner} is not RPCObjectRef (9)"
                )
            return Handle(Kind.OBJECT, r.u64())
        if inner != code:
            raise RPCProtocolError(f"{r.what}: object type index {inner} after type index {code}")
        if kind is Kind.OBJECT:
            return Handle(Kind.OBJECT, r.u64())
        kind = Kind.STR if kind is Kind.FFI_STR else Kind.BYTES
    if kind is Kind.STR:
        raw = r.blob()
        try:
            return raw.decode()
        except UnicodeDecodeError as exc:
            raise RPCProtocolError(f"{r.what}: a string argument is not UTF-8") from exc
    if kind is Kind.BYTES:
        return r.blob()
    return Handle(kind, r.u64())  # opaque, module, function


def decode_args(
    data: bytes | Reader, dialect: Dialect, limits: Limits = DEFAULT_LIMITS, *, whole: bool = True
) -> list[Value]:
    """Decode one argument sequence; ``whole`` also checks nothing follows it.

    Raises
    ------
    RPCProtocolError
        On a count above ``limits.max_args``, an unknown type code, or a truncated value.
    """
    r = data if isinstance(data, Reader) else Reader(data, "argument sequence")
    n = r.i32()
    if not 0 <= n <= limits.max_args:
        raise RPCProtocolError(f"{r.what}: {n} arguments, expected 0 to {limits.max_args}")
    if dialect is Dialect.LEGACY:
        codes = r.unpack(f"<{n}i")
        values = [_decode_value(r, dialect, c, limits) for c in codes]
    else:
        values = [_decode_value(r, dialect, r.i32(), limits) for _ in range(n)]
    if whole:
        r.end()
    return values


def guess_dialect(data: bytes, limits: Limits = DEFAULT_LIMITS) -> Dialect:
    """The dialect of a client's first non-empty argument sequence (its whole payload).

    A string, what every session's first ``kGetGlobalFunc`` carries, is code 11 in the
    legacy dialect and 8 or 65 in tvm-ffi; otherwise the one dialect that decodes the
    payload exactly wins.

    Raises
    ------
    RPCProtocolError
        If neither dialect decodes it.
    """
    r = Reader(data)
    if r.left >= 8:
        n, first = r.unpack("<ii")
        if n >= 1 and first in (11, 12):
            return Dialect.LEGACY
        if n >= 1 and first in (65, 66):
            return Dialect.FFI
    fits = []
    for dialect in (Dialect.FFI, Dialect.LEGACY):
        try:
            decode_args(data, dialect, limits)
        except RPCProtocolError:
            continue
        fits.append(dialect)
    if not fits:
        raise RPCProtocolError("first argument sequence decodes in neither TVM RPC dialect")
    return fits[0]
