"""The Relax VM in C: every Relax fixture (build/fixtures/relax<era>/<model>, TVM 0.16 to
0.27) run by C programs against libtvmrt_runtime, plain and under ASan + UBSan (leaks are
errors), through TVM's C API the way TVM's C++ deployment runs a Relax model
(tests/native/c/run_relax.c), every output compared bit for bit with the goldens of TVM's
own VM; each run through every calling path (vm["main"] with NDArray handles and with
DLTensors, set_input + invoke_stateful + get_output, save_function, invoke_closure).
Then: models refused at vm_initialization (compiled mode; llm_like's KV-cache builtins),
two eras' executables side by side in one process, the VM from several threads and a
second thread refused while one invoke runs (tests/native/c/relax_checks.c)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.native.conftest import NativeBuild
from tests.native.test_c_vm import _tensor_line

import support.fixtures as fx

MODES = ("call", "dltensor", "stateful", "saved", "closure")
INVOKES = {"call": 1, "dltensor": 1, "stateful": 1, "saved": 2, "closure": 1}  # per run
MODELS = ("mlp_dyn", "cnn", "onnx_cnn", "tuple_out", "control", "run_builtins", "compiled")
CASES = [(era, model) for era in fx.RELAX_ERAS for model in MODELS]
_DTYPES = {(0, 8): "int8", (0, 16): "int16", (0, 32): "int32", (0, 64): "int64"}
_DTYPES.update({(1, 1): "bool", (1, 8): "uint8", (1, 32): "uint32", (1, 64): "uint64"})
_DTYPES.update({(2, 16): "float16", (2, 32): "float32", (2, 64): "float64", (6, 8): "bool"})


@dataclass
class RelaxRun:
    """One run of a fixture's case.json: inputs arg0..., goldens out0... (depth first)."""

    name: str
    inputs: list[np.ndarray]
    goldens: list[np.ndarray]
    structure: Any
    stdout: str  # what relax.run.print writes in one invoke


def relax_folder(era: str, model: str) -> Path:
    return fx.artifact_folder(f"relax{era}") / model


def relax_runs(folder: Path, prefix: str = "") -> list[RelaxRun]:
    case = json.loads((folder / "case.json").read_text())
    runs = []
    for i, run in enumerate(case["runs"]):
        with np.load(folder / run["inputs"]) as npz:
            inputs = [npz[f"arg{k}"] for k in range(len(case["params"]))]
        with np.load(folder / run["golden"]) as npz:
            goldens = [npz[f"out{k}"] for k in range(len(npz.files))]
        name, structure = f"{prefix}run{i}", run["output_structure"]
        runs.append(RelaxRun(name, inputs, goldens, structure, run.get("stdout", "")))
    return runs


def write_spec(models: list[tuple[Path, list[RelaxRun]]], work: Path) -> Path:
    """run_relax's spec: each model.so, then its runs (inputs written next to it)."""
    lines = []
    for folder, runs in models:
        lines.append(f"model {folder / 'model.so'}")
        for run in runs:
            lines.append(f"run {run.name}")
            lines += [
                _tensor_line(work / f"{run.name}_arg{k}.in", x) for k, x in enumerate(run.inputs)
            ]
    lines.append("end")
    spec = work / "spec.txt"
    spec.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return spec


def read_result(work: Path, name: str) -> tuple[list[tuple[str, np.ndarray]], Any]:
    """The leaves run_relax wrote for `name` (kind, array), and the structure it saw."""
    leaves = []
    while (work / f"{name}_{len(leaves)}.txt").exists():
        kind, code, bits, ndim, *dims = (work / f"{name}_{len(leaves)}.txt").read_text().split()
        assert len(dims) == int(ndim)
        dtype = _DTYPES[(int(code), int(bits))]
        data = np.fromfile(work / f"{name}_{len(leaves)}.bin", dtype=dtype)
        leaves.append((kind, data.reshape([int(d) for d in dims])))
    return leaves, json.loads((work / f"{name}.json").read_text())


def _leaf_kinds(structure: Any) -> list[str]:
    if isinstance(structure, str):
        return [structure]
    return [kind for item in structure for kind in _leaf_kinds(item)]


