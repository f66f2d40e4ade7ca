"""Hostile executables: each is refused at load or stopped at run with a clear tvmrt error.

The bad inputs are built here: real ``code.ro`` files cut short or with one field
changed, and small hand-written executables (written with TVM's own layout and hashes)
that loop forever, recurse forever, allocate terabytes or misuse registers.
"""

from __future__ import annotations

import os
import struct

import pytest

import tvmrt.runtime as rt
from tvmrt.error import (
    ArgumentTypeError,
    ArrayError,
    DeviceOutOfMemoryError,
    InvalidArgumentError,
    ModuleLoadError,
    TVMError,
)
from tvmrt.runtime import vm as vm_rt
from tvmrt.runtime.container import ADT
from tvmrt.runtime.tensor_record import MAX_NDIM
from tvmrt.runtime.vm import opcodes as op
from tvmrt.runtime.vm.format import ExecutableData, VMFunction, read_executable, write_executable
from tvmrt.runtime.vm.interpreter import VMClosure


def _exe(code, *, registers=4, params=(), constants=(), others=()):
    """An executable whose ``main`` is ``code`` (plus ``others``: (name, params, code))."""
    funcs = [VMFunction("main", registers, list(params), [0] * len(params), list(code))]
    funcs += [VMFunction(n, registers, list(p), [0] * len(p), list(c)) for n, p, c in others]
    return ExecutableData(
        "0.16.dev0",
        [(1, 0, "")],
        0,
        [f.name for f in funcs],
        [rt.array(c) for c in constants],
        [0] * len(constants),
        [],
        {},
        funcs,
    )


def _load(data):
    raw = data if isinstance(data, bytes) else write_executable(data)
    return vm_rt.Executable.load_exec(raw, rt.PyModule({}))


def _vm(data):
    return vm_rt.VirtualMachine(_load(data), rt.cpu())


def test_every_truncation_of_a_real_executable_is_refused(artifacts):
    code = (artifacts / "relayvm" / "adt-closure" / "code.ro").read_bytes()
    step = int(os.environ.get("TVMRT_VM_CUT_STEP", "5"))  # 1: every prefix (about 8 s)
    for n in range(0, len(code), step):
        with pytest.raises(ModuleLoadError):
            read_executable(code[:n], "cut")


def test_a_changed_field_fails_the_instruction_hash(artifacts):
    code = bytearray((artifacts / "relayvm" / "tuple-io" / "code.ro").read_bytes())
    exe = read_executable(code, "real")
    tail = struct.pack("<q", exe.functions[0].instructions[-1][1])  # Ret's register, last
    at = code.rindex(tail)
    code[at] ^= 1
    with pytest.raises(ModuleLoadError, match=r"instruction 65 of function 'main' \(Ret\): hash"):
        read_executable(bytes(code), "edited")


@pytest.mark.parametrize(
    ("version", "ok"), [("0.16.dev0", True), ("0.19.0", True), ("0.14.0", True), ("0.13.0", False)]
)
def test_versions_with_this_layout_load_and_others_are_refused_by_name(version, ok):
    data = _exe([(op.LOAD_CONSTI, 7, 0), (op.RET, 0)])
    data.version = version
    if ok:
        assert _vm(data).run().numpy().tolist() == [7]
    else:
        with pytest.raises(ModuleLoadError, match=f"TVM '{version}'"):
            _load(data)


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ([(op.MOVE, 0, 4), (op.RET, 0)], "destination register 4 is out of range"),
        ([(op.LOAD_CONST, 3, 0, 0), (op.RET, 0)], "constant index 3 is out of range"),
        ([(op.LOAD_CONST, 0, 5, 0), (op.RET, 0)], "virtual device index 5"),
        ([(op.GOTO, 7)], "jump offset 7 lands on instruction 7"),
        ([(op.GOTO, 0)], "jump offset 0"),
        ([(op.INVOKE, 9, 0, 0), (op.RET, 0)], "function index 9 is out of range"),
        ([(op.INVOKE_PACKED, 0, 1, 1, 0), (op.RET, 0)], "kernel index 0 is out of range"),
        ([(op.LOAD_CONSTI, 1, 0)], "last instruction must be Ret, Goto, If or Fatal"),
        ([(op.ALLOC_STORAGE, 0, 64, 2, 32, 1, 0, 1, 1, 1 << 50), (op.RET, 1)], "needs"),
        ([(op.ALLOC_STORAGE, 0, 63, 2, 32, 1, 0, 0, 1), (op.RET, 1)], "alignment 63"),
        ([(op.ALLOC_TENSOR, 0, 0, 2, 32, 1, 1, 1, -2), (op.RET, 1)], "negative dimension"),
        ([(op.ALLOC_TENSOR, 0, 0, 9, 32, 1, 0, 1), (op.RET, 1)], "dtype"),
        ([(op.ALLOC_ADT, 1 << 40, 0, 0), (op.RET, 0)], "does not fit an int32"),
        (
            [
                (op.ALLOC_TENSOR, 0, 0, 2, 32, 1, MAX_NDIM + 1, 1, *[1] * (MAX_NDIM + 1)),
                (op.RET, 1),
            ],
            "dimensions",
        ),
    ],
)
def test_bad_operands_are_refused_at_load_naming_the_instruction(code, message):
    data = _exe(code, constants=[0])
    with pytest.raises(ModuleLoadError, match="function 'main', instruction") as info:
        _load(data)
    assert message in str(info.value)


