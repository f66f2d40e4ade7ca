"""Every case and run of relayvm/ against TVM's golden.npz, bitwise, through both forms.

Form 1 is ``Executable.load_exec(code.ro, load_module(lib.so))``, form 2 one
``load_module(vm.so)``; the outputs are read through ``invoke`` (NDArray or ADT) and
through ``set_input``/``invoke_stateful``/``get_outputs``, as TVM made the goldens.
"""

from __future__ import annotations

import pytest

import tvmrt.runtime as rt
from support.relayvm_cases import CASES, golden_runs, same_bits
from tvmrt.error import TVMError
from tvmrt.runtime import vm as vm_rt
from tvmrt.runtime.container import ADT


def _form1(folder):
    lib = rt.load_module(str(folder / "lib.so"))
    code = bytearray((folder / "code.ro").read_bytes())
    return vm_rt.Executable.load_exec(code, lib)


def _form2(folder):
    mod = rt.load_module(str(folder / "vm.so"))
    assert mod.type_key == "VMExecutable"
    assert [m.type_key for m in mod.imported_modules] == ["library"]
    return mod


@pytest.mark.parametrize("case", CASES)
def test_invoke_matches_golden_through_code_ro_and_lib_so(artifacts, case):
    folder = artifacts / "relayvm" / case
    exe = _form1(folder)
    vm = vm_rt.VirtualMachine(exe, rt.cpu())
    for run in golden_runs(folder, exe.get_function_params("main")):
        result = vm.invoke("main", *run.inputs.values())
        outs = list(result) if isinstance(result, ADT) else [result]
        assert isinstance(result, ADT) == (len(run.outputs) > 1)
        assert len(outs) == len(run.outputs), run.name
        for i, (got, want) in enumerate(zip(outs, run.outputs, strict=True)):
            assert same_bits(got.numpy(), want), f"{case} {run.name} output {i}"


@pytest.mark.parametrize("case", CASES)
def test_stateful_outputs_match_golden_through_vm_so(artifacts, case):
    folder = artifacts / "relayvm" / case
    vm = vm_rt.VirtualMachine(_form2(folder), rt.cpu(), memory_cfg="naive")
    params = vm_rt.Executable(_form2(folder)).get_function_params("main")
    for run in golden_runs(folder, params):
        vm.set_input("main", **run.inputs)
        vm.invoke_stateful("main")
        outs = vm.get_outputs()
        assert len(outs) == len(run.outputs)
        for i, (got, want) in enumerate(zip(outs, run.outputs, strict=True)):
            assert same_bits(got.numpy(), want), f"{case} {run.name} output {i}"


def test_a_second_invoke_gives_the_same_bits_and_fresh_buffers(artifacts):
    folder = artifacts / "relayvm" / "dyn-batch-mlp"
    vm = vm_rt.VirtualMachine(_form2(folder), rt.cpu())
    batch3, batch1 = sorted(golden_runs(folder, ["x"]), key=lambda r: -len(r.inputs["x"]))
    first = vm.run(batch3.inputs["x"])
    kept = first.numpy().copy()
    second = vm.run(batch1.inputs["x"])
    assert same_bits(second.numpy(), batch1.outputs[0])
    assert same_bits(first.numpy(), kept)  # the first result was not overwritten
    assert same_bits(vm.run(batch3.inputs["x"]).numpy(), batch3.outputs[0])


def test_reused_dltensor_layouts_point_at_each_arrays_own_memory(artifacts):
    # allocation sites copy the DLTensor of the array they made last (same shape, dtype,
    # device): results kept from every invoke, of alternating batch sizes, must each
    # describe their own memory and keep TVM's bits
    folder = artifacts / "relayvm" / "dyn-batch-mlp"
    vm = vm_rt.VirtualMachine(_form2(folder), rt.cpu())
    runs = sorted(golden_runs(folder, ["x"]), key=lambda r: len(r.inputs["x"]))
    kept = [(run, vm.run(run.inputs["x"])) for run in [*runs, *runs, *runs[::-1]]]
    assert len({out.data_ptr for _, out in kept}) == len(kept)
    for run, out in kept:
        dl = out.dltensor()
        assert dl.data + dl.byte_offset == out.data_ptr
        assert tuple(dl.shape[i] for i in range(dl.ndim)) == run.outputs[0].shape
        assert same_bits(out.numpy(), run.outputs[0])


def test_late_bound_constants_load_from_the_params_file(artifacts, tmp_path):
    folder = artifacts / "relayvm" / "cnn-static"
    lib = rt.load_module(str(folder / "lib.so"))
    exe = vm_rt.Executable.load_exec((folder / "code_late_bound.ro").read_bytes(), lib)
    with pytest.raises(TVMError, match="late-bound"):
        vm_rt.VirtualMachine(exe, rt.cpu())
    exe.load_late_bound_consts(str(folder / "late_bound_consts.params"))
    vm = vm_rt.VirtualMachine(exe, rt.cpu())
    (run,) = golden_runs(folder, exe.get_function_params("main"))
    assert same_bits(vm.invoke("main", **run.inputs).numpy(), run.outputs[0])


def test_move_late_bound_consts_writes_what_tvm_wrote(artifacts, tmp_path):
    folder = artifacts / "relayvm" / "cnn-static"
    exe = _form1(folder)
    exe.move_late_bound_consts(str(tmp_path / "moved.params"), 256)
    assert (tmp_path / "moved.params").read_bytes() == (
        folder / "late_bound_consts.params"
    ).read_bytes()
    code, _lib = exe.save()
    # the moved constants are saved as names; the rest equals TVM's file but for the
    # stale heap pointers of AllocStorage (which differ in every build)
    again = vm_rt.Executable.load_exec(code, _lib)
    assert again.constants.count("late-bound") == 3
    again.load_late_bound_consts_from_map(
        rt.load_param_dict((tmp_path / "moved.params").read_bytes())
    )
    (run,) = golden_runs(folder, again.get_function_params("main"))
    vm = vm_rt.VirtualMachine(again, rt.cpu())
    assert same_bits(vm.run(**run.inputs).numpy(), run.outputs[0])


def test_late_bound_names_must_match_one_to_one(artifacts):
    folder = artifacts / "relayvm" / "cnn-static"
    lib = rt.load_module(str(folder / "lib.so"))
    exe = vm_rt.Executable.load_exec((folder / "code_late_bound.ro").read_bytes(), lib)
    with pytest.raises(ValueError, match=r"missing \['const_10', 'const_18', 'const_4'\]"):
        exe.load_late_bound_consts_from_map({})