def same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    return (
        got.dtype == want.dtype
        and got.shape == want.shape
        and np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes()
    )


def check_outputs(work: Path, runs: list[RelaxRun], modes: tuple[str, ...] = MODES) -> None:
    for run in runs:
        for mode in modes:
            what = f"{run.name} through {mode}"
            leaves, structure = read_result(work, f"{run.name}-{mode}")
            assert structure == run.structure, what
            assert [kind for kind, _ in leaves] == _leaf_kinds(run.structure), what
            assert len(leaves) == len(run.goldens), what
            for k, ((_, got), want) in enumerate(zip(leaves, run.goldens, strict=True)):
                assert same_bits(got, want), f"{what}: output {k}"


def expected_stdout(runs: list[RelaxRun], modes: tuple[str, ...] = MODES) -> str:
    """run_relax's output: relax.run.print's text of every invoke (TVM's, from case.json),
    then "ok"."""
    return "".join(run.stdout * sum(INVOKES[m] for m in modes) for run in runs) + "ok\n"


Compile = Callable[[NativeBuild, str, bool], Path]


@pytest.mark.parametrize(("era", "model"), CASES, ids=[f"relax{e}-{m}" for e, m in CASES])
def test_every_fixture_matches_tvms_golden_from_c(
    native: NativeBuild, compile_c: Compile, tmp_path: Path, era: str, model: str
) -> None:
    folder = relax_folder(era, model)
    runs = relax_runs(folder)
    exe = compile_c(native, "run_relax", False)
    spec = write_spec([(folder, runs)], tmp_path)
    proc = native.run(exe, ",".join(MODES), spec, tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == expected_stdout(runs), proc.stdout
    check_outputs(tmp_path, runs)


def _run_checks(
    native: NativeBuild, compile_c: Compile, tmp_path: Path, folder: Path, *args: str
) -> str:
    """relax_checks CHECK on `folder`'s model and first run; its stdout (exit 0 required)."""
    exe = compile_c(native, "relax_checks", False)
    spec = write_spec([(folder, relax_runs(folder)[:1])], tmp_path)
    proc = native.run(exe, args[0], spec, *args[1:], timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_an_llm_library_is_refused_at_vm_initialization_naming_its_kv_cache_builtins(
    native: NativeBuild, compile_c: Compile, tmp_path: Path
) -> None:
    folder = relax_folder("027", "llm_like")  # built by TVM 0.27 only
    exe = compile_c(native, "run_relax", False)
    spec = write_spec([(folder, relax_runs(folder))], tmp_path)
    proc = native.run(exe, "call", spec, tmp_path)
    assert proc.returncode == 3, proc.stdout + proc.stderr  # refused, everything freed
    assert proc.stdout == (
        "vm_initialization failed: UnsupportedError: Cannot find 4 PackedFuncs in either the "
        "Relax VM kernel library or tvmrt's runtime: "
        "vm.builtin.attention_kv_cache_create (the LLM KV cache (attention_kv_cache_*)); "
        "vm.builtin.attention_kv_cache_append (the LLM KV cache (attention_kv_cache_*)); "
        "vm.builtin.attention_kv_cache_view (the LLM KV cache (attention_kv_cache_*)); "
        "vm.builtin.paged_attention_kv_cache_create (the LLM paged KV cache)\n"
    )
    assert "AddressSanitizer" not in proc.stderr


def test_two_eras_side_by_side_in_one_process(
    native: NativeBuild, compile_c: Compile, tmp_path: Path
) -> None:
    # a TVM 0.19 executable (__tvm_dev_mblob, legacy kernels) and a TVM 0.27 one
    # (__tvm_ffi__library_bin, tvm-ffi kernels, V2 magic) loaded together, their runs
    # interleaved: 0.19 run0, 0.27 run0, 0.19 run1, 0.27 run1
    old, new = relax_folder("019", "mlp_dyn"), relax_folder("027", "mlp_dyn")
    a, b = relax_runs(old, "a"), relax_runs(new, "b")
    assert len(a) == len(b) == 2
    models = [(old, a[:1]), (new, b[:1]), (old, a[1:]), (new, b[1:])]
    exe = compile_c(native, "run_relax", False)
    proc = native.run(exe, "call,stateful", write_spec(models, tmp_path), tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check_outputs(tmp_path, a + b, ("call", "stateful"))


@pytest.mark.parametrize("model", ["mlp_dyn", "tuple_out"])
def test_one_vm_per_thread_over_one_executable(
    native: NativeBuild,
    compile_c: Compile,
    tmp_path: Path,
    model: str,
) -> None:
    # under ASan, LeakSanitizer also checks what each thread leaves at its exit (a thread
    # that freed a tuple once kept a heap list for deferred frees)
    out = _run_checks(native, compile_c, tmp_path, relax_folder("027", model), "threads", "4", "25")
    assert out == "threads: 4 x 25 invokes, 100 the same bytes\n"


def test_a_second_thread_is_refused_while_an_invoke_runs(
    native: NativeBuild, compile_c: Compile, tmp_path: Path
) -> None:
    # thread A's invoke is held inside the instrument (a C function) until B has tried
    out = _run_checks(native, compile_c, tmp_path, relax_folder("019", "mlp_dyn"), "busy")
    busy = (
        "InvalidArgumentError: the Relax VM is running an invoke on another thread; one VM "
        "runs one invoke at a time (make a VirtualMachine per thread)"
    )
    assert out.splitlines() == [
        f"main on B: {busy}",
        f"invoke_stateful on B: {busy}",
        "vm_initialization on B: InvalidArgumentError: vm_initialization while an invoke runs "
        "on this VM is refused",
        "B's own VM: the same bytes",
        "A's invoke: the same bytes",
    ]


def test_set_instrument_from_another_thread_during_an_invoke_is_refused(
    native: NativeBuild, compile_c: Compile, tmp_path: Path
) -> None:
    folder = relax_folder("019", "mlp_dyn")
    out = _run_checks(native, compile_c, tmp_path, folder, "instrument-race")
    lines = out.splitlines()
    assert lines[0].startswith("set_instrument(None) during A's invoke: InvalidArgumentError")
    assert lines[1:] == ["A's invoke: the same bytes", "the instrument was not finalized"]


def test_type_index_of_tuple_and_shape_results(
    native: NativeBuild, compile_c: Compile, tmp_path: Path
) -> None:
    out = _run_checks(native, compile_c, tmp_path, relax_folder("027", "tuple_out"), "typeindex")
    assert out.splitlines() == [
        "object: type index 4, Array",
        f"  type code {13}",  # kTVMNDArrayHandle
        "  object: type index 4, Array",
        "    type code 13",
        "    type code 13",
        "  object: type index 6, runtime.ShapeTuple",
    ]


def test_a_deep_tuple_is_freed_without_recursion(
    native: NativeBuild, compile_c: Compile, tmp_path: Path
) -> None:
    # 10^6 nested runtime.Array tuples freed by one TVMObjectFree, and handed to main,
    # whose check refuses it
    folder = relax_folder("019", "mlp_dyn")
    out = _run_checks(native, compile_c, tmp_path, folder, "chain", "1000000", "free")
    assert out == "a 1000000-deep tuple: freed\n"
    out = _run_checks(native, compile_c, tmp_path, folder, "chain", "1000000", "main")
    assert out.startswith("main: ArgumentTypeError: ErrorContext(fn=main, loc=param[0], param=x")
    assert out.endswith("expect a Tensor but get Array\nfreed\n")


@pytest.mark.parametrize("what", ["set_input", "save_function"])
def test_a_deep_tuple_given_to_set_input_or_save_function(
    native: NativeBuild, compile_c: Compile, tmp_path: Path, what: str
) -> None:
    folder = relax_folder("019", "mlp_dyn")
    out = _run_checks(native, compile_c, tmp_path, folder, "chain", "1000000", what)
    assert out.startswith(
        f"{what}: InvalidArgumentError: a tuple nested more than 1000 levels deep cannot be "
        "copied to a device"
    ), out
    assert out.endswith("freed\n")
