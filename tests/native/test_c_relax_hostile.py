"""Hostile Relax VM executables, made here, given to the C runtime's Relax VM plain and
under ASan + UBSan: each must end in a clean error naming what is wrong (or, for a budget,
the budget's error), never a crash, a hang or a sanitizer report.

- every proper prefix of real payloads of each era, through the reader itself
  (tests/native/c/relax_read.c, tvmrt_rx_read);
- real payloads edited field by field (counts, tags, registers, indexes, jumps, opcodes),
  and programs assembled from scratch (tests/support/relax_asm.py), put in place of the
  executable of a copy of a fixture's model.so (its module blob's lengths adjusted) and run
  through TVM's C API by tests/native/c/run_relax.c: load-time checks, then the run-time
  budgets (steps, frames, live bytes) against loops, recursion, huge register files and
  10^6-deep tuples; and a closure of one VM given to another (relax_checks.c).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from tests.native.conftest import NativeBuild
from tests.native.test_c_relax import RelaxRun, relax_folder, relax_runs, write_spec

import support.relax_asm as ra
from support.relax_asm import VM_REG, VOID_REG, call, const, func, goto, if_, imm, reg, ret

Compile = Callable[[NativeBuild, str, bool], Path]
# the eras' containers: __tvm_dev_mblob (0.19), 0.21's __tvm_ffi_library_bin, 0.27's
# __tvm_ffi__library_bin (V2 magic, memory scopes)
ERAS = ("019", "021", "027")
HOST = "mlp_dyn"  # the fixture whose model.so carries crafted payloads (6 KB of room)


def _payload(era: str, model: str = HOST) -> ra.Payload:
    _, data = ra.payload_of(relax_folder(era, model) / "model.so")
    return ra.read_payload(data, ra.ERA_OF_FOLDER[f"relax{era}"])


def _spliced(era: str, payload: bytes, work: Path, name: str = "model") -> Path:
    """A copy of the era's host model.so with `payload` as its executable."""
    so = (relax_folder(era, HOST) / "model.so").read_bytes()
    out = work / name / "model.so"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(ra.splice(so, ra.find_payload(so), payload))
    return out.parent


def _run(
    native: NativeBuild,
    compile_c: Compile,
    folder: Path,
    inputs: list[np.ndarray],
    work: Path,
    env: dict[str, str] | None = None,
) -> tuple[int, str]:
    """run_relax (mode call) on folder/model.so with `inputs`: exit code, stdout + stderr."""
    exe = compile_c(native, "run_relax", False)
    spec = write_spec([(folder, [RelaxRun("run0", inputs, [], "tensor", "")])], work)
    proc = native.run_env(exe, {**native.env, **(env or {})}, "call", spec, work, timeout=300)
    out = proc.stdout + proc.stderr
    assert "AddressSanitizer" not in out, out
    assert "runtime error" not in out, out
    assert "LeakSanitizer" not in out, out
    return proc.returncode, out


def _refused_at_load(native: NativeBuild, compile_c: Compile, folder: Path, work: Path) -> str:
    rc, out = _run(native, compile_c, folder, [], work)
    assert rc == 3, out  # refused, everything freed
    assert out.startswith("TVMModLoadFromFile failed: "), out
    return out


# ---------------------------------------------------------------------------------------
# the reader: every prefix


