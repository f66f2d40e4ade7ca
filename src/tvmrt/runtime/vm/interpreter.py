"""The Relay VM's run loop: TVM's ``VirtualMachine::RunLoop`` over decoded code.

Registers hold NDArrays, ADTs, closures, storages or ``None``. Calls push a frame on an
explicit stack (no Python recursion), so a deep or endless recursion ends at
:attr:`VMLimits.max_frames` with an error, and an endless loop at
:attr:`VMLimits.max_steps` (ten million by default). Kernels are called through tvmrt's kernel
calling path (``PackedFunc.prepare_call``: the legacy and the tvm-ffi ABIs).
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from tvmrt.error import (
    ArgumentTypeError,
    ArrayError,
    DeviceOutOfMemoryError,
    InternalError,
    InvalidArgumentError,
    TVMError,
    add_note,
)
from tvmrt.runtime.container import ADT
from tvmrt.runtime.device import Device
from tvmrt.runtime.device_api import DeviceAPI, Storage
from tvmrt.runtime.ndarray import NDArray, empty
from tvmrt.runtime.object import Object
from tvmrt.runtime.packed_func import PackedFunc
from tvmrt.runtime.tensor_record import MAX_NDIM
from tvmrt.runtime.vm import opcodes as op
from tvmrt.runtime.vm.calls import KernelSite, TensorSite
from tvmrt.runtime.vm.decode import DecodedFunction
from tvmrt.runtime.vm.pool import TENSOR_BYTES, LiveBudget, StoragePool, cell_bytes

__all__ = ["VMClosure", "VMLimits", "Interpreter", "KernelHook", "InstructionHook"]

KernelHook = Callable[[int, Callable[..., object], tuple[object, ...], list[NDArray]], None]


class InstructionHook(Protocol):
    """Called around the instructions TVM's VM profiler times (``OpStartHook``/``OpStopHook``
    of ``src/runtime/vm/vm.cc``): AllocStorage, AllocTensor, AllocTensorReg, ReshapeTensor,
    DeviceCopy and KillRegister. ``start`` sees the decoded instruction and the registers
    before it runs; ``stop`` follows it."""

    def start(self, ins: tuple[Any, ...], regs: list[object]) -> None: ...

    def stop(self) -> None: ...


def _env_int(name: str) -> int | None:
    text = os.environ.get(name, "")
    return int(text) if text.strip().isdigit() else None


DEFAULT_MAX_STEPS = 10_000_000


def _max_steps() -> int | None:
    value = _env_int("TVMRT_VM_MAX_STEPS")
    if value is None:
        return DEFAULT_MAX_STEPS
    return value or None  # 0: no limit


@dataclass
class VMLimits:
    """Bounds on one ``invoke`` (tvmrt's; TVM has none).

    Attributes
    ----------
    max_frames
        Deepest call stack (``TVMRT_VM_MAX_FRAMES``, default 10000).
    max_steps
        Most steps in one invoke, or None for no limit (``TVMRT_VM_MAX_STEPS``, default
        ten million, 0 for no limit): an endless loop ends with an error instead of
        hanging. A step weighs its cost: a call its callee's register count (at least 1),
        a backward jump 1, an AllocADT, AllocClosure or InvokePacked its argument count.
    max_alloc_bytes
        Largest single ``AllocStorage``, or None for whatever the device gives
        (``TVMRT_VM_MAX_ALLOC_BYTES``).
    max_live_bytes
        Most bytes the VM's allocations hold at once, its pools' free buffers included, or
        None (``TVMRT_VM_MAX_LIVE_BYTES``; ``tvmrt serve``: ``--max-inflight-mb``/workers).
    """

    max_frames: int = field(default_factory=lambda: _env_int("TVMRT_VM_MAX_FRAMES") or 10000)
    max_steps: int | None = field(default_factory=_max_steps)
    max_alloc_bytes: int | None = field(
        default_factory=lambda: _env_int("TVMRT_VM_MAX_ALLOC_BYTES")
    )
    max_live_bytes: int | None = field(default_factory=lambda: _env_int("TVMRT_VM_MAX_LIVE_BYTES"))


class VMClosure(Object):
    """A VM closure (``vm.Closure``): a function index and its captured values."""

    __slots__ = ("__weakref__", "free_vars", "func_index")  # weakref: the live budget's

    def __init__(self, func_index: int, free_vars: Sequence[object]) -> None:
        self.func_index = func_index
        self.free_vars = tuple(free_vars)

    def __repr__(self) -> str:
        return f"VMClosure(func_index={self.func_index}, free_vars={len(self.free_vars)})"


def _take_regs(held: tuple[LiveBudget, list[int]], func: DecodedFunction) -> None:
    """Charge ``func``'s register file to the live budget for as long as its frame runs."""
    nbytes = cell_bytes(func.num_registers)
    held[0].take(nbytes, "a register file")
    held[1][0] += nbytes


def _tensor(value: object, role: str) -> NDArray:
    if not isinstance(value, NDArray):
        raise ArgumentTypeError(f"{role} must hold a tensor, it holds {_kind(value)}")
    return value


def _kind(value: object) -> str:
    return "nothing" if value is None else type(value).__name__


def _host(value: object, role: str) -> np.ndarray:
    arr = _tensor(value, role)
    view = arr.host_view
    return arr.numpy() if view is None else view


def load_scalar_int(value: object, role: str) -> int:
    """TVM's ``LoadScalarInt``: element 0 of a tensor, read as a signed integer."""
    host = _host(value, role)
    if host.size == 0:
        raise ArrayError(f"{role} is an empty tensor, expected a scalar")
    item = host.reshape(-1)[0]
    if host.dtype.kind not in "biu":
        raise ArgumentTypeError(f"{role} has dtype {host.dtype}, expected an integer or bool")
    return int(item)


def _int32(value: int) -> int:
    return ((value + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _host_ints(values: Sequence[int], dtype: str, shape: tuple[int, ...]) -> NDArray:
    arr = empty(shape, dtype)
    arr.numpy_view().reshape(-1)[:] = values
    return arr


def _shape_from(value: object, role: str) -> tuple[int, ...]:
    host = _host(value, role)
    if host.dtype.kind not in "iu" or host.ndim > 1:
        raise ArgumentTypeError(
            f"{role} must be a 1-D int32/int64 tensor, got {host.dtype} {host.shape}"
        )
    dims = tuple(int(d) for d in host.reshape(-1)) if host.ndim == 1 else ()
    if len(dims) > MAX_NDIM or any(d < 0 for d in dims):
        raise ArrayError(f"{role} holds an invalid shape {list(dims)}")
    return dims


class Interpreter:
    """Runs decoded functions over the given devices, constants and kernels.

    Parameters
    ----------
    functions
        The decoded functions, in function-index order.
    devices
        The physical device of each virtual device.
    constants
        The constant pool, each already on its device.
    kernels
        The kernel of each primitive index.
    limits
        Bounds on one invoke.
    """

    def __init__(
        self,
        functions: Sequence[DecodedFunction],
        devices: Sequence[Device],
        apis: Sequence[DeviceAPI],
        constants: Sequence[NDArray],
        kernels: Sequence[PackedFunc],
        limits: VMLimits | None = None,
        pooled: Sequence[bool] = (),
    ) -> None:
        self.functions = tuple(functions)
        self.devices = tuple(devices)
        self.apis = tuple(apis)
        self.constants = tuple(constants)
        self.kernels = tuple(kernels)
        self.limits = limits or VMLimits()
        self.kernel_hook: KernelHook | None = None
        self.instruction_hook: InstructionHook | None = None
        self.sites: dict[int, KernelSite] = {}  # id of an InvokePacked instruction -> its call
        self.tensor_sites: defaultdict[int, TensorSite] = defaultdict(TensorSite)  # AllocTensor*
        self.pools = [
            StoragePool(api, dev) if i < len(pooled) and pooled[i] else None
            for i, (api, dev) in enumerate(zip(self.apis, self.devices, strict=True))
        ]
        self.budget: LiveBudget | None = None

    def run(self, index: int, args: Sequence[object]) -> object:
        """Call function ``index`` on ``args`` and return its result (TVM's ``Invoke``)."""
        func = self.functions[index]
        if len(args) != len(func.params):
            raise InvalidArgumentError(
                f"function {func.name!r} takes {len(func.params)} arguments "
                f"({', '.join(func.params)}), got {len(args)}"
            )
        state = [func, 0]
        try:
            if self.limits.max_live_bytes is None:
                return self._loop(func, list(args), state, None)
            tracker = self._tracker(self.limits.max_live_bytes)
            charged = [0]  # the register files of the frames on the stack
            try:
                return self._loop(func, list(args), state, (tracker, charged))
            finally:
                tracker.give(charged[0])
        except TVMError as exc:
            where = state[0]
            assert isinstance(where, DecodedFunction)
            add_note(exc, f"in VM function {where.name!r} at instruction {state[1]}")
            raise
        except (ValueError, TypeError, IndexError, OverflowError) as exc:
            where = state[0]
            assert isinstance(where, DecodedFunction)
            raise InternalError(
                f"VM function {where.name!r} instruction {state[1]} failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc

    def _loop(
        self,
        func: DecodedFunction,
        args: list[object],
        state: list[object],
        held: tuple[LiveBudget, list[int]] | None,
    ) -> object:
        """Run ``func``; with ``held`` (the live budget and the bytes of the register files it
        charges), every ADT, closure, tensor and register file made counts against it."""
        funcs, consts, kernels, devices = self.functions, self.constants, self.kernels, self.devices
        tracker = None if held is None else held[0]
        if held is not None:
            _take_regs(held, func)
        limits = self.limits
        max_frames, max_steps = limits.max_frames, limits.max_steps
        hook, ihook = self.kernel_hook, self.instruction_hook
        sites, tensor_sites = self.sites, self.tensor_sites
        regs: list[object] = args + [None] * (func.num_registers - len(args))
        code = func.code
        pc = 0
        frames: list[tuple[DecodedFunction, list[object], int, int]] = []
        steps = 0
        while True:
            ins = code[pc]
            o = ins[0]
            if o == op.INVOKE_PACKED:
                steps += len(ins[2])  # the C VM's weights (vm_interp.c): arguments copied
                if max_steps is not None and steps > max_steps:
                    raise InvalidArgumentError(f"invoke ran past its budget of {max_steps} steps")
                call_args: list[NDArray] = []
                for r in ins[2]:
                    v = regs[r]
                    if isinstance(v, NDArray):
                        call_args.append(v)
                    elif isinstance(v, ADT):
                        call_args.extend(_tensor(x, f"a field of register {r}") for x in v.fields)
                    else:
                        raise ArgumentTypeError(
                            f"kernel argument register {r} holds {_kind(v)}, expected a "
                            "tensor or a tuple of tensors"
                        )
                last = regs[ins[2][-1]] if ins[2] else None
                if not (ins[3] == 1 and isinstance(last, NDArray) and 0 in last.shape):
                    site = sites.get(id(ins))
                    if site is None:
                        site = sites[id(ins)] = KernelSite(kernels[ins[1]])
                    fn, fn_args = site.prepare(call_args)
                    if hook is None:
                        fn(*fn_args)
                    else:
                        hook(ins[1], fn, fn_args, call_args)
                pc += 1
            elif o == op.LOAD_CONST:
                regs[ins[2]] = consts[ins[1]]
                pc += 1
            elif o == op.KILL_REGISTER:
                if ihook is not None:
                    ihook.start(ins, regs)
                regs[ins[1]] = None
                if ihook is not None:
                    ihook.stop()
                pc += 1
            elif o == op.ALLOC_STORAGE:
                if ihook is not None:
                    ihook.start(ins, regs)
                _, size_reg, nbytes, alignment, dev, dst, _hint, _shape = ins
                if size_reg >= 0:
                    nbytes = load_scalar_int(regs[size_reg], f"size register {size_reg}")
                regs[dst] = self._alloc(nbytes, alignment, dev)
                if ihook is not None:
                    ihook.stop()
                pc += 1
            elif o == op.ALLOC_TENSOR:
                if ihook is not None:
                    ihook.start(ins, regs)
                _, s, off, shape, dtype, _nbytes, dst = ins
                storage = regs[s]
                if not isinstance(storage, Storage):
                    raise ArgumentTypeError(f"storage register {s} holds {_kind(storage)}")
                offset = load_scalar_int(regs[off], f"offset register {off}")
                regs[dst] = tensor_sites[id(ins)].tensor(storage, offset, shape, dtype)
                if tracker is not None:
                    tracker.hold(regs[dst], TENSOR_BYTES, "AllocTensor")
                if ihook is not None:
                    ihook.stop()
                pc += 1
            elif o == op.ALLOC_TENSOR_REG:
                if ihook is not None:
                    ihook.start(ins, regs)
                _, s, off, shape_reg, dtype, dst = ins
                storage = regs[s]
                if not isinstance(storage, Storage):
                    raise ArgumentTypeError(f"storage register {s} holds {_kind(storage)}")
                offset = load_scalar_int(regs[off], f"offset register {off}")
                shape = _shape_from(regs[shape_reg], f"shape register {shape_reg}")
                regs[dst] = tensor_sites[id(ins)].tensor(storage, offset, shape, dtype)
                if tracker is not None:
                    tracker.hold(regs[dst], TENSOR_BYTES, "AllocTensorReg")
                if ihook is not None:
                    ihook.stop()
                pc += 1
            elif o == op.SHAPE_OF:
                t = _tensor(regs[ins[1]], f"register {ins[1]}")
                regs[ins[2]] = _host_ints(t.shape, "int64", (len(t.shape),))
                if tracker is not None:
                    tracker.hold(regs[ins[2]], TENSOR_BYTES + 8 * len(t.shape), "ShapeOf")
                pc += 1
            elif o == op.RET:
                value = regs[ins[1]]
                if not frames:
                    return value
                if held is not None:
                    held[0].give(cell_bytes(func.num_registers))
                    held[1][0] -= cell_bytes(func.num_registers)
                func, regs, pc, dst = frames.pop()
                code = func.code
                regs[dst] = value
                state[0], state[1] = func, pc
            elif o == op.INVOKE or o == op.INVOKE_CLOSURE:
                if o == op.INVOKE:
                    callee = funcs[ins[1]]
                    call = [regs[r] for r in ins[2]]
                else:
                    clo = regs[ins[1]]
                    if not isinstance(clo, VMClosure):
                        raise ArgumentTypeError(f"closure register {ins[1]} holds {_kind(clo)}")
                    callee = funcs[clo.func_index]
                    call = [*clo.free_vars, *(regs[r] for r in ins[2])]
                    if len(call) != len(callee.params):
                        raise InvalidArgumentError(
                            f"closure of {callee.name!r} called with {len(call)} values, it "
                            f"takes {len(callee.params)}"
                        )
                if len(frames) >= max_frames:
                    raise InvalidArgumentError(
                        f"the call stack is deeper than {max_frames} frames (endless "
                        "recursion? raise TVMRT_VM_MAX_FRAMES for a deeper one)"
                    )
                steps += max(1, callee.num_registers)  # a call costs its register file
                if max_steps is not None and steps > max_steps:
                    raise InvalidArgumentError(f"invoke ran past its budget of {max_steps} steps")
                if held is not None:
                    _take_regs(held, callee)
                frames.append((func, regs, pc + 1, ins[3]))
                func, code, pc = callee, callee.code, 0
                regs = call + [None] * (callee.num_registers - len(call))
                state[0], state[1] = func, 0
            elif o == op.MOVE:
                regs[ins[2]] = regs[ins[1]]
                pc += 1
            elif o == op.IF:
                a = _int32(load_scalar_int(regs[ins[1]], f"test register {ins[1]}"))
                b = _int32(load_scalar_int(regs[ins[2]], f"target register {ins[2]}"))
                jump = ins[3] if a == b else ins[4]
                pc += jump
                if jump < 0:
                    steps += 1
                    if max_steps is not None and steps > max_steps:
                        raise InvalidArgumentError(
                            f"invoke ran past its budget of {max_steps} steps"
                        )
            elif o == op.GOTO:
                pc += ins[1]
                if ins[1] < 0:
                    steps += 1
                    if max_steps is not None and steps > max_steps:
                        raise InvalidArgumentError(
                            f"invoke ran past its budget of {max_steps} steps"
                        )
            elif o == op.ALLOC_ADT:
                steps += len(ins[2])
                if max_steps is not None and steps > max_steps:
                    raise InvalidArgumentError(f"invoke ran past its budget of {max_steps} steps")
                regs[ins[3]] = ADT(ins[1], [regs[r] for r in ins[2]])
                if tracker is not None:
                    tracker.hold(regs[ins[3]], cell_bytes(len(ins[2])), "AllocADT")
                pc += 1
            elif o == op.GET_FIELD:
                obj = regs[ins[1]]
                if not isinstance(obj, ADT):
                    raise ArgumentTypeError(
                        f"register {ins[1]} holds {_kind(obj)}, expected an ADT"
                    )
                if ins[2] >= len(obj.fields):
                    raise ArrayError(f"field {ins[2]} of an ADT with {len(obj.fields)} fields")
                regs[ins[3]] = obj.fields[ins[2]]
                pc += 1
            elif o == op.GET_TAG:
                obj = regs[ins[1]]
                if not isinstance(obj, ADT):
                    raise ArgumentTypeError(
                        f"register {ins[1]} holds {_kind(obj)}, expected an ADT"
                    )
                regs[ins[2]] = _host_ints([obj.tag], "int32", (1,))
                if tracker is not None:
                    tracker.hold(regs[ins[2]], TENSOR_BYTES + 4, "GetTag")
                pc += 1
            elif o == op.LOAD_CONSTI:
                regs[ins[2]] = _host_ints([ins[1]], "int64", (1,))
                if tracker is not None:
                    tracker.hold(regs[ins[2]], TENSOR_BYTES + 8, "LoadConsti")
                pc += 1
            elif o == op.ALLOC_CLOSURE:
                steps += len(ins[2])
                if max_steps is not None and steps > max_steps:
                    raise InvalidArgumentError(f"invoke ran past its budget of {max_steps} steps")
                regs[ins[3]] = VMClosure(ins[1], [regs[r] for r in ins[2]])
                if tracker is not None:
                    tracker.hold(regs[ins[3]], cell_bytes(len(ins[2])), "AllocClosure")
                pc += 1
            elif o == op.RESHAPE_TENSOR:
                if ihook is not None:
                    ihook.start(ins, regs)
                t = _tensor(regs[ins[1]], f"register {ins[1]}")
                shape_arr = _tensor(regs[ins[2]], f"shape register {ins[2]}")
                if shape_arr.dtype != "int64":
                    raise ArgumentTypeError(
                        f"shape register {ins[2]} is {shape_arr.dtype}, expected int64"
                    )
                regs[ins[3]] = t._create_view(_shape_from(shape_arr, f"shape register {ins[2]}"))
                if tracker is not None:
                    tracker.hold(regs[ins[3]], TENSOR_BYTES, "ReshapeTensor")
                if ihook is not None:
                    ihook.stop()
                pc += 1
            elif o == op.DEVICE_COPY:
                if ihook is not None:
                    ihook.start(ins, regs)
                t = _tensor(regs[ins[1]], f"register {ins[1]}")
                src, to = devices[ins[2]], devices[ins[3]]
                if t.device != src:
                    raise ArrayError(f"DeviceCopy expects a tensor on {src}, it is on {t.device}")
                regs[ins[4]] = t.copyto(to)
                if tracker is not None:
                    tracker.hold(regs[ins[4]], TENSOR_BYTES + t.nbytes, "DeviceCopy")
                if ihook is not None:
                    ihook.stop()
                pc += 1
            elif o == op.FATAL:
                raise TVMError("VM encountered fatal error")
            else:  # decode only lets the 21 opcodes through
                raise InternalError(f"opcode {o} reached the run loop")
            state[1] = pc

    def _tracker(self, budget: int) -> LiveBudget:
        """The live budget of ``budget`` bytes (a new one when the limit changed)."""
        if self.budget is None or self.budget.limit != budget:
            self.budget = LiveBudget(budget, self.pools)
        return self.budget

    def _alloc(self, nbytes: int, alignment: int, dev: int) -> Storage:
        limit = self.limits.max_alloc_bytes
        if nbytes < 0:
            raise ArrayError(f"AllocStorage of {nbytes} bytes")
        if limit is not None and nbytes > limit:
            raise DeviceOutOfMemoryError(
                f"AllocStorage of {nbytes} bytes is over the limit of {limit} bytes "
                "(TVMRT_VM_MAX_ALLOC_BYTES)"
            )
        budget = self.limits.max_live_bytes
        tracker = None if budget is None else self._tracker(budget)
        if tracker is not None:
            tracker.charge(nbytes)
        pool = self.pools[dev]
        if pool is not None:
            storage = pool.alloc(nbytes, alignment)
        else:
            storage = self.apis[dev].alloc(self.devices[dev], nbytes, alignment)
        return storage if budget is None or tracker is None else tracker.track(storage, nbytes)
