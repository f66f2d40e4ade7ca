"""The text views of an executable, in TVM's words: ``bytecode``, ``constants``, ...

``Executable::GetBytecode``/``GetConstants``/``GetPrimitives``/``GetVirtualDevices``/
``Stats`` (``src/runtime/vm/executable.cc``) and the instruction printer of
``src/runtime/vm/bytecode.cc``.
"""

from __future__ import annotations

from tvmrt.error import TVMError
from tvmrt.runtime.dtype import DataType
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.vm import opcodes as op
from tvmrt.runtime.vm.format import ExecutableData
from tvmrt.runtime.vm.map_order import unordered_map_order

__all__ = ["bytecode_text", "constants_text", "primitives_text", "devices_text", "stats_text"]


def _regs(values: tuple[int, ...] | list[int], sep: str = ", ") -> str:
    return sep.join(f"${r}" for r in values)


def _dtype(code: int, bits: int, lanes: int) -> str:
    try:
        return str(DataType.from_code(code, bits, lanes))
    except TVMError:  # a listing shows what is there, even a dtype tvmrt cannot hold
        return f"({code},{bits},{lanes})"


def _tensor_dtype(code: int, bits: int, lanes: int) -> str:
    # TVM prints a tensor's bool dtype as uint1 (DLDataType2String), a storage's as bool
    return "uint1" if (code, bits, lanes) == (1, 1, 1) else _dtype(code, bits, lanes)


def instruction_text(ins: tuple[int, ...]) -> str:
    """One instruction as TVM prints it (``add $3 ...`` style)."""
    o, f = ins[0], ins[1:]
    if o == op.MOVE:
        return f"move ${f[1]} ${f[0]}"
    if o == op.RET:
        return f"ret ${f[0]}"
    if o == op.INVOKE:
        return f"invoke ${f[2]} VMFunc[{f[0]}]({_regs(f[3:], ',')})"
    if o == op.INVOKE_CLOSURE:
        return f"invoke_closure ${f[2]} ${f[0]}({_regs(f[3:], ',')})"
    if o == op.INVOKE_PACKED:
        n_in = f[1] - f[2]
        ins_text = _regs(f[3 : 3 + n_in]) or "$"
        return f"invoke_packed PackedFunc[{f[0]}] (in: {ins_text}, out: {_regs(f[3 + n_in :])})"
    if o == op.ALLOC_TENSOR:
        shape = ", ".join(str(d) for d in f[7:])
        return f"alloc_tensor ${f[6]} ${f[0]} ${f[1]} [{shape}] {_tensor_dtype(f[2], f[3], f[4])}"
    if o == op.ALLOC_TENSOR_REG:
        dtype = _tensor_dtype(f[3], f[4], f[5])
        return f"alloc_tensor_reg ${f[6]} ${f[0]} ${f[1]} ${f[2]} {dtype}"
    if o == op.ALLOC_ADT:
        fields = ",".join(f"${r}" for r in f[3:]) or "$"
        return f"alloc_data ${f[2]} tag({f[0]}) [{fields}]"
    if o == op.ALLOC_CLOSURE:
        return f"alloc_closure ${f[2]} VMFunc[{f[0]}]({_regs(f[3:], ',')})"
    if o == op.GET_FIELD:
        return f"get_field ${f[2]} ${f[0]}[{f[1]}]"
    if o == op.IF:
        return f"if ${f[0]} ${f[1]} {f[2]} {f[3]}"
    if o == op.LOAD_CONST:
        return f"load_const ${f[2]} Const[{f[0]}] {f[1]}"
    if o == op.GOTO:
        return f"goto {f[0]}"
    if o == op.GET_TAG:
        return f"get_tag ${f[1]} ${f[0]}"
    if o == op.LOAD_CONSTI:
        return f"load_consti ${f[1]} {f[0]}"
    if o == op.FATAL:
        return "fatal"
    if o == op.ALLOC_STORAGE:
        dtype = _dtype(f[2], f[3], f[4])
        if f[6] > 0:
            shape = ", ".join(str(d) for d in f[8:])
            return f"alloc_storage ${f[7]} [{shape}] {dtype} {f[5]}"
        return f"alloc_storage ${f[7]} ${f[0]} {f[1]} {dtype} {f[5]}"
    if o == op.SHAPE_OF:
        return f"shape_of ${f[1]} ${f[0]}"
    if o == op.RESHAPE_TENSOR:
        return f"reshape_tensor ${f[2]} ${f[0]} ${f[1]}"
    if o == op.DEVICE_COPY:
        return f"device_copy ${f[3]} ${f[0]} {f[2]} {f[1]}"
    return f"kill_register ${f[0]}"


