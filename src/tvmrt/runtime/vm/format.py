"""The serialized Relay VM executable (``code.ro``, TVM 0.14-0.19): read and write.

``Executable::Save``/``Load`` in TVM's ``src/runtime/vm/executable.cc``: a little-endian
dmlc stream of header, virtual devices, globals, constants, primitive names and
attributes, then the code. Every count is checked against the bytes left before anything
is allocated, every instruction's hash is recomputed and its field count checked against
its opcode (:mod:`tvmrt.runtime.vm.opcodes`); what the operands point at is checked by
:mod:`tvmrt.runtime.vm.validate`.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

from tvmrt.binfmt.files import VM_BYTECODE_MAGIC
from tvmrt.binfmt.stream import ByteReader, ByteWriter
from tvmrt.error import ModuleLoadError
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.tensor_record import read_ndarray, write_ndarray
from tvmrt.runtime.vm.opcodes import NUM_OPCODES, OPCODE_NAMES, expected_fields, instruction_hash

__all__ = [
    "VM_MAGIC",
    "MAX_REGISTERS",
    "VMFunction",
    "ExecutableData",
    "read_executable",
    "write_executable",
    "check_version",
]

VM_MAGIC = VM_BYTECODE_MAGIC  # kTVMVMBytecodeMagic (binfmt/files.py)
MAX_REGISTERS = 1 << 20  # per frame; TVM has no limit, a frame of more is not a real program
_VERSION = re.compile(r"^0\.(\d+)(?:\.\d+)?(?:\.dev\d*)?(?:[+.-].*)?$")
_CONST_IMMEDIATE = 0
_CONST_LATE_BOUND = 1


@dataclass
class VMFunction:
    """One VM function: its registers, parameters and instructions ``(opcode, *fields)``."""

    name: str
    register_file_size: int
    params: list[str]
    param_device_indexes: list[int]
    instructions: list[tuple[int, ...]]


@dataclass
class ExecutableData:
    """Everything ``code.ro`` holds, in TVM's order.

    ``constants[k]`` is an NDArray, or the name (``const_<k>``) of a late-bound constant
    not loaded yet. ``functions`` are in function-index order (``globals`` order).
    """

    version: str
    virtual_devices: list[tuple[int, int, str]]
    host_device_index: int
    globals: list[str]
    constants: list[NDArray | str]
    const_device_indexes: list[int]
    primitive_names: list[str]
    primitive_attrs: dict[int, dict[str, str]] = field(default_factory=dict)
    functions: list[VMFunction] = field(default_factory=list)


def check_version(version: str, what: str) -> None:
    """Accept the writers whose layout this reader knows: TVM 0.14 to 0.19.

    TVM itself demands its own version string exactly; tvmrt reads every version with
    this layout and refuses the others by name.
    """
    match = _VERSION.match(version)
    minor = int(match.group(1)) if match else -1
    if not 14 <= minor <= 19:
        raise ModuleLoadError(
            f"{what}: the executable was written by TVM {version!r}; tvmrt reads the Relay "
            "VM layout of TVM 0.14 to 0.19 (older versions lay out devices, LoadConst and "
            "AllocStorage differently; TVM 0.20 and later have no Relay VM)"
        )


def read_executable(
    data: bytes | bytearray | memoryview, what: str, check_hash: bool = True
) -> ExecutableData:
    """Parse a serialized executable (the bytes of ``code.ro``).

    ``check_hash=False`` skips the instruction hashes (for fuzzing the operand checks
    behind them); every other check stays.

    Raises
    ------
    ModuleLoadError
        On a bad magic, an unknown version, truncation, a wrong instruction hash or field
        count, or bytes left over.
    """
    r = ByteReader(data, what, ModuleLoadError)
    magic = r.u64("magic")
    if magic != VM_MAGIC:
        raise r.fail(
            f"magic is {magic:#018x}, expected {VM_MAGIC:#018x} (a Relay VM executable)", 0
        )
    version = r.string("version")
    check_version(version, what)
    devices = []
    for i in range(r.count("number of virtual devices", 16)):
        dev_type, dev_id = r.i32(f"device type of virtual device {i}"), r.i32("device id")
        devices.append((dev_type, dev_id, r.string(f"memory scope of virtual device {i}")))
    at = r.offset
    host = r.i32("host device index")
    if not 0 <= host < len(devices):
        raise r.fail(f"host device index is {host}, expected 0 to {len(devices) - 1}", at)
    names = r.strings("global function names")
    constants: list[NDArray | str] = []
    for k in range(r.count("number of constants", 4)):
        at = r.offset
        tag = struct.unpack("<I", r.raw(4, f"tag of constant {k}"))[0]
        if tag == _CONST_IMMEDIATE:
            constants.append(read_ndarray(r, f"const_{k}"))
        elif tag == _CONST_LATE_BOUND:
            constants.append(r.string(f"name of late-bound constant {k}"))
        else:
            raise r.fail(
                f"constant {k} has tag {tag}, expected 0 (immediate) or 1 (late-bound)", at
            )
    at = r.offset
    const_devices = _i64s(r, "constant device indexes")
    if len(const_devices) != len(constants):
        raise r.fail(
            f"{len(const_devices)} constant device indexes for {len(constants)} constants", at
        )
    primitives = r.strings("primitive names")
    attrs: dict[int, dict[str, str]] = {}
    for _ in range(r.count("number of primitive attribute maps", 16)):
        index = r.u64("primitive index")
        attrs[index] = {
            r.string("attribute key"): r.string("attribute value")
            for _ in range(r.count("number of attributes", 16))
        }
    exe = ExecutableData(version, devices, host, names, constants, const_devices, primitives, attrs)
    exe.functions = _read_functions(r, names, check_hash)
    if r.remaining:
        raise r.fail(f"{r.remaining} bytes are left over after the code section")
    return exe


def _i64s(r: ByteReader, what: str) -> list[int]:
    n = r.count(f"length of {what}", 8)
    return list(struct.unpack_from(f"<{n}q", r.raw(8 * n, what)))


def _read_functions(r: ByteReader, names: list[str], check_hash: bool) -> list[VMFunction]:
    index = {name: i for i, name in enumerate(names)}
    if len(index) != len(names):
        raise r.fail("the global function names are not unique")
    at = r.offset
    count = r.count("number of functions", 40)
    if count != len(names):
        raise r.fail(f"the code section holds {count} functions for {len(names)} globals", at)
    slots: list[VMFunction | None] = [None] * count
    for _ in range(count):
        at = r.offset
        head = r.strings("function header")
        if len(head) != 3:
            raise r.fail(f"a function header has {len(head)} strings, expected 3", at)
        name, size, num = head[0], _decimal(r, head[1], at), _decimal(r, head[2], at)
        where = f"function {name!r}"
        if name not in index or slots[index[name]] is not None:
            raise r.fail(f"{where} is not a global or comes twice", at)
        if size > MAX_REGISTERS:
            raise r.fail(f"{where} has {size} registers, more than the limit {MAX_REGISTERS}", at)
        if num < 1 or num > r.remaining // 16:
            raise r.fail(f"{where} claims {num} instructions for {r.remaining} bytes", at)
        params = r.strings(f"parameters of {where}")
        at = r.offset
        param_devices = _i64s(r, f"parameter device indexes of {where}")
        if len(param_devices) != len(params):
            raise r.fail(f"{where} has {len(params)} params but {len(param_devices)} devices", at)
        code = [_read_instruction(r, where, pc, check_hash) for pc in range(num)]
        slots[index[name]] = VMFunction(name, size, params, param_devices, code)
    return [f for f in slots if f is not None]


def _decimal(r: ByteReader, text: str, at: int) -> int:
    if not text.isascii() or not text.isdigit() or len(text) > 12:
        raise r.fail(f"function header count {text!r} is not a decimal number", at)
    return int(text)


def _read_instruction(r: ByteReader, where: str, pc: int, check_hash: bool) -> tuple[int, ...]:
    at = r.offset
    words = _i64s(r, f"instruction {pc} of {where}")
    if len(words) < 2:
        raise r.fail(f"instruction {pc} of {where} has {len(words)} words, expected >= 2", at)
    stored, opcode, fields = words[0], words[1], tuple(words[2:])
    if not 0 <= opcode < NUM_OPCODES:
        raise r.fail(f"instruction {pc} of {where} has opcode {opcode}, expected 0 to 20", at)
    want = expected_fields(opcode, fields)
    if want != len(fields):
        raise r.fail(
            f"instruction {pc} of {where} ({OPCODE_NAMES[opcode]}) has {len(fields)} fields, "
            f"expected {want}",
            at,
        )
    if check_hash and instruction_hash(opcode, fields) != stored & 0xFFFFFFFFFFFFFFFF:
        raise r.fail(f"instruction {pc} of {where} ({OPCODE_NAMES[opcode]}): hash mismatch", at)
    return (opcode, *fields)


def write_executable(exe: ExecutableData) -> bytes:
    """The bytes TVM's ``Executable::Save`` writes for ``exe``."""
    w = ByteWriter()
    w.u64(VM_MAGIC)
    w.string(exe.version)
    w.u64(len(exe.virtual_devices))
    for dev_type, dev_id, scope in exe.virtual_devices:
        w.i32(dev_type)
        w.i32(dev_id)
        w.string(scope)
    w.i32(exe.host_device_index)
    w.strings(exe.globals)
    w.u64(len(exe.constants))
    for const in exe.constants:
        if isinstance(const, str):
            w.raw(struct.pack("<I", _CONST_LATE_BOUND))
            w.string(const)
        else:
            w.raw(struct.pack("<I", _CONST_IMMEDIATE))
            write_ndarray(w, const)
    _write_i64s(w, exe.const_device_indexes)
    w.strings(exe.primitive_names)
    w.u64(len(exe.primitive_attrs))
    for index in sorted(exe.primitive_attrs):
        w.u64(index)
        attrs = exe.primitive_attrs[index]
        w.u64(len(attrs))
        for key in sorted(attrs):
            w.string(key)
            w.string(attrs[key])
    w.u64(len(exe.functions))
    for func in exe.functions:
        w.strings([func.name, str(func.register_file_size), str(len(func.instructions))])
        w.strings(func.params)
        _write_i64s(w, func.param_device_indexes)
        for opcode, *fields in func.instructions:
            digest = instruction_hash(opcode, fields)
            _write_i64s(w, [digest - (1 << 64) if digest >= 1 << 63 else digest, opcode, *fields])
    return bytes(w.buffer)


def _write_i64s(w: ByteWriter, values: list[int]) -> None:
    w.u64(len(values))
    w.raw(struct.pack(f"<{len(values)}q", *values))
