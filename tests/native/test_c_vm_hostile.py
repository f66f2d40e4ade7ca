"""Hostile code.ro files, made here from the relayvm fixtures, given to the C runtime's Relay
VM through tests/native/c/run_vm.c (runtime.Load_Executable + lib.so), plain and under
ASan + UBSan: each fails with a clear error naming what is wrong, never a crash or a hang.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from tests.native.conftest import NativeBuild
from tests.native.test_c_vm import write_spec

import tvmrt.runtime as rt
from support.relayvm_cases import golden_runs
from tvmrt.runtime.vm import opcodes as op
from tvmrt.runtime.vm.format import ExecutableData, VMFunction, read_executable, write_executable


def _find(exe: ExecutableData, func: str, opcode: int, nth: int = 0) -> int:
    main = next(f for f in exe.functions if f.name == func)
    hits = [pc for pc, ins in enumerate(main.instructions) if ins[0] == opcode]
    return hits[nth]


def _edit(exe: ExecutableData, func: str, pc: int, field: int, value: int) -> None:
    fn = next(f for f in exe.functions if f.name == func)
    ins = list(fn.instructions[pc])
    ins[1 + field] = value
    fn.instructions[pc] = tuple(ins)


def _bad_register(exe: ExecutableData) -> None:
    _edit(exe, "main", _find(exe, "main", op.LOAD_CONST), 2, 1 << 19)


def _jump_out(exe: ExecutableData) -> None:
    _edit(exe, "main", _find(exe, "main", op.GOTO), 0, 1000)


def _huge_static(exe: ExecutableData) -> None:
    fn = next(f for f in exe.functions if f.name == "main")
    pc = next(
        i for i, ins in enumerate(fn.instructions) if ins[0] == op.ALLOC_STORAGE and ins[7] > 0
    )
    _edit(exe, "main", pc, 8, 1 << 61)


def _bad_kernel(exe: ExecutableData) -> None:
    _edit(exe, "main", _find(exe, "main", op.INVOKE_PACKED), 0, 999)


def _endless_loop(exe: ExecutableData) -> None:
    pc = _find(exe, "main", op.GOTO)
    _edit(exe, "main", pc, 0, -1)  # back to the Move before it, forever


def _bad_dtype(exe: ExecutableData) -> None:
    _edit(exe, "main", _find(exe, "main", op.ALLOC_STORAGE), 2, 77)


# name -> (case, edit of the parsed executable or None, env, what the error must say)
HOSTILE: dict[str, tuple[str, Callable[[ExecutableData], None], dict[str, str], str]] = {
    "register-out-of-range": (
        "control-flow",
        _bad_register,
        {},
        "destination register 524288 is out of range",
    ),
    "jump-out-of-range": ("control-flow", _jump_out, {}, "jump offset 1000 lands on instruction"),
    "huge-static-allocation": ("control-flow", _huge_static, {}, "needs more than"),
    "kernel-index": ("cnn-static", _bad_kernel, {}, "kernel index 999 is out of range"),
    "dtype": ("cnn-static", _bad_dtype, {}, "dtype (code=77, bits=32, lanes=1) is invalid"),
    "endless-loop": (
        "control-flow",
        _endless_loop,
        {"TVMRT_VM_MAX_STEPS": "100"},
        "ran past its budget of 100 steps",
    ),
    "live-bytes-over-budget": (
        "cnn-static",
        lambda exe: None,
        {"TVMRT_VM_MAX_LIVE_BYTES": "2000"},
        "over its budget of 2000 bytes",
    ),
    "call-stack-too-deep": (
        "adt-closure",
        lambda exe: None,
        {"TVMRT_VM_MAX_FRAMES": "1"},
        "the call stack is deeper than 1 frames",
    ),
    "allocation-over-limit": (
        "cnn-static",
        lambda exe: None,
        {"TVMRT_VM_MAX_ALLOC_BYTES": "64"},
        "is over the limit of 64 bytes",
    ),
}


def _without_leak_checks(native: NativeBuild, env: dict[str, str]) -> dict[str, str]:
    """``env`` with ASan's leak check off: run_vm exits at the error, holding its handles."""
    if native.variant == "asan":
        env["ASAN_OPTIONS"] = env["ASAN_OPTIONS"].replace("detect_leaks=1", "detect_leaks=0")
    return env


