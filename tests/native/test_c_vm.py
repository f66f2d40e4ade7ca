"""The Relay VM in C: every relayvm/ case run by a C program (tests/native/c/run_vm.c)
against libtvmrt_runtime, from vm.so (TVMModLoadFromFile) and from code.ro + lib.so
(runtime.Load_Executable), plain and under ASan + UBSan, its outputs compared bit for bit
with golden.npz (TVM's own); dyn-batch-mlp at batch 1, 3 (golden) and 64 (TVM 0.16's VM
run now in the peer).
"""

from __future__ import annotations

import subprocess
import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from tests.native.conftest import NativeBuild

import tvmrt.runtime as rt
from support.peers import tvm016_python
from support.relayvm_cases import CASES, GoldenRun, golden_runs, same_bits
from tvmrt.runtime import vm as vm_rt
from tvmrt.runtime.profiler_vm import VirtualMachineProfiler
from tvmrt.runtime.vm import opcodes as op

_CODES = {"i": 0, "u": 1, "b": 1, "f": 2}


def _tensor_line(path: Path, arr: np.ndarray) -> str:
    arr = np.array(arr, order="C")  # (ascontiguousarray would make a scalar 1-D)
    path.write_bytes(arr.tobytes())
    bits = 1 if arr.dtype.kind == "b" else arr.dtype.itemsize * 8
    dims = " ".join(str(d) for d in arr.shape)
    return " ".join(
        x
        for x in ("tensor", str(_CODES[arr.dtype.kind]), str(bits), str(arr.ndim), dims, str(path))
        if x
    )


def write_spec(runs: list[GoldenRun], work: Path) -> Path:
    """The run_vm spec of `runs` (inputs written next to it)."""
    lines = []
    for run in runs:
        lines.append(f"run {run.name}")
        for name, value in run.inputs.items():
            if isinstance(value, tuple):
                lines.append(f"tuple {len(value)}")
                lines += [
                    _tensor_line(work / f"{run.name}_{name}_{i}.in", v) for i, v in enumerate(value)
                ]
            else:
                assert isinstance(value, np.ndarray)
                lines.append(_tensor_line(work / f"{run.name}_{name}.in", value))
    lines.append("end")
    spec = work / "spec.txt"
    spec.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return spec


def read_outputs(work: Path, run: str) -> list[np.ndarray]:
    """The tensors run_vm wrote for `run`, in order."""
    names = {(0, 8): "int8", (0, 16): "int16", (0, 32): "int32", (0, 64): "int64"}
    names.update({(1, 1): "bool", (1, 8): "uint8", (1, 32): "uint32", (1, 64): "uint64"})
    names.update({(2, 16): "float16", (2, 32): "float32", (2, 64): "float64"})
    outs = []
    while (work / f"{run}_{len(outs)}.txt").exists():
        code, bits, ndim, *dims = map(int, (work / f"{run}_{len(outs)}.txt").read_text().split())
        assert len(dims) == ndim
        data = np.fromfile(work / f"{run}_{len(outs)}.bin", dtype=names[(code, bits)])
        outs.append(data.reshape(dims))
    return outs


def _params(folder: Path) -> list[str]:
    exe = vm_rt.Executable(rt.load_module(str(folder / "vm.so")))
    return exe.get_function_params("main")


