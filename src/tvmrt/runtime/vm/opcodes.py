"""The Relay VM's 21 opcodes: names, serialized field counts, the instruction hash.

``Opcode`` in TVM's ``include/tvm/runtime/vm/bytecode.h``; the field order is
``SerializeInstruction`` in ``src/runtime/vm/executable.cc``. Every field is an ``int64``.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "MOVE",
    "RET",
    "INVOKE",
    "INVOKE_CLOSURE",
    "INVOKE_PACKED",
    "ALLOC_TENSOR",
    "ALLOC_TENSOR_REG",
    "ALLOC_ADT",
    "ALLOC_CLOSURE",
    "GET_FIELD",
    "IF",
    "LOAD_CONST",
    "GOTO",
    "GET_TAG",
    "LOAD_CONSTI",
    "FATAL",
    "ALLOC_STORAGE",
    "SHAPE_OF",
    "RESHAPE_TENSOR",
    "DEVICE_COPY",
    "KILL_REGISTER",
    "NUM_OPCODES",
    "OPCODE_NAMES",
    "expected_fields",
    "instruction_hash",
]

MOVE, RET, INVOKE, INVOKE_CLOSURE, INVOKE_PACKED = 0, 1, 2, 3, 4
ALLOC_TENSOR, ALLOC_TENSOR_REG, ALLOC_ADT, ALLOC_CLOSURE, GET_FIELD = 5, 6, 7, 8, 9
IF, LOAD_CONST, GOTO, GET_TAG, LOAD_CONSTI, FATAL = 10, 11, 12, 13, 14, 15
ALLOC_STORAGE, SHAPE_OF, RESHAPE_TENSOR, DEVICE_COPY, KILL_REGISTER = 16, 17, 18, 19, 20
NUM_OPCODES = 21

OPCODE_NAMES = (
    "Move",
    "Ret",
    "Invoke",
    "InvokeClosure",
    "InvokePacked",
    "AllocTensor",
    "AllocTensorReg",
    "AllocADT",
    "AllocClosure",
    "GetField",
    "If",
    "LoadConst",
    "Goto",
    "GetTag",
    "LoadConsti",
    "Fatal",
    "AllocStorage",
    "ShapeOf",
    "ReshapeTensor",
    "DeviceCopy",
    "KillRegister",
)

# fixed field counts; None: a count inside the fields decides (expected_fields)
_FIXED: tuple[int | None, ...] = (
    2, 1, None, None, None, None, 7, None, None, 3, 4, 3, 1, 2, 2, 0, None, 2, 3, 4, 1,
)  # fmt: skip
# (index of the count field, fields before the variable part) for the variable opcodes
_VARIABLE = {
    INVOKE: (1, 3),
    INVOKE_CLOSURE: (1, 3),
    INVOKE_PACKED: (1, 3),
    ALLOC_ADT: (1, 3),
    ALLOC_CLOSURE: (1, 3),
    ALLOC_TENSOR: (5, 7),
    ALLOC_STORAGE: (6, 8),
}
_MASK = (1 << 64) - 1


def expected_fields(opcode: int, fields: Sequence[int]) -> int:
    """How many fields an instruction of ``opcode`` must have, given its ``fields``.

    For the variable-length opcodes the count comes from the fields themselves (a count
    that is negative or that the fields cannot hold gives -1, which never matches).
    """
    fixed = _FIXED[opcode]
    if fixed is not None:
        return fixed
    at, base = _VARIABLE[opcode]
    if len(fields) <= at or fields[at] < 0:
        return -1
    return base + fields[at]


def instruction_hash(opcode: int, fields: Sequence[int]) -> int:
    """TVM's ``VMInstructionHash``: ``hash_combine`` of the opcode and every field (u64)."""
    key = opcode & _MASK
    for value in fields:
        key ^= ((value & _MASK) + 0x9E3779B9 + ((key << 6) & _MASK) + (key >> 2)) & _MASK
    return key