def test_a_wrong_field_count_is_refused():
    raw = bytearray(write_executable(_exe([(op.RET, 0)])))
    # rewrite Ret (2 words after hash+opcode=1 field) as Move with the same single field
    ret = struct.pack("<q", op.RET) + struct.pack("<q", 0)
    at = raw.rindex(ret)
    raw[at : at + 8] = struct.pack("<q", op.MOVE)
    with pytest.raises(ModuleLoadError, match=r"\(Move\) has 1 fields, expected 2"):
        read_executable(bytes(raw), "edited")


def test_an_endless_loop_stops_at_the_step_budget(monkeypatch):
    monkeypatch.setenv("TVMRT_VM_MAX_STEPS", "10000")
    vm = _vm(_exe([(op.LOAD_CONSTI, 1, 0), (op.GOTO, -1)]))
    with pytest.raises(InvalidArgumentError, match="budget of 10000 steps"):
        vm.run()


def test_the_step_budget_is_on_by_default_and_zero_lifts_it(monkeypatch):
    monkeypatch.delenv("TVMRT_VM_MAX_STEPS", raising=False)
    assert vm_rt.VMLimits().max_steps == 10_000_000
    monkeypatch.setenv("TVMRT_VM_MAX_STEPS", "0")
    assert vm_rt.VMLimits().max_steps is None


def test_endless_recursion_stops_at_the_frame_limit(monkeypatch):
    monkeypatch.setenv("TVMRT_VM_MAX_FRAMES", "5000")
    vm = _vm(_exe([(op.INVOKE, 0, 0, 0), (op.RET, 0)]))
    with pytest.raises(InvalidArgumentError, match="deeper than 5000 frames"):
        vm.run()


def test_a_terabyte_allocation_is_an_error_not_a_death():
    # AllocStorage of a size read from a 0-d int64 register holding 2**52 bytes
    code = [
        (op.LOAD_CONST, 0, 0, 0),
        (op.ALLOC_STORAGE, 0, 64, 2, 32, 1, 0, 0, 1),
        (op.RET, 1),
    ]
    import numpy as np

    vm = _vm(_exe(code, constants=[np.array(1 << 52, "int64")]))
    with pytest.raises(DeviceOutOfMemoryError):
        vm.run()


def test_the_allocation_limit_is_enforced(monkeypatch):
    monkeypatch.setenv("TVMRT_VM_MAX_ALLOC_BYTES", "4096")
    code = [(op.ALLOC_STORAGE, 0, 64, 2, 32, 1, 0, 1, 1, 2048), (op.RET, 1)]
    with pytest.raises(DeviceOutOfMemoryError, match="over the limit of 4096 bytes"):
        _vm(_exe(code)).run()


@pytest.mark.parametrize(
    ("code", "error", "message"),
    [
        ([(op.ALLOC_TENSOR, 0, 1, 2, 32, 1, 0, 2), (op.RET, 2)], ArgumentTypeError, "storage"),
        ([(op.GET_FIELD, 0, 0, 1), (op.RET, 1)], ArgumentTypeError, "expected an ADT"),
        ([(op.ALLOC_ADT, 0, 0, 0), (op.GET_FIELD, 0, 3, 1), (op.RET, 1)], TVMError, "field 3"),
        ([(op.INVOKE_CLOSURE, 0, 0, 1), (op.RET, 1)], ArgumentTypeError, "closure register"),
        ([(op.FATAL,)], TVMError, "VM encountered fatal error"),
        ([(op.SHAPE_OF, 2, 1), (op.RET, 1)], ArgumentTypeError, "must hold a tensor"),
    ],
)
def test_misused_registers_fail_with_the_instruction_named(code, error, message):
    vm = _vm(_exe(code))
    with pytest.raises(error, match=message) as info:
        vm.run()
    assert any("in VM function 'main' at instruction" in n for n in info.value.__notes__)