@pytest.mark.parametrize("mode", ["so", "ro"])
@pytest.mark.parametrize("case", CASES)
def test_every_case_matches_golden_from_c(
    artifacts: Path,
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    tmp_path: Path,
    case: str,
    mode: str,
) -> None:
    folder = artifacts / "relayvm" / case
    runs = golden_runs(folder, _params(folder))
    exe = compile_c(native, "run_vm", False)
    proc = native.run(exe, mode, folder, write_spec(runs, tmp_path), tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for run in runs:
        got = read_outputs(tmp_path, run.name)
        assert len(got) == len(run.outputs), f"{case} {run.name}"
        for i, (g, want) in enumerate(zip(got, run.outputs, strict=True)):
            assert same_bits(g, want), f"{case} {run.name} output {i}"


@pytest.mark.parametrize("case", CASES)
def test_the_profile_record_from_c_is_the_profilers_rows(
    artifacts: Path,
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    tmp_path: Path,
    case: str,
) -> None:
    """profile_start / invoke / profile_stop from C (plain and under the sanitizers): one
    event per row the Python interpreter's profiler reports for the same run, in order, with
    the same kernel or instruction and the same shapes."""
    folder = artifacts / "relayvm" / case
    runs = golden_runs(folder, _params(folder))[:1]
    exe = compile_c(native, "run_vm", False)
    proc = native.run_env(
        exe, {**native.env, "PROFILE": "1"}, "so", folder, write_spec(runs, tmp_path), tmp_path
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    prefix = f"{runs[0].name}: event "
    events = [
        line[len(prefix) :].split(" ", 2)
        for line in proc.stdout.splitlines()
        if line.startswith(prefix)
    ]
    vm_exe = vm_rt.Executable(rt.load_module(str(folder / "vm.so")))
    prof = VirtualMachineProfiler(vm_exe, rt.cpu(), engine="python")
    report = prof.profile(*runs[0].inputs.values())
    names = {op.ALLOC_STORAGE: "VM::AllocStorage", op.ALLOC_TENSOR: "VM::AllocTensor"}
    names.update({op.ALLOC_TENSOR_REG: "VM::AllocTensorReg", op.KILL_REGISTER: "VM::UnknownOp"})
    names.update({op.RESHAPE_TENSOR: "VM::ReshapeTensor", op.DEVICE_COPY: "VM::DeviceCopy"})
    primitives = vm_exe.primitive_ops
    got = [
        (primitives[int(i)] if kind == "0" else names[int(i)], text)
        for kind, i, *rest in events
        for text in [rest[0] if rest else ""]
    ]
    want = [
        (c["Name"], str(c.get("Argument Shapes", c.get("VM::Argument Shapes", ""))))
        for c in report.calls
    ]
    assert got == want


TVM_BATCH = textwrap.dedent(
    """
    import sys
    import numpy as np
    import tvm
    from tvm.runtime import vm as vm_rt

    folder, out = sys.argv[1], sys.argv[2]
    vm = vm_rt.VirtualMachine(tvm.runtime.load_module(f"{folder}/vm.so"), tvm.cpu())
    x = np.random.RandomState(64).randn(64, 16).astype("float32")
    np.savez(out, x=x, y=vm.invoke("main", x).numpy())
    """
)


def test_dyn_batch_mlp_at_batch_1_3_and_64_from_c(
    artifacts: Path,
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    tmp_path: Path,
) -> None:
    folder = artifacts / "relayvm" / "dyn-batch-mlp"
    done = subprocess.run(
        [str(tvm016_python()), "-c", TVM_BATCH, str(folder), str(tmp_path / "tvm.npz")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    with np.load(tmp_path / "tvm.npz") as tvm_out:
        batch64 = GoldenRun("dyn-batch-mlp", "batch64", {"x": tvm_out["x"]}, [tvm_out["y"]])
    runs = [*golden_runs(folder, ["x"]), batch64]
    assert sorted(len(r.inputs["x"]) for r in runs) == [1, 3, 64]  # type: ignore[arg-type]
    exe = compile_c(native, "run_vm", False)
    # one VM, alternating sizes: batch 64, 1, 3 and 64 again
    proc = native.run(exe, "so", folder, write_spec([*runs[::-1], *runs], tmp_path), tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for run in runs:
        (got,) = read_outputs(tmp_path, run.name)
        assert same_bits(got, run.outputs[0]), run.name


def test_late_bound_constants_load_from_the_params_file_in_c(
    artifacts: Path,
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    tmp_path: Path,
) -> None:
    folder = artifacts / "relayvm" / "cnn-static"
    runs = golden_runs(folder, ["data"])
    exe = compile_c(native, "run_vm", False)
    late = {
        "CODE_RO": "code_late_bound.ro",
        "LATE_PARAMS": str(folder / "late_bound_consts.params"),
    }
    proc = native.run_env(
        exe,
        {**native.env, **late},
        "ro",
        folder,
        write_spec(runs, tmp_path),
        tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "before loading: ModuleLoadError: Need to load late-bound-constants" in proc.stdout
    (got,) = read_outputs(tmp_path, runs[0].name)
    assert same_bits(got, runs[0].outputs[0])


def test_a_live_bytes_budget_is_given_back_between_invokes(
    artifacts: Path,
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    tmp_path: Path,
) -> None:
    # cnn-static holds at most ~11 kB at once: a 20 kB budget lasts 101 invokes (every
    # storage given back charges the budget back), a 10 kB one fails, naming it
    folder = artifacts / "relayvm" / "cnn-static"
    runs = golden_runs(folder, ["data"])
    exe = compile_c(native, "run_vm", False)
    spec = write_spec(runs, tmp_path)
    outcome = {}
    for budget in ("20000", "10000"):
        env = {**native.env, "TVMRT_VM_MAX_LIVE_BYTES": budget, "REPEAT": "20"}
        outcome[budget] = native.run_env(exe, env, "so", folder, spec, tmp_path, timeout=120)
    assert outcome["20000"].returncode == 0, outcome["20000"].stderr
    (got,) = read_outputs(tmp_path, runs[0].name)
    assert same_bits(got, runs[0].outputs[0])
    assert outcome["10000"].returncode == 1
    assert "over its budget of 10000 bytes (TVMRT_VM_MAX_LIVE_BYTES)" in outcome["10000"].stderr


def test_vms_sharing_one_executable_run_in_threads(
    artifacts: Path,
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
) -> None:
    # tests/native/c/vm_threads.c: 4 VMs over one vm.so, each thread its own batch, every
    # output the single-thread bytes; then one VM called by two threads: each call runs
    # (same bytes) or is refused as busy, nothing else
    exe = compile_c(native, "vm_threads", False)
    folder = artifacts / "relayvm" / "dyn-batch-mlp"
    proc = native.run(exe, folder / "vm.so", "16", "4", "2000")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("ok: 4 threads x 2000 rounds"), proc.stdout


def test_a_dltensor_input_without_shape_or_data_is_refused(
    artifacts: Path,
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    tmp_path: Path,
) -> None:
    folder = artifacts / "relayvm" / "dyn-batch-mlp"
    runs = golden_runs(folder, ["x"])
    exe = compile_c(native, "run_vm", False)
    proc = native.run_env(
        exe,
        {**native.env, "BAD_INPUT": "1"},
        "so",
        folder,
        write_spec(runs, tmp_path),
        tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for k in (0, 1):
        assert f"bad input {k}: ArgumentTypeError: input 0: a DLTensor needs a shape" in proc.stdout
