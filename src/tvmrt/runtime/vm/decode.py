"""Check every operand of an executable and decode its code once, for the interpreter.

Run at load, before anything executes: every register is below its function's register
count (the junk pointer of a shaped ``AllocStorage`` excepted, which is never read),
every constant, function, kernel and device index exists, every jump lands inside its
function, every dtype is one tvmrt can hold, every static allocation has a size, and no
path runs off the end of a function (its last instruction must be Ret, Goto, If or
Fatal). Each instruction becomes a tuple with its operands in the order the interpreter
uses them and with its dtype, static shape and byte size computed, so a step does no
decoding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tvmrt.error import DataTypeError, ModuleLoadError
from tvmrt.runtime.dtype import DataType
from tvmrt.runtime.tensor_record import MAX_NDIM
from tvmrt.runtime.vm import opcodes as op
from tvmrt.runtime.vm.format import ExecutableData, VMFunction

__all__ = ["DecodedFunction", "decode_executable", "MAX_STATIC_BYTES"]

MAX_STATIC_BYTES = 1 << 48  # a static shape beyond this is no real model (checked at load)
_TERMINATORS = (op.RET, op.GOTO, op.IF, op.FATAL)


@dataclass(frozen=True)
class DecodedFunction:
    """A function ready to run: ``code[pc]`` is ``(opcode, operands...)``."""

    name: str
    index: int
    num_registers: int
    params: tuple[str, ...]
    param_devices: tuple[int, ...]
    code: tuple[tuple[Any, ...], ...]


class _Checker:
    def __init__(self, exe: ExecutableData, func: VMFunction, what: str) -> None:
        self.exe = exe
        self.func = func
        self.what = what
        self.pc = 0

    def fail(self, message: str) -> ModuleLoadError:
        ins = self.func.instructions[self.pc]
        return ModuleLoadError(
            f"{self.what}: function {self.func.name!r}, instruction {self.pc} "
            f"({op.OPCODE_NAMES[ins[0]]}): {message}"
        )

    def reg(self, value: int, role: str) -> int:
        if not 0 <= value < self.func.register_file_size:
            raise self.fail(
                f"{role} register {value} is out of range: the function has "
                f"{self.func.register_file_size} registers"
            )
        return value

    def regs(self, values: tuple[int, ...], role: str) -> tuple[int, ...]:
        return tuple(self.reg(v, f"{role} {i}") for i, v in enumerate(values))

    def index(self, value: int, size: int, role: str) -> int:
        if not 0 <= value < size:
            raise self.fail(f"{role} {value} is out of range: expected 0 to {size - 1}")
        return value

    def target(self, offset: int) -> int:
        to = self.pc + offset
        if offset == 0 or not 0 <= to < len(self.func.instructions):
            raise self.fail(
                f"jump offset {offset} lands on instruction {to}, outside 0 to "
                f"{len(self.func.instructions) - 1} (or on itself)"
            )
        return offset

    def dtype(self, code: int, bits: int, lanes: int) -> DataType:
        if not (0 <= code < 256 and 0 < bits < 256 and 0 < lanes < 65536):
            raise self.fail(f"dtype (code={code}, bits={bits}, lanes={lanes}) is invalid")
        try:
            dtype = DataType.from_code(code, bits, lanes)
            dtype.numpy_dtype  # noqa: B018 - raises DataTypeError when numpy cannot hold it
        except DataTypeError as exc:
            raise self.fail(f"unsupported dtype (code={code}, bits={bits}): {exc}") from exc
        return dtype

    def shape(self, dims: tuple[int, ...], dtype: DataType) -> tuple[tuple[int, ...], int]:
        if len(dims) > MAX_NDIM:
            raise self.fail(f"shape has {len(dims)} dimensions, more than {MAX_NDIM}")
        if any(d < 0 for d in dims):
            raise self.fail(f"shape {list(dims)} has a negative dimension")
        nbytes = math.prod(dims) * dtype.itemsize
        if nbytes > MAX_STATIC_BYTES:
            raise self.fail(f"shape {list(dims)} of {dtype} needs {nbytes} bytes")
        return dims, nbytes


def decode_executable(exe: ExecutableData, what: str) -> list[DecodedFunction]:
    """Check and decode every function of ``exe``, in function-index order.

    Raises
    ------
    ModuleLoadError
        Naming the function, the instruction and the bad operand.
    """
    num_devices = len(exe.virtual_devices)
    if len(exe.const_device_indexes) != len(exe.constants):
        raise ModuleLoadError(
            f"{what}: {len(exe.const_device_indexes)} constant device indexes for "
            f"{len(exe.constants)} constants"
        )
    for k, dev in enumerate(exe.const_device_indexes):
        if not 0 <= dev < num_devices:
            raise ModuleLoadError(
                f"{what}: constant {k} is on virtual device {dev}, expected 0 to {num_devices - 1}"
            )
    return [_decode_function(exe, i, f, what) for i, f in enumerate(exe.functions)]


def _decode_function(
    exe: ExecutableData, index: int, func: VMFunction, what: str
) -> DecodedFunction:
    ck = _Checker(exe, func, what)
    num_devices = len(exe.virtual_devices)
    if len(func.params) > func.register_file_size:
        raise ModuleLoadError(
            f"{what}: function {func.name!r} has {len(func.params)} params but only "
            f"{func.register_file_size} registers"
        )
    for i, dev in enumerate(func.param_device_indexes):
        if not 0 <= dev < num_devices:
            raise ModuleLoadError(
                f"{what}: function {func.name!r} param {i} is on virtual device {dev}, "
                f"expected 0 to {num_devices - 1}"
            )
    code = []
    for pc, ins in enumerate(func.instructions):
        ck.pc = pc
        code.append(_decode(ck, ins, num_devices))
    if func.instructions[-1][0] not in _TERMINATORS:
        ck.pc = len(func.instructions) - 1
        raise ck.fail("the function's last instruction must be Ret, Goto, If or Fatal")
    return DecodedFunction(
        func.name,
        index,
        func.register_file_size,
        tuple(func.params),
        tuple(func.param_device_indexes),
        tuple(code),
    )


def _decode(ck: _Checker, ins: tuple[int, ...], num_devices: int) -> tuple[Any, ...]:
    opcode, f = ins[0], ins[1:]
    exe = ck.exe
    if opcode == op.MOVE:
        return (opcode, ck.reg(f[0], "source"), ck.reg(f[1], "destination"))
    if opcode == op.RET:
        return (opcode, ck.reg(f[0], "result"))
    if opcode in (op.INVOKE, op.ALLOC_CLOSURE):
        callee = ck.index(f[0], len(exe.functions), "function index")
        args = ck.regs(f[3:], "argument")
        if opcode == op.INVOKE and len(args) != len(exe.functions[callee].params):
            raise ck.fail(
                f"calls {exe.functions[callee].name!r} with {len(args)} arguments, "
                f"it takes {len(exe.functions[callee].params)}"
            )
        return (opcode, callee, args, ck.reg(f[2], "destination"))
    if opcode == op.INVOKE_CLOSURE:
        return (
            opcode,
            ck.reg(f[0], "closure"),
            ck.regs(f[3:], "argument"),
            ck.reg(f[2], "destination"),
        )
    if opcode == op.INVOKE_PACKED:
        packed = ck.index(f[0], len(exe.primitive_names), "kernel index")
        arity, outputs = f[1], f[2]
        if not 0 <= outputs <= arity:
            raise ck.fail(f"output_size {outputs} is not between 0 and arity {arity}")
        return (opcode, packed, ck.regs(f[3:], "argument"), outputs)
    if opcode == op.ALLOC_TENSOR:
        dtype = ck.dtype(f[2], f[3], f[4])
        shape, nbytes = ck.shape(tuple(f[7:]), dtype)
        return (
            opcode,
            ck.reg(f[0], "storage"),
            ck.reg(f[1], "offset"),
            shape,
            dtype,
            nbytes,
            ck.reg(f[6], "destination"),
        )
    if opcode == op.ALLOC_TENSOR_REG:
        dtype = ck.dtype(f[3], f[4], f[5])
        return (
            opcode,
            ck.reg(f[0], "storage"),
            ck.reg(f[1], "offset"),
            ck.reg(f[2], "shape"),
            dtype,
            ck.reg(f[6], "destination"),
        )
    if opcode == op.ALLOC_ADT:
        if not -(1 << 31) <= f[0] < 1 << 31:
            raise ck.fail(f"constructor tag {f[0]} does not fit an int32")
        return (opcode, f[0], ck.regs(f[3:], "field"), ck.reg(f[2], "destination"))
    if opcode == op.GET_FIELD:
        if f[1] < 0:
            raise ck.fail(f"field index {f[1]} is negative")
        return (opcode, ck.reg(f[0], "object"), f[1], ck.reg(f[2], "destination"))
    if opcode == op.IF:
        return (
            opcode,
            ck.reg(f[0], "test"),
            ck.reg(f[1], "target"),
            ck.target(f[2]),
            ck.target(f[3]),
        )
    if opcode == op.LOAD_CONST:
        const = ck.index(f[0], len(exe.constants), "constant index")
        ck.index(f[1], num_devices, "virtual device index")
        return (opcode, const, ck.reg(f[2], "destination"))
    if opcode == op.GOTO:
        return (opcode, ck.target(f[0]))
    if opcode == op.GET_TAG:
        return (opcode, ck.reg(f[0], "object"), ck.reg(f[1], "destination"))
    if opcode == op.LOAD_CONSTI:
        return (opcode, f[0], ck.reg(f[1], "destination"))
    if opcode == op.FATAL:
        return (opcode,)
    if opcode == op.ALLOC_STORAGE:
        dtype = ck.dtype(f[2], f[3], f[4])
        device = ck.index(f[5], num_devices, "virtual device index")
        shape = tuple(f[8:])
        if f[6] > 0:  # a static shape: field 0 is a stale pointer (never read)
            _, nbytes = ck.shape(shape, dtype)
            alignment, size_reg = max(64, dtype.bits // 8 * dtype.lanes), -1
        else:
            nbytes, alignment, size_reg = -1, f[1], ck.reg(f[0], "size")
            if not 0 < alignment <= 4096 or alignment & (alignment - 1):
                raise ck.fail(f"alignment {alignment} is not a power of two up to 4096")
        # the dtype hint and static shape last: only the profiler's row reads them
        dst = ck.reg(f[7], "destination")
        return (opcode, size_reg, nbytes, alignment, device, dst, dtype, shape)
    if opcode == op.SHAPE_OF:
        return (opcode, ck.reg(f[0], "tensor"), ck.reg(f[1], "destination"))
    if opcode == op.RESHAPE_TENSOR:
        return (opcode, ck.reg(f[0], "tensor"), ck.reg(f[1], "shape"), ck.reg(f[2], "destination"))
    if opcode == op.DEVICE_COPY:
        src_dev = ck.index(f[1], num_devices, "source device index")
        dst_dev = ck.index(f[2], num_devices, "destination device index")
        return (opcode, ck.reg(f[0], "source"), src_dev, dst_dev, ck.reg(f[3], "destination"))
    return (opcode, ck.reg(f[0], "register"))  # KILL_REGISTER