def _run(
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    folder: Path,
    code: bytes,
    work: Path,
    env: dict[str, str],
) -> tuple[int, str]:
    shutil.copy(folder / "lib.so", work / "lib.so")
    (work / "code.ro").write_bytes(code)
    params = {"control-flow": ["x", "n"], "cnn-static": ["data"], "adt-closure": ["a", "b", "c"]}
    params = params[folder.name]
    spec = write_spec(golden_runs(folder, params), work)  # every branch of control-flow
    exe = compile_c(native, "run_vm", False)
    run_env = _without_leak_checks(native, {**native.env, **env})
    proc = native.run_env(exe, run_env, "ro", work, spec, work, timeout=120)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_code_ro_fails_with_a_clear_error(
    artifacts: Path,
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    tmp_path: Path,
    name: str,
) -> None:
    case, edit, env, want = HOSTILE[name]
    folder = artifacts / "relayvm" / case
    exe = read_executable((folder / "code.ro").read_bytes(), "code.ro")
    edit(exe)
    rc, out = _run(native, compile_c, folder, write_executable(exe), tmp_path, env)
    assert rc == 1, out  # an error exit, not a signal
    assert want in out, out
    assert "runtime error" not in out
    assert "AddressSanitizer" not in out


@pytest.mark.parametrize("cut", [0, 7, 40, 1000, -1])
def test_truncated_code_ro_fails_with_a_clear_error(
    artifacts: Path,
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    tmp_path: Path,
    cut: int,
) -> None:
    folder = artifacts / "relayvm" / "cnn-static"
    code = (folder / "code.ro").read_bytes()
    rc, out = _run(native, compile_c, folder, code[:cut], tmp_path, {})
    assert rc == 1, out
    assert "ModuleLoadError: Relay VM executable:" in out, out
    assert any(w in out for w in ("truncated", "bytes left can hold", "magic is 0x")), out


def test_a_wrong_instruction_hash_is_refused(
    artifacts: Path,
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    tmp_path: Path,
) -> None:
    folder = artifacts / "relayvm" / "cnn-static"
    code = bytearray((folder / "code.ro").read_bytes())
    good = write_executable(read_executable(bytes(code), "code.ro"))
    # the last instruction (Ret) starts 8 bytes before its 3 words end: change its register
    bad = bytearray(good)
    bad[-8] ^= 1
    rc, out = _run(native, compile_c, folder, bytes(bad), tmp_path, {})
    assert rc == 1, out
    assert "(Ret): hash mismatch" in out, out