def test_a_closure_called_with_the_wrong_arity_is_refused():
    code = [(op.ALLOC_CLOSURE, 1, 0, 0), (op.INVOKE_CLOSURE, 0, 0, 1), (op.RET, 1)]
    others = [("f", ["a"], [(op.RET, 0)])]
    with pytest.raises(InvalidArgumentError, match="called with 0 values, it takes 1"):
        _vm(_exe(code, others=others)).run()


def test_a_tensor_too_large_to_count_is_named_by_its_real_size():
    # the words the C VM gives too (tests/native/test_c_vm_hostile.py)
    import numpy as np

    code = [
        (op.LOAD_CONST, 0, 0, 1),
        (op.LOAD_CONSTI, 0, 2),
        (op.ALLOC_STORAGE, 0, 64, 2, 32, 1, 0, 1, 0, 64),
        (op.ALLOC_TENSOR_REG, 0, 2, 1, 2, 32, 1, 3),
        (op.RET, 3),
    ]
    vm = _vm(_exe(code, constants=[np.array([1 << 40, 1 << 40], "int64")]))
    want = (
        "array of shape (1099511627776, 1099511627776) and dtype float32 at byte offset 0 "
        f"needs {(1 << 80) * 4} bytes, but the storage has 256"
    )
    with pytest.raises(ArrayError) as info:
        vm.run()
    assert want in str(info.value)


def test_init_while_another_thread_invokes_is_refused(monkeypatch):
    # the C VM's rule and words (tests/native/test_c_vm_hostile.py)
    import threading

    import numpy as np

    monkeypatch.setenv("TVMRT_VM_MAX_STEPS", "2000000")
    code = [(op.LOAD_CONST, 0, 0, 1), (op.GOTO, -1), (op.RET, 1)]
    vm = _vm(_exe(code, constants=[np.ones(4, "float32")]))
    module = vm.module
    interp = module.interp
    started = threading.Event()
    run_loop = interp.run

    def run_noting(index, args):
        started.set()
        return run_loop(index, args)

    interp.run = run_noting
    outcome = {}

    def invoke():
        try:
            vm.run()
        except TVMError as exc:
            outcome["invoke"] = str(exc)

    thread = threading.Thread(target=invoke)
    thread.start()
    started.wait(10)
    with pytest.raises(TVMError, match=r"VirtualMachine\.init: this VirtualMachine is already"):
        module.init(1, 0, 2)
    with pytest.raises(TVMError, match=r"VirtualMachine\.set_input: this VirtualMachine is"):
        module.bind_inputs("main", [], every=True)
    thread.join(60)
    assert "ran past its budget of 2000000 steps" in outcome["invoke"]
    module.init(1, 0, 2)  # free again


def test_a_closure_in_an_input_tuple_is_refused():
    # the C VM's words: a closure belongs to the executable that made it
    vm = _vm(_exe([(op.RET, 0)], params=["p"]))
    with pytest.raises(ArgumentTypeError, match="input 0 holds a closure \\(a field of an ADT\\)"):
        vm.module.bind_inputs("main", [(0, ADT(0, [VMClosure(0, [])]))], every=True)


@pytest.mark.parametrize("kind", ["call", "adt"])
def test_a_costly_step_weighs_its_cost_under_the_default_budget(monkeypatch, kind):
    # the C VM's weights: a call costs its callee's registers, an AllocADT its fields (each
    # counted 1, ten million of them ran for hours)
    import threading

    monkeypatch.delenv("TVMRT_VM_MAX_STEPS", raising=False)
    if kind == "call":
        data = _exe([(op.INVOKE, 1, 0, 1), (op.GOTO, -1), (op.RET, 1)], registers=2)
        big = [(op.LOAD_CONSTI, 0, 0), (op.RET, 0)]
        data.functions.append(VMFunction("big", 1 << 20, [], [], big))
        data.globals.append("big")
    else:
        adt = (op.ALLOC_ADT, 0, 100_000, 1, *[0] * 100_000)
        data = _exe([adt, (op.GOTO, -1), (op.RET, 1)], registers=2)
    vm = _vm(data)
    outcome = {}

    def run():
        try:
            vm.run()
        except InvalidArgumentError as exc:
            outcome["error"] = str(exc)

    thread = threading.Thread(target=run, daemon=True)  # left behind if it runs for hours
    thread.start()
    thread.join(30)
    assert "ran past its budget of 10000000 steps" in outcome.get("error", "still running")
