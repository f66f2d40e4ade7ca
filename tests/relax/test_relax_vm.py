"""The Relax VM through TVM's Python face (``tvmrt.relax.VirtualMachine``), every era.

Each fixture of ``build/fixtures/relax<era>`` (TVM 0.16, 0.19, 0.21, 0.25 and 0.27 built it;
the goldens are that TVM's own VM in its own process) runs on tvmrt's C engine and must give
the golden bytes exactly: an MLP with a dynamic batch (two batch sizes), a CNN, an ONNX CNN
with its weights as tensor constants, a nested tuple result holding a shape, the relax.run.*
functions TVM has only in Python (with their printed text), R.If with a closure and a call
of another global function, and compiled mode (exec_mode="compiled"). Then TVM's calls of
the face (stateful API, save_function, time_evaluator, profile, the instrument, named
arguments), tvmrt.runtime.vm.VirtualMachine taking a Relax executable, the signature read
from the executable, and the refusals (a library calling the LLM KV-cache builtins).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import support.fixtures as fx
from support.paths import REPO
from tvmrt import relax, runtime
from tvmrt.error import InvalidArgumentError, UnsupportedError
from tvmrt.runtime import relax_vm
from tvmrt.runtime import vm as relay_vm

MODELS = ("mlp_dyn", "cnn", "onnx_cnn", "tuple_out", "run_builtins", "control", "compiled")


def _folder(era: str, model: str) -> Path:
    return fx.artifact_folder(f"relax{era}") / model


def _case(folder: Path) -> dict[str, Any]:
    case: dict[str, Any] = json.loads((folder / "case.json").read_text())
    return case


def _inputs(folder: Path, run: dict[str, Any]) -> list[np.ndarray[Any, Any]]:
    data = np.load(folder / run["inputs"])
    return [data[f"arg{i}"] for i in range(len(data.files))]


def _flat(value: Any) -> list[np.ndarray[Any, Any]]:
    if isinstance(value, runtime.NDArray):
        return [value.numpy()]
    if isinstance(value, runtime.ShapeTuple):
        return [np.array(tuple(value), dtype="int64")]
    return [a for item in value for a in _flat(item)]


def _assert_bitwise(got: list[np.ndarray[Any, Any]], golden: Any) -> None:
    assert len(got) == len(golden.files)
    for i, arr in enumerate(got):
        ref = golden[f"out{i}"]
        assert (arr.shape, arr.dtype) == (ref.shape, ref.dtype), f"out{i}"
        assert arr.tobytes() == ref.tobytes(), f"out{i} differs"


def _vm(folder: Path) -> relax.VirtualMachine:
    return relax.VirtualMachine(runtime.load_module(str(folder / "model.so")), runtime.cpu())


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("era", fx.RELAX_ERAS)
def test_fixture_runs_bitwise_as_its_tvm(
    era: str, model: str, capfd: pytest.CaptureFixture[str]
) -> None:
    folder = _folder(era, model)
    case = _case(folder)
    vm = _vm(folder)
    for run in case["runs"]:
        args = [runtime.array(a) for a in _inputs(folder, run)]
        capfd.readouterr()
        out = vm[case["function"]](*args)
        printed = capfd.readouterr().out
        _assert_bitwise(_flat(out), np.load(folder / run["golden"]))
        if "stdout" in run:  # relax.run.print: numpy's rendering, as TVM's Python prints it
            assert printed == run["stdout"]


@pytest.mark.parametrize("era", fx.RELAX_ERAS)
def test_stateful_api_and_save_function(era: str) -> None:
    folder = _folder(era, "tuple_out")
    run = _case(folder)["runs"][0]
    golden = np.load(folder / run["golden"])
    vm = _vm(folder)
    vm.set_input("main", *_inputs(folder, run))  # numpy arrays: TVM's _convert
    vm.invoke_stateful("main")
    outputs = vm.get_outputs("main")
    assert isinstance(outputs, tuple)
    _assert_bitwise(_flat(outputs), golden)
    vm.save_function("main", "main_saved", *[runtime.array(a) for a in _inputs(folder, run)])
    _assert_bitwise(_flat(vm["main_saved"]()), golden)
    vm.save_function("main", "main_quiet", *_inputs(folder, run), include_return=False)
    assert vm["main_quiet"]() is None


def test_unknown_function_and_missing_inputs_name_what_is_wrong() -> None:
    vm = _vm(_folder("027", "mlp_dyn"))
    with pytest.raises(InvalidArgumentError, match="Unknown function: nope"):
        vm.invoke_stateful("nope")
    with pytest.raises(InvalidArgumentError, match="No inputs set for stateful call of main"):
        vm.invoke_stateful("main")
    with pytest.raises(InvalidArgumentError, match=r"expects 5 arguments \(x, fc1_weight"):
        vm["main"](runtime.array(np.zeros((1, 16), "float32")))
    bad = [
        np.zeros((2, 15), "float32"),
        *_inputs(_folder("027", "mlp_dyn"), _case(_folder("027", "mlp_dyn"))["runs"][0])[1:],
    ]
    with pytest.raises(InvalidArgumentError, match=r"match_cast error.*shape\[1\].*16"):
        vm["main"](*[runtime.array(a) for a in bad])
    wrong_dtype = [a.astype("float64") if i == 0 else a for i, a in enumerate(bad)]
    with pytest.raises(
        InvalidArgumentError, match="expect Tensor with dtype float32 but get float64"
    ):
        vm["main"](*[runtime.array(a) for a in wrong_dtype])


def test_named_arguments_time_evaluator_and_profile() -> None:
    folder = _folder("027", "mlp_dyn")
    run = _case(folder)["runs"][1]
    x, *weights = _inputs(folder, run)
    vm = _vm(folder)
    names = vm.function_params("main")
    assert names == ["x", "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"]
    vm.set_input("main", x, **dict(zip(names[1:], weights, strict=True)))
    vm.invoke_stateful("main")
    _assert_bitwise([vm.get_outputs("main").numpy()], np.load(folder / run["golden"]))
    timer = vm.time_evaluator("invoke_stateful", runtime.cpu(), number=3, repeat=2)
    assert len(timer("main").results) == 2
    report = vm.profile("main", *[runtime.array(a) for a in (x, *weights)])
    names_called = [str(c["Name"]) for c in report.calls]
    assert "matmul" in names_called
    assert "vm.builtin.alloc_storage" in names_called
    assert report.configuration["Executor"] == "VM"


def test_instrument_sees_every_call_and_can_skip() -> None:
    folder = _folder("019", "cnn")
    run = _case(folder)["runs"][0]
    vm = _vm(folder)
    seen: list[tuple[str, bool]] = []

    def instrument(func: Any, name: str, before: bool, ret: Any, *args: Any) -> int:
        seen.append((str(name), bool(before)))
        return 0

    vm.set_instrument(instrument)
    out = vm["main"](*[runtime.array(a) for a in _inputs(folder, run)])
    _assert_bitwise([out.numpy()], np.load(folder / run["golden"]))
    kernels = [n for n, before in seen if before and not n.startswith("vm.builtin")]
    assert kernels == _case(folder)["kernels"]
    assert seen.count(("conv2d", True)) == seen.count(("conv2d", False)) == 1

    def skip_kernels(func: Any, name: str, before: bool, ret: Any, *args: Any) -> int:
        return int(before and not str(name).startswith("vm.builtin"))

    vm.set_instrument(skip_kernels)
    skipped = vm["main"](*[runtime.array(a) for a in _inputs(folder, run)])
    assert skipped.shape == (1, 10)  # allocated, never written by the skipped kernels


def test_relay_vm_face_takes_a_relax_executable_as_tvm_027() -> None:
    folder = _folder("027", "cnn")
    run = _case(folder)["runs"][0]
    vm = relay_vm.VirtualMachine(runtime.load_module(str(folder / "model.so")), runtime.cpu())
    assert isinstance(vm, relax_vm.VirtualMachine)
    _assert_bitwise([vm["main"](*_inputs(folder, run)).numpy()], np.load(folder / run["golden"]))


def test_signature_comes_from_the_executable() -> None:
    vm = _vm(_folder("027", "mlp_dyn"))
    (x, w1, *_rest) = vm.inputs
    assert (x.name, x.shape, x.dtype) == ("x", (-1, 16), "float32")
    assert (w1.shape, w1.dtype) == ((32, 16), "float32")
    described = vm.describe()
    assert described["era"] == "TVM >= 0.22"
    assert described["kind"] == "relax.VMExecutable"
    legacy = relax_vm.describe(runtime.load_module(str(_folder("019", "mlp_dyn") / "model.so")))
    assert (legacy["era"], legacy["kind"]) == ("TVM <= 0.20", "relax.Executable")
    provided = {f["name"]: f.get("provided_by") for f in described["functions"]}
    assert provided["matmul"] == "kernel"
    assert provided["vm.builtin.match_shape"] == "builtin"


def test_llm_library_is_refused_naming_the_kv_cache_builtins() -> None:
    lib = runtime.load_module(str(_folder("027", "llm_like") / "model.so"))
    described = relax_vm.describe(lib)
    refused = {f["name"] for f in described["functions"] if f.get("provided_by") == "refused"}
    assert "vm.builtin.attention_kv_cache_create" in refused
    assert "vm.builtin.paged_attention_kv_cache_create" in refused
    with pytest.raises(UnsupportedError) as caught:
        relax.VirtualMachine(lib, runtime.cpu())
    message = str(caught.value)
    for name in refused:
        assert name in message
    assert "LLM KV cache" in message


def test_a_019_and_a_027_executable_run_side_by_side_in_one_process() -> None:
    code = (
        "import numpy as np, sys\n"
        "from tvmrt import relax, runtime\n"
        "vms, outs = [], []\n"
        "for folder in sys.argv[1:]:\n"
        "    vms.append(relax.VirtualMachine(runtime.load_module(folder + '/model.so'), runtime.cpu()))\n"
        "for vm, folder in zip(vms, sys.argv[1:]):\n"
        "    d = np.load(folder + '/run1_inputs.npz'); g = np.load(folder + '/run1_golden.npz')\n"
        "    out = vm['main'](*[runtime.array(d[f'arg{i}']) for i in range(5)])\n"
        "    outs.append(out.numpy().tobytes() == g['out0'].tobytes())\n"
        "print(outs)\n"
    )
    folders = [str(_folder(era, "mlp_dyn")) for era in ("019", "027")]
    done = subprocess.run(
        [sys.executable, "-c", code, *folders],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[True, True]"


def test_legacy_executables_run_beside_an_imported_tvm() -> None:
    # TVM 0.27 imported first exports TVMBackendAnyList* (its tvm-ffi ABI) and TVMBackend*
    # to the whole process; a TVM <= 0.20 library importing those names by name (compiled
    # mode, C-target kernels) must still get tvmrt's, and tvmrt its own functions
    pytest.importorskip("tvm", reason="apache-tvm (TVM 0.27) is a test dependency")
    code = (
        "import numpy as np, sys\n"
        "import tvm\n"
        "from tvmrt import relax, runtime\n"
        "outs = []\n"
        "for folder in sys.argv[1:]:\n"
        "    vm = relax.VirtualMachine(runtime.load_module(folder + '/model.so'), runtime.cpu())\n"
        "    d = np.load(folder + '/run0_inputs.npz'); g = np.load(folder + '/run0_golden.npz')\n"
        "    out = vm['main'](*[runtime.array(d[f'arg{i}']) for i in range(len(d.files))])\n"
        "    outs.append(out.numpy().tobytes() == g['out0'].tobytes())\n"
        "print(outs)\n"
    )
    folders = [str(_folder(era, model)) for era in ("016", "019") for model in ("compiled", "cnn")]
    done = subprocess.run(
        [sys.executable, "-c", code, *folders],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[True, True, True, True]"
