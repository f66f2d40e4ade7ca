"""The reply packets a server sends most, encoded once or packed in one step.

An empty call's reply is ``kReturn [type code, value]``; encoding it through the generic
codec cost more than the rest of the server's work on the packet. These are byte-equal
to what :func:`tvmrt.rpc.codec.encode_args` produces (tests/rpc/test_packet_reader.py).
"""

from __future__ import annotations

import struct

from tvmrt.rpc import codec, wire
from tvmrt.rpc.codec import Dialect, Kind

__all__ = ["I64_MIN", "I64_MAX", "VOID", "NONE_RETURN", "int_return"]

_RETURN = wire.RPCCode.kReturn
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1

# a syscall's void answer ([None]) and a call's None result ([NULL code, None])
VOID = {d: wire.packet_bytes(_RETURN, codec.encode_args([None], d)) for d in Dialect}
NONE_RETURN = {
    d: wire.packet_bytes(_RETURN, codec.encode_args([codec.type_code(d, Kind.NULL), None], d))
    for d in Dialect
}
# u64 nbytes, i32 kReturn, i32 n=2, then [i32 code INT, i32 code INT, i64, i64] (legacy)
# or [i32 INT, i64, i32 INT, i64] (tvm-ffi): 32 bytes after the size either way
_INT_LEGACY = struct.Struct("<Qiiiiqq")
_INT_FFI = struct.Struct("<Qiiiqiq")
_INT_CODE = {d: codec.type_code(d, Kind.INT) for d in Dialect}


def int_return(dialect: Dialect, value: int) -> bytes:
    """``kReturn [INT code, value]`` for a ``value`` in [I64_MIN, I64_MAX]."""
    c = _INT_CODE[dialect]
    if dialect is Dialect.LEGACY:
        return _INT_LEGACY.pack(32, _RETURN, 2, c, c, c, value)
    return _INT_FFI.pack(32, _RETURN, 2, c, c, c, value)