@pytest.mark.parametrize(
    ("era", "model"), [(e, HOST) for e in ERAS] + [("019", "onnx_cnn"), ("027", "onnx_cnn")]
)
def test_every_prefix_of_a_payload_is_refused_naming_the_field(
    native: NativeBuild, compile_c: Compile, tmp_path: Path, era: str, model: str
) -> None:
    # onnx_cnn: its weights are tensor constants (params-format records) in the pool
    site, data = ra.payload_of(relax_folder(era, model) / "model.so")
    (tmp_path / "payload.bin").write_bytes(data)
    exe = compile_c(native, "relax_read", True)
    proc = native.run(exe, str(site.era), tmp_path / "payload.bin", timeout=300)
    assert proc.stdout.startswith("ok: "), proc.stdout + proc.stderr
    proc = native.run(exe, str(site.era), tmp_path / "payload.bin", "prefixes", timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == len(data)
    boundaries = set(ra.read_payload(data, site.era).boundaries)
    for n, line in enumerate(lines):
        cut, message = line.split(": ", 1)
        assert int(cut) == n
        assert message.startswith(("ModuleLoadError: ", "ParamsFormatError: ")), line
        assert "relax.Executable" in message, line  # names the executable
        assert "byte offset" in message, line  # and where
        if n in boundaries:  # a cut between two fields: the next one is missing
            assert "truncated: " in message or "more than the" in message, line


def test_bytes_after_the_code_are_refused(
    native: NativeBuild, compile_c: Compile, tmp_path: Path
) -> None:
    site, data = ra.payload_of(relax_folder("019", HOST) / "model.so")
    (tmp_path / "payload.bin").write_bytes(data + b"\0")
    exe = compile_c(native, "relax_read", True)
    proc = native.run(exe, str(site.era), tmp_path / "payload.bin")
    assert proc.stdout == (
        "ModuleLoadError: relax.Executable: invalid Relax VM executable: 1 bytes after the code\n"
    )


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("cut", [8, 100, 1000, -8])
def test_a_truncated_payload_in_a_library_is_refused(
    native: NativeBuild, compile_c: Compile, tmp_path: Path, era: str, cut: int
) -> None:
    data = _payload(era).to_bytes()
    out = _refused_at_load(native, compile_c, _spliced(era, data[:cut], tmp_path), tmp_path)
    assert "truncated: " in out or "more than the" in out, out


# ---------------------------------------------------------------------------------------
# real payloads edited: refused at load, naming the function, instruction and field


def _first(
    p: ra.Payload, fn: str, opcode: int, want: Callable[[list[int]], bool] | None = None
) -> int:
    f = p.function(fn)
    for pc in range(f.start, f.end):
        ins = p.instruction(pc)
        if ins[0] == opcode and (want is None or want(ins)):
            return pc
    raise LookupError(f"no such instruction in {fn}")


def _set_count(name: str, value: int) -> Callable[[ra.Payload, bytearray], None]:
    def edit(p: ra.Payload, data: bytearray) -> None:
        data[p.fields[name] : p.fields[name] + 8] = value.to_bytes(8, "little")

    return edit


def _word(fn: str, opcode: int, k: int, value: Callable[[ra.Payload], int], want=None):  # type: ignore[no-untyped-def]
    def edit(p: ra.Payload) -> None:
        p.set_word(_first(p, fn, opcode, want), k, value(p))

    return edit


def _tag(tag: int) -> Callable[[ra.Payload], None]:
    def edit(p: ra.Payload) -> None:
        p.constants[0] = ra.Constant(tag, p.constants[0].raw)

    return edit


def _func_field(fn: str, **values: int) -> Callable[[ra.Payload], None]:
    def edit(p: ra.Payload) -> None:
        for key, value in values.items():
            setattr(p.function(fn), key, value)

    return edit


def _has_const(ins: list[int]) -> bool:
    return any(w >> 56 == 2 for w in ins[4:])


def _const_past_pool(p: ra.Payload) -> None:
    pc = _first(p, "main", ra.OP_CALL, _has_const)
    ins = p.instruction(pc)
    k = next(i for i, w in enumerate(ins) if i >= 4 and w >> 56 == 2)
    p.set_word(pc, k, const(len(p.constants)))


def _reg_arg_past_file(p: ra.Payload) -> None:
    pc = _first(p, "main", ra.OP_CALL, lambda ins: any(w >> 56 == 0 for w in ins[4:]))
    ins = p.instruction(pc)
    k = next(i for i, w in enumerate(ins) if i >= 4 and w >> 56 == 0)
    p.set_word(pc, k, reg(p.function("main").num_regs))


def _offsets_decrease(p: ra.Payload) -> None:
    f = p.function("main")
    p.offsets[f.start + 1] = p.offsets[f.start]


def _main_regs(p: ra.Payload) -> int:
    return p.function("main").num_regs


# name -> (era's model (None: the host), edit of the parsed payload, what the error says)
EDITS: dict[str, tuple[str | None, Callable[[ra.Payload], None], str]] = {
    "call-destination-past-the-register-file": (
        None,
        _word("main", ra.OP_CALL, 1, _main_regs),
        "function 'main', instruction 0: Call writes no register",
    ),
    "call-argument-past-the-register-file": (None, _reg_arg_past_file, "(kind 0, value "),
    "call-of-a-function-past-the-table": (
        None,
        _word("main", ra.OP_CALL, 2, lambda p: len(p.functions)),
        "Call of function ",
    ),
    "negative-nargs": (None, _word("main", ra.OP_CALL, 3, lambda p: -1), "Call has -1 arguments"),
    "nargs-past-the-instruction": (
        None,
        _word("main", ra.OP_CALL, 3, lambda p: 1 << 40),
        "Call has 1099511627776 arguments in",
    ),
    "constant-past-the-pool": (None, _const_past_pool, "(kind 2, value "),
    "argument-of-kind-7": (
        None,
        _word("main", ra.OP_CALL, 4, lambda p: 7 << 56, lambda ins: ins[3] > 0),
        "(kind 7, value 0) names nothing",
    ),
    "ret-past-the-register-file": (
        None,
        _word("main", ra.OP_RET, 1, _main_regs),
        "Ret names no register",
    ),
    "goto-outside-its-function": (
        "control",
        _word("main", ra.OP_GOTO, 1, lambda p: 1000),
        "Goto jumps outside its function",
    ),
    "goto-onto-itself": (
        "control",
        _word("main", ra.OP_GOTO, 1, lambda p: 0),
        "Goto jumps outside its function (or onto itself)",
    ),
    "goto-before-its-function": (
        "control",
        _word("main", ra.OP_GOTO, 1, lambda p: -(1 << 40)),
        "Goto jumps outside its function",
    ),
    "if-false-offset-1": (
        "control",
        _word("main", ra.OP_IF, 2, lambda p: 1),
        "If jumps outside its function",
    ),
    "if-false-offset-0": (
        "control",
        _word("main", ra.OP_IF, 2, lambda p: 0),
        "If jumps outside its function",
    ),
    "if-false-offset-negative": (
        "control",
        _word("main", ra.OP_IF, 2, lambda p: -3),
        "If jumps outside its function",
    ),
    "if-past-its-function": (
        "control",
        _word("main", ra.OP_IF, 2, lambda p: 1000),
        "If jumps outside its function",
    ),
    "if-condition-past-the-register-file": (
        "control",
        _word("main", ra.OP_IF, 1, lambda p: 1 << 20),
        "If names no register",
    ),
    "opcode-9": (
        None,
        _word("main", ra.OP_CALL, 0, lambda p: 9),
        "opcode 9 is not Call (1), Ret (2), Goto (3) or If (4)",
    ),
    "offsets-not-increasing": (
        None,
        _offsets_decrease,
        "its offset is outside the code or not increasing",
    ),
    "function-kind-5": (None, _func_field("main", kind=5), "has kind 5; expected 0 (packed)"),
    "more-arguments-than-registers": (
        None,
        _func_field("main", num_regs=2),
        "function 'main' takes 5 arguments in 2 registers",
    ),
    "register-file-past-2^20": (
        None,
        _func_field("main", num_regs=(1 << 20) + 1),
        "in 1048577 registers (at most 4096 arguments and 1048576 registers)",
    ),
    "negative-arity": (None, _func_field("main", num_args=-1), "takes -1 arguments"),
    "parameter-names-not-the-arity": (
        None,
        _func_field("main", num_args=4),
        "function 'main' takes 4 arguments but names 5 parameters",
    ),
    "function-past-the-code": (
        None,
        _func_field("main", end=1 << 30),
        "function 'main' spans instructions",
    ),
    "function-before-the-code": (
        None,
        _func_field("main", start=-1),
        "function 'main' spans instructions -1 to",
    ),
    "empty-function": (None, _func_field("main", end=0, start=0), "spans instructions 0 to 0"),
    "unknown-magic": (None, lambda p: setattr(p, "magic", 0x1234), "not a Relax VM executable"),
}
EDIT_CASES = [(era, name) for era in ERAS for name in EDITS]


@pytest.mark.parametrize(("era", "name"), EDIT_CASES, ids=[f"{e}-{n}" for e, n in EDIT_CASES])
def test_an_edited_executable_is_refused_at_load(
    native: NativeBuild, compile_c: Compile, tmp_path: Path, era: str, name: str
) -> None:
    model, edit, want = EDITS[name]
    payload = _payload(era, model or HOST)
    edit(payload)
    folder = _spliced(era, payload.to_bytes(), tmp_path)
    out = _refused_at_load(native, compile_c, folder, tmp_path)
    kind = "relax.Executable" if era == "019" else "relax.VMExecutable"
    assert f"ModuleLoadError: {kind}: " in out, out
    assert want in out, out


# counts in the payload set past what its bytes can hold
COUNTS = {
    "functions": [1 << 40, (1 << 20) + 1, (1 << 64) - 1],
    "function 0 parameters": [1 << 40, 1 << 62],
    "constants": [1 << 40, (1 << 24) + 1],
    "instruction offsets": [1 << 40],
    "instruction data": [1 << 61],
}
COUNT_CASES = [(e, f, v) for e in ERAS for f, vs in COUNTS.items() for v in vs]
COUNT_CASES += [("027", "scopes", 1 << 40)]


@pytest.mark.parametrize(("era", "name", "value"), COUNT_CASES)
def test_a_huge_count_is_refused_at_load(
    native: NativeBuild, compile_c: Compile, tmp_path: Path, era: str, name: str, value: int
) -> None:
    payload = _payload(era)
    data = bytearray(payload.to_bytes())
    _set_count(name, value)(payload, data)
    out = _refused_at_load(native, compile_c, _spliced(era, bytes(data), tmp_path), tmp_path)
    assert f"is {value}, more than the " in out or "more than 2^" in out, out
    assert "bytes left can hold at byte offset" in out or "more than 2^" in out, out


@pytest.mark.parametrize(
    ("era", "tag", "era_name"),
    [
        ("019", 70, "TVM <= 0.20"),  # a tensor from >= 0.22, in a legacy payload
        ("019", 65, "TVM <= 0.20"),
        ("021", 70, "TVM 0.21"),  # 0.21's tensor is 72
        ("021", 0, "TVM 0.21"),
        ("027", 2, "TVM >= 0.22"),  # a legacy shape in a tvm-ffi payload
        ("027", 72, "TVM >= 0.22"),
    ],
)
def test_a_constant_tag_of_another_era_is_refused(
    native: NativeBuild, compile_c: Compile, tmp_path: Path, era: str, tag: int, era_name: str
) -> None:
    payload = _payload(era)
    _tag(tag)(payload)
    out = _refused_at_load(native, compile_c, _spliced(era, payload.to_bytes(), tmp_path), tmp_path)
    assert f"constant 0 has tag {tag}, which the {era_name} format does not define" in out, out


def test_a_v2_payload_in_a_legacy_library_is_refused(
    native: NativeBuild, compile_c: Compile, tmp_path: Path
) -> None:
    p = ra.Program(ra.LEGACY)  # its memory-scope section (empty) is written after the magic
    m = p.vm_function("main", 0, 1)
    p.body(m, [ret(reg(0))])
    data = p.build(magic=ra.MAGIC_V2).to_bytes()
    out = _refused_at_load(native, compile_c, _spliced("019", data, tmp_path), tmp_path)
    assert (
        "a Relax VM executable of TVM >= 0.23 (magic 0xd225de2f4214151e) in a TVM <= 0.20 " in out
    )


# ---------------------------------------------------------------------------------------
# programs assembled here


def _ends_with_a_call(p: ra.Program) -> None:
    m = p.vm_function("main", 0, 1)
    p.body(m, [call(0, p.packed("vm.builtin.null_value"))])


def _no_code(p: ra.Program) -> None:
    p.vm_function("main", 0, 1)


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize(
    ("program", "want"),
    [
        (_ends_with_a_call, "function 'main', instruction 0: the function ends with a Call"),
        (_no_code, "function 'main' spans instructions 0 to 0 of 0"),
    ],
)
def test_an_assembled_executable_is_refused_at_load(
    native: NativeBuild,
    compile_c: Compile,
    tmp_path: Path,
    era: str,
    program: Callable[[ra.Program], None],
    want: str,
) -> None:
    p = ra.Program(ra.ERA_OF_FOLDER[f"relax{era}"])
    program(p)
    out = _refused_at_load(native, compile_c, _spliced(era, p.to_bytes(), tmp_path), tmp_path)
    assert want in out, out


def _program(era: str, build: Callable[[ra.Program], None]) -> bytes:
    p = ra.Program(ra.ERA_OF_FOLDER[f"relax{era}"])
    build(p)
    return p.to_bytes()


def _endless_loop(p: ra.Program) -> None:  # main(): r0 = null_value(); goto -1
    m = p.vm_function("main", 0, 1)
    p.body(m, [call(0, p.packed("vm.builtin.null_value")), goto(-1)])


def _goto_loop(p: ra.Program) -> None:  # main(): goto +1; goto -1 (no call at all)
    m = p.vm_function("main", 0, 1)
    p.body(m, [goto(1), goto(-1)])


def _if_loop(p: ra.Program) -> None:  # main(): if 1: goto -1 (If's true branch, forever)
    m = p.vm_function("main", 0, 1)
    one = p.constant("int", 1)
    p.body(
        m,
        [
            call(0, p.packed("vm.builtin.read_if_cond"), const(one)),
            if_(reg(0), 2),
            goto(-2),
            ret(reg(0)),
        ],
    )


def _recursion(p: ra.Program) -> None:  # main(x) = main(x)
    m = p.vm_function("main", 1, 2)
    p.body(m, [call(1, m, reg(0)), ret(reg(1))])


def _closure_recursion(p: ra.Program) -> None:  # main(x) = invoke_closure(make_closure(main), x)
    m = p.vm_function("main", 1, 3)
    make, invoke = p.packed("vm.builtin.make_closure"), p.packed("vm.builtin.invoke_closure")
    p.body(m, [call(1, make, func(m)), call(2, invoke, VM_REG, reg(1), reg(0)), ret(reg(2))])


def _tir_dyn_recursion(p: ra.Program) -> None:  # main(x) = call_tir_dyn(main, x, shape ())
    m = p.vm_function("main", 1, 2)
    empty = p.constant("shape", [])
    p.body(
        m,
        [call(1, p.packed("vm.builtin.call_tir_dyn"), func(m), reg(0), const(empty)), ret(reg(1))],
    )


def _huge_frames_in_a_loop(p: ra.Program) -> None:  # main(): big() forever; big has 2^20 regs
    m = p.vm_function("main", 0, 1)
    big = p.vm_function("big", 0, 1 << 20)
    p.body(m, [call(0, big), goto(-1)])
    p.body(big, [ret(reg(0))])


def _big_register_file(p: ra.Program) -> None:  # main() = big(); big has 2^17 regs (2 MiB)
    m = p.vm_function("main", 0, 1)
    big = p.vm_function("big", 0, 1 << 17)
    p.body(m, [call(0, big), ret(reg(0))])
    p.body(big, [ret(reg(0))])


def _tuple_chain(p: ra.Program) -> None:  # main(): t = None; t = (t,) forever
    m = p.vm_function("main", 0, 1)
    null, make = p.packed("vm.builtin.null_value"), p.packed("vm.builtin.make_tuple")
    p.body(m, [call(0, null), call(0, make, reg(0)), goto(-1)])


def _wrong_arity(p: ra.Program) -> None:  # main() = f(1, 2); f takes one argument
    m = p.vm_function("main", 0, 1)
    f = p.vm_function("f", 1, 1, ["x"])
    p.body(m, [call(0, f, imm(1), imm(2)), ret(reg(0))])
    p.body(f, [ret(reg(0))])


def _big_storage(p: ra.Program) -> None:  # main() = alloc_storage(vm, (2 MiB,), 0, uint8)
    m = p.vm_function("main", 0, 1)
    shape = p.constant("shape", [2 << 20])
    u8 = p.constant("dtype", (1, 8, 1))
    alloc = p.packed("vm.builtin.alloc_storage")
    p.body(m, [call(0, alloc, VM_REG, const(shape), imm(0), const(u8)), ret(reg(0))])


STEPS = "the Relax VM ran over its budget of {} steps in one invoke (TVMRT_RELAX_MAX_STEPS"
FRAMES = "the Relax VM is {} calls deep, its limit (TVMRT_RELAX_MAX_FRAMES)"
LIVE = "over its budget of 1048576 bytes (TVMRT_RELAX_MAX_LIVE_BYTES)"
# name -> (program, inputs, env, what main's error says)
RUNS: dict[str, tuple[Callable[[ra.Program], None], int, dict[str, str], str]] = {
    "endless-loop": (_endless_loop, 0, {"TVMRT_RELAX_MAX_STEPS": "1000"}, STEPS.format(1000)),
    "endless-goto-loop": (_goto_loop, 0, {"TVMRT_RELAX_MAX_STEPS": "1000"}, STEPS.format(1000)),
    "endless-if-loop": (_if_loop, 0, {"TVMRT_RELAX_MAX_STEPS": "1000"}, STEPS.format(1000)),
    "endless-loop-default-budget": (_goto_loop, 0, {}, STEPS.format(100000000)),
    "recursion": (_recursion, 1, {}, FRAMES.format(10000)),
    "recursion-10^6-frames": (
        _recursion,
        1,
        {"TVMRT_RELAX_MAX_FRAMES": "1000000"},
        FRAMES.format(1000000),
    ),
    "closure-recursion-10^6-frames": (
        _closure_recursion,
        1,
        {"TVMRT_RELAX_MAX_FRAMES": "1000000"},
        FRAMES.format(1000000),
    ),
    "2^20-registers-in-a-loop": (
        _huge_frames_in_a_loop,
        0,
        {"TVMRT_RELAX_MAX_STEPS": "10000000"},
        STEPS.format(10000000),
    ),
    "2^20-registers-in-a-loop-default-budget": (
        _huge_frames_in_a_loop,
        0,
        {},
        STEPS.format(100000000),
    ),
    "a-register-file-over-the-live-budget": (
        _big_register_file,
        0,
        {"TVMRT_RELAX_MAX_LIVE_BYTES": "1048576"},
        "DeviceOutOfMemoryError: a register file of 2097152 bytes: the Relax VM would hold",
    ),
    "a-storage-over-the-live-budget": (
        _big_storage,
        0,
        {"TVMRT_RELAX_MAX_LIVE_BYTES": "1048576"},
        "DeviceOutOfMemoryError: alloc_storage of 2097152 bytes: the Relax VM would hold",
    ),
    "a-storage-over-the-storage-limit": (
        _big_storage,
        0,
        {"TVMRT_RELAX_MAX_STORAGE_BYTES": "4096"},
        "alloc_storage of 2097152 bytes is over the limit of 4096 bytes "
        "(TVMRT_RELAX_MAX_STORAGE_BYTES)",
    ),
    "a-10^6-deep-tuple-chain-freed": (
        _tuple_chain,
        0,
        {"TVMRT_RELAX_MAX_STEPS": "3000000"},  # 3 steps a link: 10^6 nested tuples
        STEPS.format(3000000),
    ),
    "a-call-of-the-wrong-arity": (
        _wrong_arity,
        0,
        {},
        "InvalidArgumentError: Invoking function f expects 1 arguments (x), but 2 arguments "
        "were provided.",
    ),
}
RUN_CASES = [(era, name) for era in ("019", "027") for name in RUNS]


@pytest.mark.parametrize(("era", "name"), RUN_CASES, ids=[f"{e}-{n}" for e, n in RUN_CASES])
def test_an_assembled_executable_stops_at_its_budget(
    native: NativeBuild, compile_c: Compile, tmp_path: Path, era: str, name: str
) -> None:
    program, inputs, env, want = RUNS[name]
    folder = _spliced(era, _program(era, program), tmp_path)
    x = [np.zeros(2, "float32")] * inputs
    rc, out = _run(native, compile_c, folder, x, tmp_path, env)
    assert rc == 4, out  # main failed, everything freed
    assert out.startswith("run0-call: main failed: "), out
    assert want in out, out


def test_recursion_through_call_tir_dyn_stops_at_the_nesting_limit(
    native: NativeBuild, compile_c: Compile, tmp_path: Path
) -> None:
    # each call through the builtin nests a run loop on the C stack: 64 are allowed, however
    # many frames the budget would (plain and under ASan's larger frames alike)
    folder = _spliced("019", _program("019", _tir_dyn_recursion), tmp_path)
    env = {"TVMRT_RELAX_MAX_FRAMES": "1000000"}
    rc, out = _run(native, compile_c, folder, [np.zeros(2, "float32")], tmp_path, env)
    assert rc == 4, out
    assert "KernelError: the Relax VM has 64 calls nested on the C stack" in out, out


def test_the_live_bytes_budget_stops_a_real_model(
    native: NativeBuild, compile_c: Compile, tmp_path: Path
) -> None:
    # mlp_dyn at batch 8192: its hidden layer alone is 1 MiB (the inputs are the caller's)
    folder = relax_folder("027", "mlp_dyn")
    (weights := relax_runs(folder)[0].inputs)[0] = np.ones((8192, 16), "float32")
    env = {"TVMRT_RELAX_MAX_LIVE_BYTES": "1048576"}
    rc, out = _run(native, compile_c, folder, weights, tmp_path, env)
    assert rc == 4, out
    assert "run0-call: main failed: DeviceOutOfMemoryError: alloc_storage of " in out, out
    assert LIVE in out, out
    rc, out = _run(native, compile_c, folder, weights, tmp_path)  # no budget: it runs
    assert rc == 0, out


def _closure_maker(p: ra.Program) -> None:  # main() = make_closure(inner); inner() = None
    m = p.vm_function("main", 0, 1)
    inner = p.vm_function("inner", 0, 1)
    p.body(m, [call(0, p.packed("vm.builtin.make_closure"), func(inner)), ret(reg(0))])
    p.body(inner, [call(0, p.packed("vm.builtin.null_value")), ret(reg(0))])


@pytest.mark.parametrize("era", ["019", "027"])
def test_a_closure_of_one_vm_is_refused_by_another(
    native: NativeBuild, compile_c: Compile, tmp_path: Path, era: str
) -> None:
    folder = _spliced(era, _program(era, _closure_maker), tmp_path)
    exe = compile_c(native, "relax_checks", False)
    spec = write_spec([(folder, [RelaxRun("run0", [], [], "", "")])], tmp_path)
    proc = native.run(exe, "closure", spec)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == [
        "invoke_closure on its own VM: ran",
        "invoke_closure on another VM: InvalidArgumentError: closure 'inner' was made by "
        "another Relax VM; a closure runs only on the VM that made it",
    ]


def _printer(p: ra.Program) -> None:  # main(x) = print("", x); x
    m = p.vm_function("main", 1, 1)
    empty = p.constant("str", "")
    p.body(m, [call(VOID_REG, p.packed("relax.run.print"), const(empty), reg(0)), ret(reg(0))])


def test_print_of_a_deep_tuple_argument(
    native: NativeBuild, compile_c: Compile, tmp_path: Path
) -> None:
    folder = _spliced("019", _program("019", _printer), tmp_path)
    exe = compile_c(native, "relax_checks", False)
    run = RelaxRun("run0", [np.zeros(2, "float32")], [], "", "")
    spec = write_spec([(folder, [run])], tmp_path)
    proc = native.run(exe, "chain", spec, "100000", "main")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith(
        "main: InvalidArgumentError: relax.run.print: a tuple nested more than 1000 levels deep"
    ), proc.stdout
    assert proc.stdout.endswith("freed\n")
