"""Relax VM executable payloads (the bytes of TVM's ``Executable::SaveToBinary`` /
``VMExecutable::SaveToBytes``, every era) read, written and assembled in Python, for the
hostile-input tests of the C runtime's Relax VM (docs/relax.md has the format):

- :func:`read_payload` parses a payload (the era decides the constant tags), keeping each
  constant's value as raw bytes, so that ``read_payload(b).to_bytes() == b``; it also
  records every field boundary (:attr:`Payload.boundaries`), where the truncation tests cut;
- :class:`Program` assembles one from functions and instructions (``call``, ``ret``,
  ``goto``, ``if_``; arguments ``reg``, ``imm``, ``const``, ``func``);
- :func:`find_payload` locates the payload in a fixture's ``model.so`` (after the key
  ``relax.Executable`` / ``relax.VMExecutable`` of its module blob, as u64 length + bytes),
  and :func:`splice` puts another payload of at most that size in its place, adjusting the
  blob's size and the payload's length fields, so that ``TVMModLoadFromFile`` reads it
  through the real loader.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

from tvmrt.binfmt.binary import ElfFile

MAGIC_V1 = 0xD225DE2F4214151D
MAGIC_V2 = 0xD225DE2F4214151E  # TVM >= 0.23: a memory-scope section follows the functions
TENSOR_MAGIC = 0xDD5E40F096B4A13F
VOID_REG = 1 << 54
VM_REG = VOID_REG + 1  # the VM context builtins take first
OP_CALL, OP_RET, OP_GOTO, OP_IF = 1, 2, 3, 4
KIND_PACKED, KIND_VM, KIND_VM_TIR = 0, 1, 2
_MASK56 = (1 << 56) - 1

# era (the C runtime's RX_ERA_*): 0 TVM <= 0.20, 1 TVM 0.21, 2 TVM >= 0.22
LEGACY, ERA_021, FFI = 0, 1, 2
ERA_OF_FOLDER = {"relax016": LEGACY, "relax019": LEGACY, "relax021": ERA_021}
ERA_OF_FOLDER.update({"relax025": FFI, "relax027": FFI})
# constant tags by era: what each value is
TAGS = {
    LEGACY: {"tensor": 0, "dtype": 1, "shape": 2, "str": 3, "int": 4, "float": 5},
    ERA_021: {"int": 1, "float": 3, "dtype": 5, "str": 65, "shape": 71, "tensor": 72},
    FFI: {"int": 1, "float": 3, "dtype": 5, "str": 65, "shape": 69, "tensor": 70},
}
BLOB_SYMBOLS = ("__tvm_dev_mblob", "__tvm_ffi_library_bin", "__tvm_ffi__library_bin")


def reg(i: int) -> int:
    """An argument word naming register ``i``."""
    return i & _MASK56


def imm(v: int) -> int:
    """An immediate argument (56-bit signed)."""
    return 1 << 56 | (v & _MASK56)


def const(i: int) -> int:
    """Constant-pool index ``i``."""
    return 2 << 56 | (i & _MASK56)


def func(i: int) -> int:
    """Function-table index ``i``."""
    return 3 << 56 | (i & _MASK56)


def call(dst: int, callee: int, *args: int, nargs: int | None = None) -> list[int]:
    """``Call``: ``[1, dst, func_idx, nargs, args...]`` (``nargs`` may lie)."""
    return [OP_CALL, dst, callee, len(args) if nargs is None else nargs, *args]


def ret(r: int) -> list[int]:
    return [OP_RET, r]


def goto(offset: int) -> list[int]:
    return [OP_GOTO, offset]


def if_(cond: int, false_offset: int) -> list[int]:
    return [OP_IF, cond, false_offset]


@dataclass
class Function:
    kind: int
    name: str
    start: int = 0
    end: int = 0
    num_args: int = 0
    num_regs: int = 0
    params: list[str] = field(default_factory=list)


@dataclass
class Constant:
    tag: int
    raw: bytes  # the value's bytes as written after the tag


@dataclass
class Payload:
    era: int
    magic: int
    version: str
    functions: list[Function]
    scopes: list[tuple[int, str]]
    constants: list[Constant]
    offsets: list[int]
    words: list[int]
    boundaries: list[int] = field(default_factory=list)  # byte offsets where a field ends
    fields: dict[str, int] = field(default_factory=dict)  # count fields' byte offsets

    def to_bytes(self) -> bytes:
        out = bytearray(struct.pack("<Q", self.magic))
        out += _str(self.version)
        out += struct.pack("<Q", len(self.functions))
        for f in self.functions:
            out += struct.pack("<i", f.kind) + _str(f.name)
            out += struct.pack("<qqqq", f.start, f.end, f.num_args, f.num_regs)
            out += struct.pack("<Q", len(f.params)) + b"".join(_str(p) for p in f.params)
        if self.magic == MAGIC_V2:
            out += struct.pack("<Q", len(self.scopes))
            out += b"".join(struct.pack("<q", i) + _str(s) for i, s in self.scopes)
        out += struct.pack("<Q", len(self.constants))
        out += b"".join(struct.pack("<i", c.tag) + c.raw for c in self.constants)
        out += struct.pack("<Q", len(self.offsets)) + struct.pack(
            f"<{len(self.offsets)}q", *self.offsets
        )
        out += struct.pack("<Q", len(self.words)) + struct.pack(f"<{len(self.words)}q", *self.words)
        return bytes(out)

    def instruction(self, pc: int) -> list[int]:
        end = self.offsets[pc + 1] if pc + 1 < len(self.offsets) else len(self.words)
        return self.words[self.offsets[pc] : end]

    def function(self, name: str) -> Function:
        return next(f for f in self.functions if f.name == name)

    def index(self, name: str) -> int:
        return next(i for i, f in enumerate(self.functions) if f.name == name)

    def set_word(self, pc: int, k: int, value: int) -> None:
        """Word ``k`` of instruction ``pc`` (0 is the opcode)."""
        self.words[self.offsets[pc] + k] = value


def _str(s: str | bytes) -> bytes:
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.off, self.marks = data, 0, []
        self.fields: dict[str, int] = {}

    def count(self, name: str) -> int:
        self.fields.setdefault(name, self.off)
        return self.u64()

    def take(self, n: int) -> bytes:
        if self.off + n > len(self.data):
            raise ValueError(f"payload ends at {len(self.data)}, needed {self.off + n}")
        b = self.data[self.off : self.off + n]
        self.off += n
        self.marks.append(self.off)
        return b

    def u64(self) -> int:
        return int(struct.unpack("<Q", self.take(8))[0])

    def i64(self) -> int:
        return int(struct.unpack("<q", self.take(8))[0])

    def i32(self) -> int:
        return int(struct.unpack("<i", self.take(4))[0])

    def str(self) -> str:
        return self.take(self.u64()).decode("utf-8", "replace")


def _read_value(r: _Reader, kind: str) -> None:
    if kind == "tensor":
        if r.u64() != TENSOR_MAGIC:
            raise ValueError("not a tensor record")
        r.u64()  # reserved
        r.take(8)  # device
        ndim = r.i32()
        r.take(4)  # dtype
        for _ in range(ndim):
            r.i64()
        r.take(r.u64())
    elif kind == "dtype":
        r.take(4)
    elif kind == "shape":
        for _ in range(r.u64()):
            r.i64()
    elif kind == "str":
        r.take(r.u64())
    else:  # int, float
        r.take(8)


def read_payload(data: bytes, era: int) -> Payload:
    """Parse a payload of ``era`` (it must be valid: this is for real fixtures)."""
    r = _Reader(data)
    magic = r.u64()
    version = r.str()
    funcs = []
    for i in range(r.count("functions")):
        r.fields[f"function {i}"] = r.off
        f = Function(r.i32(), r.str(), r.i64(), r.i64(), r.i64(), r.i64())
        f.params = [r.str() for _ in range(r.count(f"function {i} parameters"))]
        funcs.append(f)
    scopes = []
    if magic == MAGIC_V2:
        scopes = [(r.i64(), r.str()) for _ in range(r.count("scopes"))]
    kinds = {tag: kind for kind, tag in TAGS[era].items()}
    consts = []
    for i in range(r.count("constants")):
        r.fields[f"constant {i}"] = r.off
        tag = r.i32()
        start = r.off
        _read_value(r, kinds[tag])
        consts.append(Constant(tag, data[start : r.off]))
    offsets = [r.i64() for _ in range(r.count("instruction offsets"))]
    words = [r.i64() for _ in range(r.count("instruction data"))]
    if r.off != len(data):
        raise ValueError(f"{len(data) - r.off} bytes after the code")
    marks = sorted(set(r.marks))
    return Payload(era, magic, version, funcs, scopes, consts, offsets, words, marks, r.fields)


class Program:
    """A payload assembled from scratch: packed functions (builtins, kernels) and VM
    functions with their instructions, laid out in the order they were added."""

    def __init__(self, era: int = LEGACY) -> None:
        self.era = era
        self.functions: list[Function] = []
        self.bodies: dict[int, list[list[int]]] = {}
        self.constants: list[Constant] = []

    def packed(self, name: str) -> int:
        for i, f in enumerate(self.functions):
            if f.name == name:
                return i
        self.functions.append(Function(KIND_PACKED, name))
        return len(self.functions) - 1

    def vm_function(
        self, name: str, num_args: int, num_regs: int, params: list[str] | None = None
    ) -> int:
        """A VM function (its body set later with :meth:`body`, so that code may name it)."""
        params = [f"arg{i}" for i in range(num_args)] if params is None else params
        self.functions.append(Function(KIND_VM, name, 0, 0, num_args, num_regs, params))
        return len(self.functions) - 1

    def body(self, index: int, instructions: list[list[int]]) -> None:
        self.bodies[index] = instructions

    def constant(self, kind: str, value: object) -> int:
        if kind == "shape":
            dims = list(value)  # type: ignore[call-overload]
            raw = struct.pack(f"<Q{len(dims)}q", len(dims), *dims)
        elif kind == "int":
            raw = struct.pack("<q", value)
        elif kind == "float":
            raw = struct.pack("<d", value)
        elif kind == "str":
            raw = _str(str(value))
        elif kind == "dtype":
            code, bits, lanes = value  # type: ignore[misc]
            raw = struct.pack("<BBH", code, bits, lanes)
        else:
            raise ValueError(kind)
        self.constants.append(Constant(TAGS[self.era][kind], raw))
        return len(self.constants) - 1

    def raw_constant(self, tag: int, raw: bytes) -> int:
        self.constants.append(Constant(tag, raw))
        return len(self.constants) - 1

    def build(self, magic: int | None = None) -> Payload:
        offsets: list[int] = []
        words: list[int] = []
        funcs = [Function(**vars(f)) for f in self.functions]
        for i, f in enumerate(funcs):
            if f.kind != KIND_VM:
                continue
            f.start = len(offsets)
            for ins in self.bodies.get(i, []):
                offsets.append(len(words))
                words += ins
            f.end = len(offsets)
        if magic is None:
            magic = MAGIC_V2 if self.era == FFI else MAGIC_V1
        return Payload(self.era, magic, "0.14", funcs, [], list(self.constants), offsets, words)

    def to_bytes(self) -> bytes:
        return self.build().to_bytes()


# ---------------------------------------------------------------------------------------
# the payload in a model.so


@dataclass(frozen=True)
class Site:
    """Where a library's executable payload lies (file offsets)."""

    era: int
    blob: int  # the blob symbol's first byte (its u64 size field)
    blob_size: int  # the symbol's size
    length: int  # the payload's u64 length field
    payload: int  # its first byte
    size: int  # its length

    @property
    def end(self) -> int:
        return self.payload + self.size