def bytecode_text(exe: ExecutableData) -> str:
    """``Executable.bytecode``: every function with its instructions, numbers and text."""
    out = []
    for i, func in enumerate(exe.functions):
        out.append(f"VM Function[{i}]: {func.name}({', '.join(func.params)})\n")
        out.append(f"# reg file size = {func.register_file_size}\n")
        out.append(f"# instruction count = {len(func.instructions)}\n")
        out.append("opcode, fields # inst(text):\n")
        for pc, ins in enumerate(func.instructions):
            numbers = "".join(f"{v} " for v in ins)
            head = f"{pc:2}: {numbers}"
            out.append(f"{head:<40}  # {instruction_text(ins)}\n")
        out.append("\n")
    return "".join(out)


def _shape(shape: tuple[int, ...]) -> str:
    return "(" + ",".join(str(d) for d in shape) + ")"


_SHOWN_DTYPES = {"bool", "float32", "float64"} | {
    f"{kind}{bits}" for kind in ("int", "uint") for bits in (8, 16, 32, 64)
}


def _ostream(value: object, dtype: str) -> str:
    """``value`` as ``std::ostream << T`` writes it for TVM's C type of ``dtype``."""
    if dtype in ("int8", "uint8"):
        return chr(int(value) & 0xFF)  # type: ignore[call-overload]
    if dtype.startswith("float"):
        return format(float(value), "g")  # type: ignore[arg-type]
    return str(int(value))  # type: ignore[call-overload]


def constants_text(exe: ExecutableData) -> str:
    """``Executable.constants``: shape, dtype, small values and device of each constant."""
    out = []
    for k, const in enumerate(exe.constants):
        dev = exe.const_device_indexes[k]
        if isinstance(const, str):
            out.append(f"VM Const[{k}]: late-bound {const!r} on device index {dev}\n")
            continue
        head = f"NDArray[{_shape(const.shape)},{const.dtype},(1,0)]"
        # TVM's AppendNDArray: the values of a scalar or of a vector of at most 10, written
        # by C++'s ostream (int8/uint8 as characters, floats with 6 significant digits)
        if (len(const.shape) == 0 or (len(const.shape) == 1 and const.shape[0] <= 10)) and (
            const.dtype in _SHOWN_DTYPES
        ):
            values = ",".join(_ostream(v, str(const.dtype)) for v in const.numpy().reshape(-1))
            head += f"=[{values}]"
        out.append(f"VM Const[{k}]: {head} on device index {dev}\n")
    return "".join(out)


def primitives_text(exe: ExecutableData) -> str:
    """``Executable.primitives``: the kernel name of each packed index."""
    return "".join(f"VM PackedFunc[{i}]: {name}\n" for i, name in enumerate(exe.primitive_names))


def _scope(scope: str) -> str:
    return f" {scope}" if scope else ""


def devices_text(exe: ExecutableData) -> str:
    """``Executable.virtual_devices``."""
    return "".join(
        f"VM VirtualDevice[{i}]: device type {t}, id {d} and mem_scope{_scope(scope)}\n"
        for i, (t, d, scope) in enumerate(exe.virtual_devices)
    )


def stats_text(exe: ExecutableData) -> str:
    """``Executable.stats``: constant shapes, globals and kernels."""
    shapes = []
    for const in exe.constants:
        if isinstance(const, NDArray):
            dims = ", ".join(str(d) for d in const.shape)
            shapes.append(f"[{dims}], \n" if dims else "scalar, ")
        else:
            shapes.append("late-bound, ")
    text = "".join(shapes)
    text = text[:-3] if text.endswith(", \n") else text[:-2]
    # TVM walks its global_map, a std::unordered_map: the order is that map's (map_order.py)
    names = list(exe.globals)
    globals_text = ", ".join(f'("{names[i]}", {i})' for i in unordered_map_order(names))
    return (
        "Relay VM executable statistics:\n"
        f"  Constant shapes (# {len(exe.constants)}): [{text}]\n"
        f"  Globals (#{len(exe.globals)}): [{globals_text}]\n"
        f"  Primitive ops (#{len(exe.primitive_names)}): [{', '.join(exe.primitive_names)}]\n"
    )
