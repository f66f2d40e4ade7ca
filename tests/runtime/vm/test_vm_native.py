"""TVM's VirtualMachine face on the Relay VM in C (libtvmrt_runtime through ctypes).

Every relayvm/ case and run, through both file forms, on the C engine: bitwise equal to
TVM's golden and to the Python interpreter. Then which engine each kind of VM gets and
the reason it states, the C runtime's thread pool following tvmrt's, and the serve
budget (``limits.max_live_bytes``) reaching the C VM.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tvmrt
import tvmrt.runtime as rt
from support.relayvm_cases import CASES, golden_runs, same_bits
from tvmrt.error import (
    ArgumentTypeError,
    DeviceOutOfMemoryError,
    InvalidArgumentError,
    TVMError,
    UnsupportedError,
)
from tvmrt.runtime import kernel_services
from tvmrt.runtime import vm as vm_rt
from tvmrt.runtime.container import ADT
from tvmrt.runtime.dtype import DataType
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.profiler_vm import VirtualMachineProfiler
from tvmrt.runtime.vm import opcodes as op
from tvmrt.runtime.vm.format import ExecutableData, VMFunction, write_executable
from tvmrt.runtime.vm.native import library_refusal
from tvmrt.testing.devices import emulated_device


def _forms(folder):
    lib = rt.load_module(str(folder / "lib.so"))
    code = bytearray((folder / "code.ro").read_bytes())
    yield "code.ro", vm_rt.Executable.load_exec(code, lib)
    yield "vm.so", vm_rt.Executable(rt.load_module(str(folder / "vm.so")))


def _flat(result):
    return [f.numpy() for f in result] if isinstance(result, ADT) else [result.numpy()]


@pytest.mark.parametrize("case", CASES)
def test_every_case_runs_in_c_bitwise_equal_to_golden_and_to_python(artifacts, case):
    folder = artifacts / "relayvm" / case
    for form, exe in _forms(folder):
        native = vm_rt.VirtualMachine(exe, rt.cpu())
        python = vm_rt.VirtualMachine(exe, rt.cpu(), engine="python")
        assert (native.engine, python.engine) == ("native", "python"), native.engine_reason
        for run in golden_runs(folder, exe.get_function_params("main")):
            got = native.invoke("main", *run.inputs.values())
            ref = _flat(python.invoke("main", *run.inputs.values()))
            assert isinstance(got, ADT) == (len(run.outputs) > 1)
            assert len(_flat(got)) == len(run.outputs) == len(ref), (form, run.name)
            for i, (g, r, want) in enumerate(zip(_flat(got), ref, run.outputs, strict=True)):
                assert same_bits(g, want), f"{case} {form} {run.name} output {i}"
                assert same_bits(g, r), f"{case} {form} {run.name} output {i} vs Python"
            native.set_input("main", **run.inputs)  # the stateful path, by parameter name
            native.invoke_stateful("main")
            outs = native.get_outputs()
            assert all(same_bits(o.numpy(), w) for o, w in zip(outs, run.outputs, strict=True))


def test_a_result_outlives_the_next_invoke(artifacts):
    folder = artifacts / "relayvm" / "dyn-batch-mlp"
    vm = vm_rt.VirtualMachine(rt.load_module(str(folder / "vm.so")), rt.cpu())
    x = np.random.default_rng(0).standard_normal((3, 16)).astype("float32")
    first = vm.invoke("main", x).numpy().copy()
    held = vm.invoke("main", x)
    vm.invoke("main", np.zeros((5, 16), "float32"))
    assert vm.engine == "native"
    assert same_bits(held.numpy(), first)


def _python_only_exe():
    main = VMFunction("main", 1, ["x"], [0], [(op.RET, 0)])
    data = ExecutableData("0.16.dev0", [(1, 0, "")], 0, ["main"], [], [], [], {}, [main])
    return vm_rt.Executable.load_exec(write_executable(data), rt.PyModule({}))


def test_each_kind_of_vm_gets_the_engine_it_states(artifacts):
    folder = artifacts / "relayvm" / "cnn-static"
    vm_so = rt.load_module(str(folder / "vm.so"))
    assert vm_rt.VirtualMachine(vm_so, rt.cpu(), memory_cfg="naive").engine == "native"
    made = vm_rt.VirtualMachine(_python_only_exe(), rt.cpu())
    assert made.engine == "python"
    assert "not loaded from a file" in made.engine_reason
    assert np.array_equal(made.invoke("main", np.arange(3.0)).numpy(), np.arange(3.0))
    assert VirtualMachineProfiler(vm_so, rt.cpu()).engine == "native"
    asked = vm_rt.VirtualMachine(vm_so, rt.cpu(), engine="python")
    assert asked.engine_reason == "the Python engine was asked for"
    with emulated_device(rt.cuda().device_type):
        other = vm_rt.VirtualMachine(vm_so, [rt.cuda(0), rt.cpu()])
    assert other.engine == "python"
    assert "other than the CPU" in other.engine_reason
    with pytest.raises(UnsupportedError, match="not loaded from a file"):
        vm_rt.VirtualMachine(_python_only_exe(), rt.cpu(), engine="native")


_TIMES = ("Duration (us)", "Percent")


@pytest.mark.parametrize("case", CASES)
def test_the_profiler_reports_the_same_rows_on_both_engines(artifacts, case):
    """The C VM's profile record gives the rows the Python interpreter's hooks give (names,
    devices, shapes, hashes, layouts, in order; TVM's own rows are test_vm_api's), with
    times of its own that fit inside the run's total."""
    folder = artifacts / "relayvm" / case
    exe = vm_rt.Executable(rt.load_module(str(folder / "vm.so")))
    run = golden_runs(folder, exe.get_function_params("main"))[0]
    rows, reports = {}, {}
    for engine in ("native", "python"):
        prof = VirtualMachineProfiler(exe, rt.cpu(), engine=engine)
        assert prof.engine == engine, prof.engine_reason
        reports[engine] = report = prof.profile(*run.inputs.values())
        got = [o.numpy() for o in prof.get_outputs()]
        assert len(got) == len(run.outputs)
        assert all(map(same_bits, got, run.outputs))
        rows[engine] = [{k: str(v) for k, v in c.items() if k not in _TIMES} for c in report.calls]
    assert rows["native"] == rows["python"]
    assert any(not r["Name"].startswith("VM::") for r in rows["native"])
    times = [c["Duration (us)"].microseconds for c in reports["native"].calls]
    total = reports["native"].device_metrics["cpu0"]["Duration (us)"].microseconds
    assert all(t >= 0 for t in times)
    assert 0 < sum(times) <= total