def test_a_closure_in_the_result_is_refused_by_name(
    artifacts: Path,
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    tmp_path: Path,
) -> None:
    # main returns (closure,): reading the ADT's field names what it holds, no crash
    main = VMFunction(
        "main", 2, [], [], [(op.ALLOC_CLOSURE, 1, 0, 0), (op.ALLOC_ADT, 0, 1, 1, 0), (op.RET, 1)]
    )
    f = VMFunction("f", 1, [], [], [(op.LOAD_CONSTI, 1, 0), (op.RET, 0)])
    data = ExecutableData("0.16.dev0", [(1, 0, "")], 0, ["main", "f"], [], [], [], {}, [main, f])
    shutil.copy(artifacts / "relayvm" / "cnn-static" / "lib.so", tmp_path / "lib.so")
    (tmp_path / "code.ro").write_bytes(write_executable(data))
    (tmp_path / "spec.txt").write_text("run one\nend\n", encoding="utf-8")
    exe = compile_c(native, "run_vm", False)
    env = _without_leak_checks(native, dict(native.env))
    proc = native.run_env(exe, env, "ro", tmp_path, tmp_path / "spec.txt", tmp_path, timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "GetADTFields: field 0 holds a closure, expected a tensor or an ADT" in proc.stderr


# -- hostile programs written here (issue: trust the Relay VM) ------------------------------


def _program(main: VMFunction, *others: VMFunction, constants: list | None = None) -> bytes:
    """code.ro of `main` (no parameters) and `others`, on the CPU, with no kernels."""
    funcs = [main, *others]
    consts = list(constants or [])
    data = ExecutableData(
        "0.16.dev0",
        [(1, 0, "")],
        0,
        [f.name for f in funcs],
        consts,
        [0] * len(consts),
        [],
        {},
        funcs,
    )
    return write_executable(data)


def _run_main(
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    artifacts: Path,
    work: Path,
    code: bytes,
    env: dict[str, str],
    timeout: float = 60,
) -> tuple[int, str]:
    """run_vm on `code` (main takes nothing), with cnn-static's lib.so as its library."""
    shutil.copy(artifacts / "relayvm" / "cnn-static" / "lib.so", work / "lib.so")
    (work / "code.ro").write_bytes(code)
    (work / "spec.txt").write_text("run one\nend\n", encoding="utf-8")
    exe = compile_c(native, "run_vm", False)
    run_env = _without_leak_checks(native, {**native.env, **env})
    proc = native.run_env(exe, run_env, "ro", work, work / "spec.txt", work, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr


def _chain(kind: str) -> VMFunction:
    """main: r0 = a nil cell, then forever r0 = a cell holding r0 (an ADT or a closure)."""
    cell = (op.ALLOC_ADT, 1, 1, 0, 0) if kind == "adt" else (op.ALLOC_CLOSURE, 1, 1, 0, 0)
    return VMFunction(
        "main", 1, [], [], [(op.ALLOC_ADT, 0, 0, 0), cell, (op.GOTO, -1), (op.RET, 0)]
    )


# a list of CHAIN_CELLS cells built by a loop (one step per cell) until the step budget
CHAIN_CELLS = int(os.environ.get("TVMRT_TEST_CHAIN_CELLS", "1000000"))


@pytest.mark.parametrize("kind", ["adt", "closure"])
def test_a_long_chain_built_until_the_step_budget_is_freed_without_recursion(
    artifacts: Path,
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    tmp_path: Path,
    kind: str,
) -> None:
    # freeing cell k released cell k-1 from inside its destructor: 10^6 nested calls
    # overflowed the 8 MiB stack (Segmentation fault); the free is a worklist now
    f = VMFunction("f", 1, ["x"], [0], [(op.RET, 0)])
    env = {"TVMRT_VM_MAX_STEPS": str(CHAIN_CELLS)}
    rc, out = _run_main(
        native, compile_c, artifacts, tmp_path, _program(_chain(kind), f), env, timeout=120
    )
    assert rc == 1, out  # the budget's error, not a signal
    assert f"ran past its budget of {CHAIN_CELLS} steps" in out, out
    assert "AddressSanitizer" not in out, out


def test_a_long_chain_of_reshapes_is_freed_without_recursion(
    artifacts: Path,
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    tmp_path: Path,
) -> None:
    # r0 = reshape(r0) in a loop: each view kept the one before alive (its owner), and the
    # last free recursed through them all; a view of a view now holds the memory's owner
    main = VMFunction(
        "main",
        2,
        [],
        [],
        [
            (op.LOAD_CONSTI, 7, 0),
            (op.LOAD_CONSTI, 1, 1),  # [1]: the shape (1,)
            (op.RESHAPE_TENSOR, 0, 1, 0),
            (op.GOTO, -1),
            (op.RET, 0),
        ],
    )
    env = {"TVMRT_VM_MAX_STEPS": str(CHAIN_CELLS)}
    rc, out = _run_main(native, compile_c, artifacts, tmp_path, _program(main), env, timeout=120)
    assert rc == 1, out
    assert f"ran past its budget of {CHAIN_CELLS} steps" in out, out
    assert "AddressSanitizer" not in out, out


def test_a_tensor_too_large_to_count_is_named_by_its_real_size(
    artifacts: Path,
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    tmp_path: Path,
) -> None:
    # AllocTensorReg of shape (2^40, 2^40) float32 over 256 bytes: its size overflows 64 bits,
    # and the error printed a byte count that was never computed (an uninitialised size_t)
    main = VMFunction(
        "main",
        4,
        [],
        [],
        [
            (op.LOAD_CONST, 0, 0, 1),
            (op.LOAD_CONSTI, 0, 2),
            (op.ALLOC_STORAGE, 0, 64, 2, 32, 1, 0, 1, 0, 64),
            (op.ALLOC_TENSOR_REG, 0, 2, 1, 2, 32, 1, 3),
            (op.RET, 3),
        ],
    )
    shape = rt.array(np.array([1 << 40, 1 << 40], "int64"))
    rc, out = _run_main(
        native, compile_c, artifacts, tmp_path, _program(main, constants=[shape]), {}
    )
    assert rc == 1, out
    want = (
        "ArrayError: array of shape (1099511627776, 1099511627776) and dtype float32 at byte "
        f"offset 0 needs {(1 << 80) * 4} bytes, but the storage has 256"
    )
    assert want in out, out


def _vm_hostile(
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    artifacts: Path,
    work: Path,
    mode: str,
    codes: list[bytes],
    env: dict[str, str],
) -> tuple[int, str]:
    """tests/native/c/vm_hostile.c `mode` on `codes` (written as code files in `work`)."""
    lib = work / "lib.so"
    shutil.copy(artifacts / "relayvm" / "cnn-static" / "lib.so", lib)
    paths = []
    for i, code in enumerate(codes):
        paths.append(work / f"code{i}.ro")
        paths[-1].write_bytes(code)
    exe = compile_c(native, "vm_hostile", False)
    run_env = _without_leak_checks(native, {**native.env, **env})
    proc = native.run_env(exe, run_env, mode, *paths, lib, timeout=120)
    return proc.returncode, proc.stdout + proc.stderr


def test_init_while_another_thread_invokes_is_refused(
    artifacts: Path,
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    tmp_path: Path,
) -> None:
    # init freed the constants, kernels and allocator that the other thread's invoke was
    # reading (every init ran; under ASan a heap-use-after-free); it is refused now
    main = VMFunction("main", 2, [], [], [(op.LOAD_CONST, 0, 0, 1), (op.GOTO, -1), (op.RET, 1)])
    code = _program(main, constants=[rt.array(np.ones(4, "float32"))])
    env = {"TVMRT_VM_MAX_STEPS": "3000000"}
    rc, out = _vm_hostile(native, compile_c, artifacts, tmp_path, "busy", [code], env)
    assert rc == 0, out
    assert "invoke: InvalidArgumentError: invoke ran past its budget of 3000000 steps" in out, out
    want = "busy refused: TVMError: VirtualMachine.init: this VirtualMachine is already running"
    assert want in out, out


def test_a_closure_of_another_executable_is_refused_as_an_input(
    artifacts: Path,
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    tmp_path: Path,
) -> None:
    # A's main returns (closure of A's function 1,); B (one function) called it as its own
    # function 1, past the end of its function table
    a_main = VMFunction(
        "main", 2, [], [], [(op.ALLOC_CLOSURE, 1, 0, 0), (op.ALLOC_ADT, 0, 1, 1, 0), (op.RET, 1)]
    )
    f = VMFunction("f", 1, ["x"], [0], [(op.RET, 0)])
    b_main = VMFunction(
        "main",
        3,
        ["p"],
        [0],
        [(op.GET_FIELD, 0, 0, 1), (op.INVOKE_CLOSURE, 1, 1, 2, 0), (op.RET, 2)],
    )
    data = ExecutableData("0.16.dev0", [(1, 0, "")], 0, ["main"], [], [], [], {}, [b_main])
    codes = [_program(a_main, f), write_executable(data)]
    rc, out = _vm_hostile(native, compile_c, artifacts, tmp_path, "cross", codes, {})
    assert rc == 0, out
    want = "cross refused: ArgumentTypeError: input 0 holds a closure (a field of an ADT)"
    assert want in out, out


BIG_REGISTERS = 1 << 20  # the most registers code.ro may give a function


def _costly_loop(kind: str) -> bytes:
    """main loops forever over one costly step: a call of a function of 2^20 registers, or
    an AllocADT of 100000 fields (a few words of code.ro each)."""
    if kind == "call":
        main = VMFunction("main", 2, [], [], [(op.INVOKE, 1, 0, 1), (op.GOTO, -1), (op.RET, 1)])
        big = VMFunction("big", BIG_REGISTERS, [], [], [(op.LOAD_CONSTI, 0, 0), (op.RET, 0)])
        return _program(main, big)
    adt = (op.ALLOC_ADT, 0, 100_000, 1, *[0] * 100_000)
    return _program(VMFunction("main", 2, [], [], [adt, (op.GOTO, -1), (op.RET, 1)]))


@pytest.mark.parametrize("kind", ["call", "adt"])
def test_a_costly_step_weighs_its_cost_under_the_default_budget(
    artifacts: Path,
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    tmp_path: Path,
    kind: str,
) -> None:
    # each step counted 1: ten million calls of 2^20 registers (or copies of 10^5 fields)
    # ran for hours under the default budget; each now costs its registers (its fields)
    env = {"TVMRT_VM_MAX_STEPS": ""}  # the default: ten million
    rc, out = _run_main(native, compile_c, artifacts, tmp_path, _costly_loop(kind), env, timeout=30)
    assert rc == 1, out
    assert "ran past its budget of 10000000 steps (TVMRT_VM_MAX_STEPS)" in out, out


_PEAK_RSS = (
    "import resource, subprocess, sys\n"
    "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
    "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    "sys.stderr.write(done.stdout + done.stderr)\n"
)


def _peak_rss_kib(
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    artifacts: Path,
    work: Path,
    code: bytes,
    env: dict[str, str],
) -> tuple[int, int, str]:
    """run_vm on `code` as _run_main, in a launcher: (exit code, the peak RSS in KiB, output)."""
    shutil.copy(artifacts / "relayvm" / "cnn-static" / "lib.so", work / "lib.so")
    (work / "code.ro").write_bytes(code)
    (work / "spec.txt").write_text("run one\nend\n", encoding="utf-8")
    exe = compile_c(native, "run_vm", False)
    run_env = _without_leak_checks(native, {**native.env, **env})
    args = [sys.executable, "-c", _PEAK_RSS, str(exe), "ro", work, work / "spec.txt", work]
    proc = subprocess.run(
        [str(a) for a in args], env=run_env, capture_output=True, text=True, timeout=120
    )
    rc, kib = map(int, proc.stdout.split())
    return rc, kib, proc.stderr


@pytest.mark.parametrize("kind", ["adt", "closure"])
def test_the_live_bytes_budget_counts_adts_closures_and_registers(
    artifacts: Path,
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    tmp_path: Path,
    kind: str,
) -> None:
    # the budget counted storages only: under 1 MiB, a loop's list of 10^6 cells took
    # run_vm's peak RSS from 14 MiB (idle) to 73 MiB (65 MiB for closures), and the loop ran
    # on to the step budget; now every cell and register file is charged, and the peak is
    # the idle one (11 MiB both, measured here)
    f = VMFunction("f", 1, ["x"], [0], [(op.RET, 0)])
    code = _program(_chain(kind), f)
    budget = 1 << 20
    env = {"TVMRT_VM_MAX_STEPS": str(CHAIN_CELLS), "TVMRT_VM_MAX_LIVE_BYTES": str(budget)}
    rc, peak, out = _peak_rss_kib(native, compile_c, artifacts, tmp_path, code, env)
    assert rc == 1, out
    what = "AllocADT" if kind == "adt" else "AllocClosure"
    assert f"DeviceOutOfMemoryError: {what} of " in out, out
    assert f"over its budget of {budget} bytes (TVMRT_VM_MAX_LIVE_BYTES)" in out, out
    if native.variant == "plain":  # ASan's shadow and quarantine are no measure
        idle_env = {"TVMRT_VM_MAX_STEPS": "1"}  # the same process, stopped at once
        _, idle, _ = _peak_rss_kib(native, compile_c, artifacts, tmp_path, code, idle_env)
        assert peak <= idle + 2 * budget // 1024, (peak, idle)  # the budget, and as much slack


def _tensor_list(kind: str) -> VMFunction:
    """main: r0 = nil, then forever r0 = a cell of (r0, a tensor the instruction makes)."""
    made = {
        "LoadConsti": [(op.LOAD_CONSTI, 7, 1)],
        "ShapeOf": [(op.SHAPE_OF, 2, 1)],
        "GetTag": [(op.GET_TAG, 0, 1)],
        "ReshapeTensor": [(op.RESHAPE_TENSOR, 2, 3, 1)],  # a view: its header only
    }[kind]
    setup = [(op.ALLOC_ADT, 0, 0, 0), (op.LOAD_CONSTI, 7, 2), (op.LOAD_CONSTI, 1, 3)]
    loop = [*made, (op.ALLOC_ADT, 1, 2, 0, 1, 0), (op.GOTO, -(len(made) + 1))]
    return VMFunction("main", 4, [], [], [*setup, *loop, (op.RET, 0)])


@pytest.mark.parametrize("kind", ["LoadConsti", "ShapeOf", "GetTag", "ReshapeTensor"])
def test_the_tensors_instructions_make_count_against_the_live_bytes_budget(
    artifacts: Path,
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    tmp_path: Path,
    kind: str,
) -> None:
    # a list whose cells each hold a fresh small tensor: the cells were charged, the tensors
    # (a header of about 400 bytes, and their data) not, so under an 8 MiB budget run_vm held
    # 4 times the budget before it stopped; now each tensor is charged when it is made
    f = VMFunction("f", 1, ["x"], [0], [(op.RET, 0)])
    code = _program(_tensor_list(kind), f)
    budget = 8 << 20
    env = {"TVMRT_VM_MAX_STEPS": str(CHAIN_CELLS), "TVMRT_VM_MAX_LIVE_BYTES": str(budget)}
    rc, peak, out = _peak_rss_kib(native, compile_c, artifacts, tmp_path, code, env)
    assert rc == 1, out
    assert "DeviceOutOfMemoryError: " in out, out
    assert f"over its budget of {budget} bytes (TVMRT_VM_MAX_LIVE_BYTES)" in out, out
    if native.variant == "plain":
        idle_env = {"TVMRT_VM_MAX_STEPS": "1"}
        _, idle, _ = _peak_rss_kib(native, compile_c, artifacts, tmp_path, code, idle_env)
        assert peak <= idle + 2 * budget // 1024, (peak, idle)


def test_register_files_count_against_the_live_bytes_budget(
    artifacts: Path,
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    tmp_path: Path,
) -> None:
    # main calls itself through a function of 2^17 registers (1 MiB each): the second frame
    # passes a 1 MiB budget
    main = VMFunction("main", 2, [], [], [(op.INVOKE, 1, 0, 1), (op.RET, 1)])
    big = VMFunction("big", 1 << 17, [], [], [(op.INVOKE, 1, 0, 0), (op.RET, 0)])
    env = {"TVMRT_VM_MAX_LIVE_BYTES": str(1 << 20)}
    rc, out = _run_main(native, compile_c, artifacts, tmp_path, _program(main, big), env)
    assert rc == 1, out
    assert "a register file of 131072 registers (function 'big')" in out, out
    assert "over its budget of 1048576 bytes (TVMRT_VM_MAX_LIVE_BYTES)" in out, out