def find_payload(so: bytes, path: str = "model.so") -> Site:
    """The Relax executable payload of a fixture library."""
    elf = ElfFile(so, path)
    for sym in elf.symbols(dynamic=True):
        if sym.name not in BLOB_SYMBOLS or not sym.defined:
            continue
        sec = elf.sections[sym.section]
        blob = sec.offset + sym.value - sec.addr
        data = so[blob : blob + sym.size]
        for key in (b"relax.Executable", b"relax.VMExecutable"):
            at = data.find(struct.pack("<Q", len(key)) + key)
            if at < 0:
                continue
            length = at + 8 + len(key)
            (size,) = struct.unpack_from("<Q", data, length)
            era = BLOB_SYMBOLS.index(sym.name)
            return Site(era, blob, sym.size, blob + length, blob + length + 8, size)
    raise ValueError(f"{path}: no Relax executable in its module blob")


def payload_of(path: Path) -> tuple[Site, bytes]:
    so = path.read_bytes()
    site = find_payload(so, str(path))
    return site, so[site.payload : site.end]


def splice(so: bytes, site: Site, payload: bytes) -> bytes:
    """``so`` with ``payload`` in place of its executable (at most the old one's size: the
    blob symbol cannot grow); the blob's size field and the payload's length follow."""
    if len(payload) > site.size:
        raise ValueError(f"a {len(payload)}-byte payload does not fit in {site.size} bytes")
    (nbytes,) = struct.unpack_from("<Q", so, site.blob)
    blob_end = site.blob + 8 + nbytes
    inner = so[site.blob + 8 : site.length] + struct.pack("<Q", len(payload)) + payload
    inner += so[site.end : blob_end]
    new_blob = struct.pack("<Q", len(inner)) + inner
    new_blob += b"\0" * (site.blob_size - len(new_blob))
    return so[: site.blob] + new_blob + so[site.blob + site.blob_size :]