def test_the_c_vms_profile_record_is_bounded(artifacts):
    """An invoke that would record more than a profile holds fails with the limit's words
    (a loop of KillRegister instructions: one event each), and the record so far is read."""
    loop = VMFunction("main", 1, [], [], [(op.KILL_REGISTER, 0), (op.GOTO, -1)])
    data = ExecutableData("0.16.dev0", [(1, 0, "")], 0, ["main"], [], [], [], {}, [loop])
    lib = rt.load_module(str(artifacts / "relayvm" / "cnn-static" / "lib.so"))
    vm = vm_rt.VirtualMachine(vm_rt.Executable.load_exec(write_executable(data), lib), rt.cpu())
    assert vm.engine == "native", vm.engine_reason
    vm.module.profile_start()
    with pytest.raises(InvalidArgumentError, match=r"more than 1048576 timed calls"):
        vm.invoke("main")
    record = bytes(vm.module.profile_stop())
    assert struct.unpack_from("<Q", record)[0] == 1 << 20
    with pytest.raises(TVMError, match=r"profile_stop: no profile_start\(\) before it"):
        vm.module.profile_stop()


def test_constants_changed_in_python_keep_the_python_engine(artifacts, tmp_path):
    exe = vm_rt.Executable(rt.load_module(str(artifacts / "relayvm" / "cnn-static" / "vm.so")))
    exe.move_late_bound_consts(str(tmp_path / "consts.params"), byte_limit=1)
    exe.load_late_bound_consts(str(tmp_path / "consts.params"))
    vm = vm_rt.VirtualMachine(exe, rt.cpu())
    assert vm.engine == "python"
    assert "changed after loading" in vm.engine_reason


