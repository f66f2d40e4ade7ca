"""What a Relay VM holds at once is bounded (``VMLimits.max_live_bytes``), and a constant's
virtual device is checked at load (issue 31, item 12).

``control-flow`` runs a ``while_loop`` as a recursive closure: every iteration's frame
keeps its tensor alive, so a request's loop count ``n`` times its tensor's bytes is what a
VM without a budget holds (a 262 KB request took a server from 51 MB to 1.1 GB).

The pools' contents are the Python interpreter's (``engine="python"``); on the C VM the
same budget set through ``vm.module.limits`` stops the same request.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import tvmrt.runtime as rt
from tvmrt.error import DeviceOutOfMemoryError, ModuleLoadError
from tvmrt.runtime import vm as vm_rt
from tvmrt.runtime.vm import opcodes as op
from tvmrt.runtime.vm.format import ExecutableData, VMFunction, write_executable

MIB = 1 << 20


def _control_flow(
    artifacts: Path, budget: int | None, engine: str = "python"
) -> vm_rt.VirtualMachine:
    folder = artifacts / "relayvm" / "control-flow"
    lib = rt.load_module(str(folder / "lib.so"))
    exe = vm_rt.Executable.load_exec((folder / "code.ro").read_bytes(), lib)
    vm = vm_rt.VirtualMachine(exe, rt.cpu(), engine=engine)
    assert vm.engine == engine
    vm.module.limits.max_live_bytes = budget
    return vm


def test_a_looping_request_stops_at_the_budget(artifacts: Path) -> None:
    vm = _control_flow(artifacts, 32 * MIB)
    x = np.ones(65536, "float32")  # 256 KiB: 500 iterations would hold about 250 MiB
    tracemalloc.start()
    try:
        with pytest.raises(DeviceOutOfMemoryError, match="over its budget of 33554432 bytes"):
            vm.invoke("main", x, np.array(500, "int32"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 48 * MIB, f"peak {peak / MIB:.0f} MiB"


def test_the_c_vm_stops_a_looping_request_at_the_same_budget(artifacts: Path) -> None:
    vm = _control_flow(artifacts, 32 * MIB, engine="native")
    with pytest.raises(DeviceOutOfMemoryError, match="over its budget of 33554432 bytes"):
        vm.invoke("main", np.ones(65536, "float32"), np.array(500, "int32"))
    golden = dict(np.load(artifacts / "relayvm" / "control-flow" / "golden.npz"))
    out = vm.invoke("main", golden["x__then_n3"], golden["n__then_n3"])  # still usable
    assert np.array_equal(out[0].numpy(), golden["output_0__then_n3"])


def test_runs_within_the_budget_equal_tvm_and_the_pools_stay_inside_it(artifacts: Path) -> None:
    golden = dict(np.load(artifacts / "relayvm" / "control-flow" / "golden.npz"))
    budget = 4 * MIB
    vm = _control_flow(artifacts, budget)
    for run in ("then_n3", "else_n0", "else_n2"):
        out = vm.invoke("main", golden[f"x__{run}"], golden[f"n__{run}"])
        assert np.array_equal(out[0].numpy(), golden[f"output_0__{run}"])
        assert int(out[1].numpy()) == int(golden[f"output_1__{run}"])
    interp = vm.module.interp
    assert interp is not None
    for length in range(1000, 100_000, 9000):  # a new size each time: the pools would grow
        vm.invoke("main", np.ones(length, "float32"), np.array(3, "int32"))
        assert interp.budget is not None
        held = interp.budget.live[0] + sum(p.free_bytes for p in interp.pools if p is not None)
        assert held <= budget


def test_a_constant_on_a_virtual_device_that_does_not_exist_is_refused_at_load() -> None:
    func = VMFunction("main", 2, [], [], [(op.LOAD_CONST, 0, 0, 0), (op.RET, 0)])
    data = ExecutableData(
        "0.16.dev0",
        [(1, 0, "")],
        0,
        ["main"],
        [rt.array(np.ones(2, "float32"))],
        [3],
        [],
        {},
        [func],
    )
    raw = write_executable(data)
    with pytest.raises(ModuleLoadError, match="constant 0 is on virtual device 3, expected 0 to 0"):
        vm_rt.Executable.load_exec(raw, rt.PyModule({}))


def _hand_made(code: list[tuple[int, ...]], *others: VMFunction) -> vm_rt.VirtualMachine:
    main = VMFunction("main", 4, [], [], code)
    data = ExecutableData(
        "0.16.dev0",
        [(1, 0, "")],
        0,
        ["main", *(f.name for f in others)],
        [],
        [],
        [],
        {},
        [main, *others],
    )
    exe = vm_rt.Executable.load_exec(write_executable(data), rt.PyModule({}))
    vm = vm_rt.VirtualMachine(exe, rt.cpu())
    assert vm.engine == "python"  # not loaded from a file: the interpreter runs it
    return vm


_CELL_LOOPS = {  # r0 = nil, then forever r0 = a cell of r0 (and of a fresh tensor)
    "adt": [(op.ALLOC_ADT, 1, 1, 0, 0), (op.GOTO, -1)],
    "closure": [(op.ALLOC_CLOSURE, 0, 1, 0, 0), (op.GOTO, -1)],
    "LoadConsti": [(op.LOAD_CONSTI, 7, 1), (op.ALLOC_ADT, 1, 2, 0, 1, 0), (op.GOTO, -2)],
    "ShapeOf": [(op.SHAPE_OF, 2, 1), (op.ALLOC_ADT, 1, 2, 0, 1, 0), (op.GOTO, -2)],
    "ReshapeTensor": [(op.RESHAPE_TENSOR, 2, 3, 1), (op.ALLOC_ADT, 1, 2, 0, 1, 0), (op.GOTO, -2)],
}


@pytest.mark.parametrize("kind", sorted(_CELL_LOOPS))
def test_every_value_the_interpreter_makes_counts_against_the_budget(
    monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    # the interpreter's budget counted storages only: a loop's list of cells ran on to the
    # step budget (300,000 steps: 14.9 MiB of ADTs, 13.6 of closures, 76.6 of cells holding
    # a LoadConsti tensor, tracemalloc's peak); now each is charged as it is made, as in C
    monkeypatch.setenv("TVMRT_VM_MAX_STEPS", "300000")
    setup = [(op.ALLOC_ADT, 0, 0, 0), (op.LOAD_CONSTI, 7, 2), (op.LOAD_CONSTI, 1, 3)]
    vm = _hand_made([*setup, *_CELL_LOOPS[kind], (op.RET, 0)])
    vm.module.limits.max_live_bytes = MIB
    tracemalloc.start()
    try:
        with pytest.raises(DeviceOutOfMemoryError, match="over its budget of 1048576 bytes"):
            vm.invoke("main")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * MIB, f"peak {peak / MIB:.1f} MiB under a 1 MiB budget"


def test_register_files_count_against_the_interpreters_budget() -> None:
    # a function of 2^17 registers calling itself: each frame's register file is 1 MiB
    big = VMFunction("big", 1 << 17, [], [], [(op.INVOKE, 1, 0, 0), (op.RET, 0)])
    vm = _hand_made([(op.INVOKE, 1, 0, 1), (op.RET, 1)], big)
    vm.module.limits.max_live_bytes = 4 * MIB
    with pytest.raises(DeviceOutOfMemoryError, match="a register file of 1048960 bytes"):
        vm.invoke("main")
    interp = vm.module.interp
    assert interp is not None
    assert interp.budget is not None
    assert interp.budget.live[0] == 0  # the frames' charges are given back with the frames
    vm.module.limits.max_live_bytes = None
