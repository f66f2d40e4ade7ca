"""The codec against sessions recorded between real TVM processes (rpc/ beside $TVMRT_ARTIFACTS).

Each recorded message is rebuilt from its decoded form, encoded in the session's dialect,
and must have exactly the byte count TVM put on the wire; decoding the encoding must give
the same values back.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from tvmrt.error import RPCProtocolError
from tvmrt.rpc import codec, wire
from tvmrt.rpc.codec import Dialect, Handle, Kind, WireDevice, WireDType, WireTensor

_KINDS = {
    "handle": Kind.OPAQUE,
    "opaque": Kind.OPAQUE,
    "Module": Kind.MODULE,
    "PackedFunc": Kind.FUNC,
    "Function": Kind.FUNC,
}


def _records(artifacts: Path, name: str) -> list[dict[str, Any]]:
    """The recorded messages of ``rpc/NAME`` (beside the artifacts folder)."""
    path = artifacts.parent / "rpc" / name
    if not path.is_file():
        pytest.fail(f"recorded RPC sessions missing: {path}")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if "dir" in r]


def _tensor(d: dict[str, Any]) -> WireTensor:
    return WireTensor(
        int(d["data"], 16),
        WireDevice(*d["dev"]),
        WireDType(*d["dtype"]),
        tuple(d["shape"]),
        d["byte_offset"],
    )


def _value(kind: str, v: Any) -> tuple[codec.Value, bool]:
    """A recorded ``[kind, value]`` as a codec value, and whether it was an ffi object."""
    if kind in ("null", "None"):
        return None, False
    if kind == "int":
        return int(v), False
    if kind == "bool":
        return bool(v), False
    if kind in ("str", "rawstr"):
        return v, False
    if kind in ("bytes", "bytearray*"):
        return b"\0" * int(v.strip("<>").split()[0]), False
    if kind == "Bytes":
        return b"\0" * int(v[1].strip("<>").split()[0]), True
    if kind == "device":
        return WireDevice(*v), False
    if kind == "DLTensor*":
        return _tensor(v), False
    return Handle(_KINDS[kind], int(v, 16)), False


def _packet(rec: dict[str, Any], dialect: Dialect) -> tuple[int, bytes] | None:
    """The packet a recorded message was, as ``(code, payload)``; None if not rebuildable."""
    code = wire.RPCCode[rec["code"]]
    desc = rec["desc"]
    if "..." in json.dumps(desc):  # an abridged string: its length is not recorded
        return None
    pairs = desc.get("args", desc.get("ret", []))
    values = [_value(k, v) for k, v in pairs]
    args = codec.encode_args([v for v, _ in values], dialect, ffi_objects=any(f for _, f in values))
    if code is wire.RPCCode.kInitServer:
        ver = desc["ver"].encode()
        return code, struct.pack("<Q", len(ver)) + ver + args
    if code is wire.RPCCode.kCallFunc:
        return code, struct.pack("<Q", 0) + args
    if code in (wire.RPCCode.kCopyToRemote, wire.RPCCode.kCopyFromRemote):
        t = _tensor(desc.get("to") or desc["from"])
        body = codec.encode_tensor(t) + struct.pack("<Q", desc["nbytes"])
        return code, body + b"\0" * desc.get("payload", 0)
    if code is wire.RPCCode.kCopyAck:
        return code, b"\0" * desc["payload"]
    if code is wire.RPCCode.kShutdown:
        return code, b""
    return code, args


@pytest.mark.parametrize(
    ("name", "dialect"), [("trace16.jsonl", Dialect.LEGACY), ("trace27.jsonl", Dialect.FFI)]
)
def test_every_recorded_packet_has_tvms_size_and_round_trips(
    artifacts: Path, name: str, dialect: Dialect
) -> None:
    checked = 0
    for rec in _records(artifacts, name):
        if rec["code"] == "handshake":
            assert (
                len(wire.handshake_bytes(int(rec["desc"]["magic"], 16), rec["desc"]["key"]))
                == rec["bytes"]
            )
            continue
        built = _packet(rec, dialect)
        if built is None:
            continue
        code, payload = built
        assert len(wire.packet_bytes(code, payload)) == rec["bytes"], rec
        if "args" in rec["desc"] or "ret" in rec["desc"]:
            start = 8 if code is wire.RPCCode.kCallFunc else 0
            if code is wire.RPCCode.kInitServer:
                start = 8 + len(rec["desc"]["ver"])
            decoded = codec.decode_args(payload[start:], dialect)
            expected = [_value(k, v)[0] for k, v in rec["desc"].get("args", rec["desc"].get("ret"))]
            assert decoded == expected, rec
        checked += 1
    assert checked > 40


def test_dialect_is_told_by_the_first_string(artifacts: Path) -> None:
    legacy = _records(artifacts, "trace16.jsonl")
    ffi = _records(artifacts, "trace27.jsonl")
    first16 = next(r for r in legacy if r["code"] == "kGetGlobalFunc")
    first27 = next(r for r in ffi if r["code"] == "kGetGlobalFunc")
    p16 = _packet(first16, Dialect.LEGACY)
    p27 = _packet(first27, Dialect.FFI)
    assert p16 is not None
    assert p27 is not None
    assert codec.guess_dialect(p16[1]) is Dialect.LEGACY
    assert codec.guess_dialect(p27[1]) is Dialect.FFI
    # a str argument may also come as a tvm-ffi String object (65, then 65 again)
    obj = struct.pack("<iiIQ", 1, 65, 65, 1) + b"x"
    assert codec.guess_dialect(obj) is Dialect.FFI
    assert codec.decode_args(obj, Dialect.FFI) == ["x"]


def test_return_type_codes_match_the_recorded_returns() -> None:
    # TVM 0.16 returns a Module as [9, handle], a function as [10, handle], an NDArray as
    # [13, DLTensor, handle]; TVM 0.27 uses 73, 68 and 70
    assert codec.type_code(Dialect.LEGACY, Kind.MODULE) == 9
    assert codec.type_code(Dialect.LEGACY, Kind.FUNC) == 10
    assert codec.type_code(Dialect.LEGACY, Kind.NDARRAY) == 13
    assert codec.type_code(Dialect.FFI, Kind.MODULE) == 73
    assert codec.type_code(Dialect.FFI, Kind.FUNC) == 68
    assert codec.type_code(Dialect.FFI, Kind.NDARRAY) == 70
    assert codec.type_code(Dialect.FFI, Kind.FFI_BYTES) == 66


@pytest.mark.parametrize("dialect", list(Dialect))
def test_malformed_sequences_raise_protocol_errors(dialect: Dialect) -> None:
    good = codec.encode_args(
        ["name", b"abc", 3, 2.5, WireDevice(1, 0), WireDType(2, 32, 1), None], dialect
    )
    assert codec.decode_args(good, dialect)[:3] == ["name", b"abc", 3]
    for cut in range(len(good)):
        with pytest.raises(RPCProtocolError):
            codec.decode_args(good[:cut], dialect)
    with pytest.raises(RPCProtocolError, match="left over"):
        codec.decode_args(good + b"\0", dialect)
    with pytest.raises(RPCProtocolError, match="arguments"):
        codec.decode_args(struct.pack("<i", 1 << 30), dialect)
    with pytest.raises(RPCProtocolError, match="type code 999"):
        codec.decode_args(struct.pack("<ii", 1, 999), dialect)
    # a string that claims more bytes than the packet has
    lying = struct.pack("<ii", 1, codec.type_code(dialect, Kind.STR)) + struct.pack("<Q", 1 << 62)
    with pytest.raises(RPCProtocolError, match="needs"):
        codec.decode_args(lying, dialect)
    tensor = WireTensor(0, WireDevice(1, 0), WireDType(2, 32, 1), (2,) * 65)
    with pytest.raises(RPCProtocolError, match="ndim 65"):
        codec.decode_args(codec.encode_args([tensor], dialect), dialect)


def test_packet_framing_limits(tmp_path: Path) -> None:
    import socket

    a, b = socket.socketpair()
    with a, b:
        a.sendall(struct.pack("<Q", 1 << 40))
        with pytest.raises(RPCProtocolError, match="packet limit"):
            wire.recv_packet(b)
        a.sendall(wire.packet_bytes(wire.RPCCode.kShutdown))
        assert wire.recv_packet(b) == (wire.RPCCode.kShutdown, b"")
        a.sendall(struct.pack("<Q", 100) + b"abc")
        a.shutdown(socket.SHUT_WR)
        with pytest.raises(Exception, match="closed the connection"):
            wire.recv_packet(b)
