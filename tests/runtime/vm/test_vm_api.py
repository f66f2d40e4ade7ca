"""TVM's Python API around the VM: listings, params, input indexes, benchmark, profiler."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import tvmrt.runtime as rt
from support.relayvm_cases import CASES, golden_runs, same_bits
from tvmrt.error import InputNotFoundError
from tvmrt.runtime import profiler_vm
from tvmrt.runtime import vm as vm_rt
from tvmrt.runtime.profiling import Report

_SECTIONS = ("bytecode", "constants", "primitives", "virtual_devices", "stats")


def _tvm_listing(folder, section):
    text = (folder / "bytecode.txt").read_text()
    return text.split(f"## exe.{section}\n\n")[1].split("\n## ")[0].rstrip("\n")


@pytest.mark.parametrize("case", CASES)
def test_text_views_equal_tvms_own_listing(artifacts, case):
    folder = artifacts / "relayvm" / case
    exe = vm_rt.Executable(rt.load_module(str(folder / "vm.so")))
    for section in _SECTIONS:
        assert getattr(exe, section).rstrip("\n") == _tvm_listing(folder, section), section


@pytest.mark.parametrize("case", CASES)
def test_save_gives_back_the_bytes_of_code_ro(artifacts, case):
    folder = artifacts / "relayvm" / case
    lib = rt.load_module(str(folder / "lib.so"))
    exe = vm_rt.Executable.load_exec((folder / "code.ro").read_bytes(), lib)
    code, lib_again = exe.save()
    assert bytes(code) == (folder / "code.ro").read_bytes()
    assert lib_again is lib


def test_names_arity_and_input_indexes_as_tvm_reported(artifacts):
    folder = artifacts / "relayvm" / "adt-closure"
    exe = vm_rt.Executable(rt.load_module(str(folder / "vm.so")))
    # TVM's listing names the functions in index order ("VM Function[i]: name(params)"); the
    # order and the lifted closure's lifted_name<digits> differ from build to build
    listed = re.findall(r"^VM Function\[\d+\]: (\w+)\(", _tvm_listing(folder, "bytecode"), re.M)
    assert exe.globals == listed
    assert sorted(re.sub(r"\d+$", "", g) for g in exe.globals) == [
        "lifted_name",
        "main",
        "sum_list",
    ]
    # the primitives' order (their PackedFunc indexes) also differs from build to build
    assert sorted(exe.primitive_ops) == [
        "vm_mod_fused_add",
        "vm_mod_fused_multiply",
        "vm_mod_fused_zeros",
    ]
    assert exe.get_function_params("main") == ["a", "b", "c"]
    vm = vm_rt.VirtualMachine(exe, rt.cpu())
    assert [vm.get_input_index(n) for n in ("a", "b", "c", "nope")] == [0, 1, 2, -1]
    with pytest.raises(InputNotFoundError, match="no function 'absent'"):
        exe.get_function_params("absent")


def test_set_one_input_by_name_and_index(artifacts):
    folder = artifacts / "relayvm" / "adt-closure"
    vm = vm_rt.VirtualMachine(rt.load_module(str(folder / "vm.so")), rt.cpu())
    (run,) = golden_runs(folder, ["a", "b", "c"])
    vm.set_one_input("main", "a", run.inputs["a"])
    vm.set_one_input("main", 1, run.inputs["b"])
    vm.set_one_input("main", c=run.inputs["c"])
    vm.invoke_stateful("main")
    for got, want in zip(vm.get_outputs(), run.outputs, strict=True):
        assert same_bits(got.numpy(), want)


def test_invoke_without_inputs_names_them(artifacts):
    folder = artifacts / "relayvm" / "tuple-io"
    vm = vm_rt.VirtualMachine(rt.load_module(str(folder / "vm.so")), rt.cpu())
    with pytest.raises(InputNotFoundError, match="set the inputs of 'main'"):
        vm.invoke("main")


def test_benchmark_returns_one_result_per_repeat(artifacts):
    folder = artifacts / "relayvm" / "dyn-batch-mlp"
    vm = vm_rt.VirtualMachine(rt.load_module(str(folder / "vm.so")), rt.cpu())
    x = np.load(folder / "golden.npz")["x__batch3"]
    result = vm.benchmark(rt.cpu(), x, repeat=2, number=1)
    end_to_end = vm.benchmark(rt.cpu(), x, repeat=3, number=1, end_to_end=True)
    assert len(end_to_end.results) == 3
    assert len(result.results) == 2
    assert all(t > 0 for t in result.results)


def test_profiler_reports_every_kernel_call(artifacts):
    folder = artifacts / "relayvm" / "cnn-static"
    assert profiler_vm.enabled()
    exe = vm_rt.Executable(rt.load_module(str(folder / "vm.so")))
    prof = profiler_vm.VirtualMachineProfiler(exe, rt.cpu())
    (run,) = golden_runs(folder, exe.get_function_params("main"))
    report = prof.profile(*run.inputs.values(), func_name="main")
    assert isinstance(report, Report)
    kernels = [c for c in report.calls if not c["Name"].startswith("VM::")]
    assert [c["Name"] for c in kernels] == exe.primitive_ops  # each kernel once, in order
    assert kernels[0]["Argument Shapes"] == "float32[1, 3, 16, 16], float32[1, 1, 16, 16, 3]"
    assert all("Hash" in c for c in kernels)
    assert same_bits(prof.get_outputs()[0].numpy(), run.outputs[0])


_PROFILE_COLUMNS = ("Name", "Device", "Argument Shapes", "VM::Argument Shapes", "Hash")


@pytest.mark.parametrize("case", CASES)
def test_profiler_rows_are_tvms_kernels_and_vm_instructions(artifacts, case):
    """The rows of TVM's own VirtualMachineProfiler report (tests/fixtures/build_relayvm.py
    recorded them): kernel calls and the instructions TVM times (VM::AllocStorage,
    VM::AllocTensor, VM::AllocTensorReg, VM::ReshapeTensor, VM::UnknownOp for KillRegister),
    in order, with the same names, devices, shapes and hashes."""
    folder = artifacts / "relayvm" / case
    tvms = json.loads((artifacts / "relayvm" / "profiles.json").read_text())[case]
    exe = vm_rt.Executable(rt.load_module(str(folder / "vm.so")))
    (run,) = [
        r for r in golden_runs(folder, exe.get_function_params("main")) if r.name == tvms["run"]
    ]
    report = profiler_vm.VirtualMachineProfiler(exe, rt.cpu()).profile(*run.inputs.values())
    rows = [{k: str(c[k]) for k in _PROFILE_COLUMNS if k in c} for c in report.calls]
    assert rows == tvms["rows"]
    assert {r["Name"] for r in rows if r["Name"].startswith("VM::")} >= {"VM::AllocStorage"}


def test_runtime_vm_is_reached_as_an_attribute_like_tvm_runtime_vm():
    import tvmrt

    assert tvmrt.runtime.vm.VirtualMachine is vm_rt.VirtualMachine
    assert tvmrt.runtime.profiler_vm.enabled()
    assert not hasattr(tvmrt.runtime, "no_such_submodule")