def test_late_bound_constants_loaded_from_a_file_run_on_the_c_vm(artifacts, tmp_path):
    """TVM's deploy flow for late-bound constants: the build moves the large constants into
    a params file and saves code.ro; the deployment loads code.ro and lib.so, then the
    constants from their file. The C executable reads the same file and the C VM runs it,
    bitwise as TVM's golden; a map loaded in Python keeps the interpreter."""
    folder = artifacts / "relayvm" / "cnn-static"
    built = vm_rt.Executable(rt.load_module(str(folder / "vm.so")))
    built.move_late_bound_consts(str(tmp_path / "consts.params"), byte_limit=256)
    code, _lib = built.save()
    (run,) = golden_runs(folder, built.get_function_params("main"))

    def deployed():
        lib = rt.load_module(str(folder / "lib.so"))
        return vm_rt.Executable.load_exec(bytearray(code), lib)

    exe = deployed()
    with pytest.raises(TVMError, match="Need to load late-bound-constants"):
        vm_rt.VirtualMachine(exe, rt.cpu())
    exe.load_late_bound_consts(str(tmp_path / "consts.params"))
    vm = vm_rt.VirtualMachine(exe, rt.cpu())
    assert vm.engine == "native", vm.engine_reason
    assert same_bits(vm.invoke("main", *run.inputs.values()).numpy(), run.outputs[0])
    # a file rewritten since the Python executable read it is not what the C one would read
    stat = (tmp_path / "consts.params").stat()
    os.utime(tmp_path / "consts.params", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    vm = vm_rt.VirtualMachine(exe, rt.cpu())
    assert vm.engine == "python"
    assert "consts.params' changed after it was loaded" in vm.engine_reason
    assert same_bits(vm.invoke("main", *run.inputs.values()).numpy(), run.outputs[0])

    mapped = deployed()
    mapped.load_late_bound_consts_from_map(
        rt.load_param_dict((tmp_path / "consts.params").read_bytes())
    )
    vm = vm_rt.VirtualMachine(mapped, rt.cpu())
    assert vm.engine == "python"
    assert "loaded from a map" in vm.engine_reason
    assert same_bits(vm.invoke("main", *run.inputs.values()).numpy(), run.outputs[0])


def test_the_c_pool_follows_set_num_threads(artifacts):
    vm_rt.VirtualMachine(
        rt.load_module(str(artifacts / "relayvm" / "cnn-static" / "vm.so")), rt.cpu()
    )
    before = kernel_services.num_threads()
    try:
        for n in (1, 3):
            kernel_services.set_num_threads(n)
            assert kernel_services.native_library().tvmrt_get_num_threads() == n
    finally:
        kernel_services.set_num_threads(before)


def test_the_live_bytes_budget_reaches_the_c_vm(artifacts):
    vm = vm_rt.VirtualMachine(
        rt.load_module(str(artifacts / "relayvm" / "dyn-batch-mlp" / "vm.so")), rt.cpu()
    )
    x = np.ones((64, 16), "float32")
    first = vm.invoke("main", x).numpy()
    vm.module.limits.max_live_bytes = 100
    with pytest.raises(DeviceOutOfMemoryError, match="budget of 100 bytes"):
        vm.invoke("main", x)
    vm.module.limits.max_live_bytes = None
    with pytest.raises(InvalidArgumentError, match="max_frames >= 1"):
        vm.module.limits.max_frames = 0
    assert same_bits(vm.invoke("main", x).numpy(), first)


def test_a_numpy_view_of_a_result_keeps_the_c_memory_alive(artifacts):
    folder = artifacts / "relayvm" / "dyn-batch-mlp"
    vm = vm_rt.VirtualMachine(rt.load_module(str(folder / "vm.so")), rt.cpu())
    x = np.random.default_rng(1).standard_normal((2, 16)).astype("float32")
    view = vm.invoke("main", x).numpy_view()  # the NDArray itself is dropped here
    want = view.copy()
    for _ in range(3):  # the pool would hand a freed buffer to these runs
        vm.invoke("main", np.full((2, 16), 7.0, "float32"))
    assert same_bits(view, want)


def test_tvmrt_vm_engine_sets_the_default_and_a_bad_name_is_refused(artifacts, monkeypatch):
    vm_so = rt.load_module(str(artifacts / "relayvm" / "cnn-static" / "vm.so"))
    monkeypatch.setenv("TVMRT_VM_ENGINE", "python")
    assert vm_rt.VirtualMachine(vm_so, rt.cpu()).engine == "python"
    assert vm_rt.VirtualMachine(vm_so, rt.cpu(), engine="native").engine == "native"
    monkeypatch.setenv("TVMRT_VM_ENGINE", "c")
    with pytest.raises(ArgumentTypeError, match="'native' or 'python', got 'c'"):
        vm_rt.VirtualMachine(vm_so, rt.cpu())


def test_a_pool_size_set_before_the_c_runtime_loads_reaches_it():
    code = (
        "from tvmrt.runtime import kernel_services as k; k.set_num_threads(3); "
        "print(k.native_library().tvmrt_get_num_threads())"
    )
    env = {**os.environ, "TVM_NUM_THREADS": "1", "PYTHONPATH": str(Path(tvmrt.__file__).parents[1])}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["3"]  # the C runtime alone would take TVM_NUM_THREADS


_REFUSAL_OF = """
import sys
from tvmrt.runtime.vm.native import library_refusal
print(library_refusal(("ro", b"", sys.argv[1])))
"""


def test_a_kernel_library_importing_tvm_functions_by_name_needs_them_bound_to_tvmrt(
    artifacts, tmp_path
):
    """A library that imports TVMBackendAllocWorkspace by name goes to the C VM where the
    process binds that name to tvmrt's runtime, and stays in Python where another library
    (a TVM runtime loaded first; here one preloaded) answers for it."""
    if shutil.which("cc") is None:
        pytest.skip("cc is not installed; the test builds a library that imports by name")
    src = tmp_path / "k.c"
    src.write_text(
        "void* TVMBackendAllocWorkspace(int, int, unsigned long long, int, int);\n"
        "void* k(void) { return TVMBackendAllocWorkspace(1, 0, 8, 2, 32); }\n"
    )
    lib = tmp_path / "k.so"
    subprocess.run(["cc", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    assert library_refusal(("ro", b"", str(lib))) == ""
    other = tmp_path / "other.c"
    other.write_text(
        "void* TVMBackendAllocWorkspace(int a, int b, unsigned long long n, int c, int d) {\n"
        "  (void)a; (void)b; (void)n; (void)c; (void)d; return 0; }\n"
    )
    other_so = tmp_path / "libother.so"
    subprocess.run(["cc", "-shared", "-fPIC", str(other), "-o", str(other_so)], check=True)
    env = {
        **os.environ,
        "LD_PRELOAD": str(other_so),
        "PYTHONPATH": str(Path(tvmrt.__file__).parents[1]),
    }
    out = subprocess.run(
        [sys.executable, "-c", _REFUSAL_OF, str(lib)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "imports TVMBackendAllocWorkspace by name" in out.stdout
    assert library_refusal(("so", str(artifacts / "relayvm" / "cnn-static" / "vm.so"))) == ""


_AFTER_SYSTEM_LIB = """
import sys
import numpy as np
import tvmrt.runtime as rt
from tvmrt.artifact import find_artifact, load_artifact
from tvmrt.runtime import vm as vm_rt
model = load_artifact(find_artifact(sys.argv[1]))  # a system-lib build: the extension goes global
model.executor.run()
vm = vm_rt.VirtualMachine(rt.load_module(sys.argv[2]), rt.cpu())
print(vm.engine, vm.engine_reason)
golden = np.load(sys.argv[3])
out = vm.invoke("main", rt.array(golden["x__batch3"]))
print(out.numpy().tobytes() == golden["output_0__batch3"].tobytes())
"""


def test_the_c_vm_runs_after_a_system_library_made_the_extension_global(artifacts):
    """A system-lib build makes the extension's TVM* names global; the C runtime must still
    use its own (it once failed to load the VM with an empty error, its registry and errors
    landing in the extension's tables, and broke later CUDA runs in the same process)."""
    folder = artifacts / "relayvm/dyn-batch-mlp"
    done = subprocess.run(
        [sys.executable, "-c", _AFTER_SYSTEM_LIB, str(artifacts / "relay016/systemlib-so/deploy.so"),
         str(folder / "vm.so"), str(folder / "golden.npz")],
        capture_output=True, text=True, timeout=300, env={**os.environ, "TVM_NUM_THREADS": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    engine, same = done.stdout.splitlines()[-2:]
    assert engine.startswith("native "), engine
    assert same == "True"


def test_a_deeply_nested_result_converts_without_recursion(artifacts):
    # main returns a list of 20,000 nested cells: converting the C VM's result recursed once
    # per level (RecursionError past Python's 1,000 frames); it is a worklist now
    depth = 20_000
    code = [(op.ALLOC_ADT, 0, 0, 0), *[(op.ALLOC_ADT, 1, 1, 0, 0)] * depth, (op.RET, 0)]
    data = ExecutableData(
        "0.16.dev0",
        [(1, 0, "")],
        0,
        ["main"],
        [],
        [],
        [],
        {},
        [VMFunction("main", 1, [], [], code)],
    )
    lib = rt.load_module(str(artifacts / "relayvm" / "cnn-static" / "lib.so"))
    vm = vm_rt.VirtualMachine(vm_rt.Executable.load_exec(write_executable(data), lib), rt.cpu())
    assert vm.engine == "native", vm.engine_reason
    cell, seen = vm.invoke("main"), 0
    while len(cell.fields):
        assert cell.tag == 1
        cell, seen = cell.fields[0], seen + 1
    assert (seen, cell.tag) == (depth, 0)


def test_tuple_fields_the_c_runtime_cannot_view_go_in_as_copies(artifacts):
    # a strided field has no C array viewing it: it reaches runtime.Tuple as a DLTensor, and
    # the C ADT holds a copy (the ADT outlives the call; nothing keeps the view alive)
    folder = artifacts / "relayvm" / "tuple-io"
    exe = vm_rt.Executable(rt.load_module(str(folder / "vm.so")))
    vm = vm_rt.VirtualMachine(exe, rt.cpu())
    assert vm.engine == "native", vm.engine_reason
    (run,) = golden_runs(folder, exe.get_function_params("main"))

    def strided(a):
        wide = np.repeat(a, 2, axis=-1)  # every value twice; the view takes every other one
        return NDArray.from_host_memory(wide[..., ::2], DataType(str(a.dtype)), rt.cpu(), wide)

    inputs = [
        ADT(0, [strided(f) for f in v]) if isinstance(v, tuple) else v for v in run.inputs.values()
    ]
    assert any(isinstance(v, ADT) for v in inputs)
    got = vm.invoke("main", *inputs)
    assert all(same_bits(g, w) for g, w in zip(_flat(got), run.outputs, strict=True))
    vm.set_input("main", *inputs)  # the same through set_input, then the ADTs' copies alone
    del inputs
    vm.invoke_stateful("main")
    assert all(same_bits(o.numpy(), w) for o, w in zip(vm.get_outputs(), run.outputs, strict=True))
