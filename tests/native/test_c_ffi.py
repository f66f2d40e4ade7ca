"""tvm-ffi kernel libraries (TVM >= 0.21) in the C runtime, plain and under ASan + UBSan:
the repository's digits model as `tvmrt compile` built it (graph JSON + tvm-ffi deploy.so)
runs from a C program bitwise equal to the Python runtime, a kernel's own error comes back
with the Python runtime's words, and a library this test builds (tests/native/c/ffi_toy.c)
shows how arguments reach a kernel and that an unknown tvm-ffi import is refused at load;
the single-file build (standalone.so, its modules in __tvm_ffi__library_bin) runs too, and
so does a CNN `tvmrt compile` builds here with today's TVM (needs the compile extra)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from tests.native.conftest import C_DIR, NativeBuild

from tvmrt import runtime
from tvmrt.contrib import graph_executor
from tvmrt.error import KernelError

MODEL = Path(__file__).resolve().parents[2] / "examples" / "digits" / "model"


def _toy(tmp_path: Path, *defines: str) -> Path:
    out = tmp_path / f"libtoy{''.join(defines)}.so"
    cmd = ["cc", "-shared", "-fPIC", "-O2", *defines, str(C_DIR / "ffi_toy.c"), "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return out


def test_arguments_results_and_errors(
    native: NativeBuild, compile_c: Callable[..., Path], tmp_path: Path
) -> None:
    proc = native.run(compile_c(native, "ffi_calls"), "toy", _toy(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == "ok\n"


def test_an_unknown_tvm_ffi_import_is_refused_at_load(
    native: NativeBuild, compile_c: Callable[..., Path], tmp_path: Path
) -> None:
    lib = _toy(tmp_path, "-DUNKNOWN_IMPORT")
    proc = native.run(compile_c(native, "ffi_calls"), "load", lib)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith(f"ModuleLoadError: cannot load '{lib}': it was built for a ")
    assert "needs TVMFFIObjectIncRef, which the runtime does not provide" in proc.stdout


def test_digits_model_runs_bitwise_as_in_python(
    native: NativeBuild, compile_c: Callable[..., Path], tmp_path: Path
) -> None:
    with np.load(MODEL / "heldout.npz") as npz:
        image = npz["image"].astype(np.float32)
    image.tofile(tmp_path / "image.bin")
    proc = native.run(
        compile_c(native, "run_model"),
        "files",
        MODEL / "deploy.so",
        MODEL / "deploy.json",
        MODEL / "deploy.params",
        "image",
        tmp_path / "image.bin",
        tmp_path / "out_",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lib = runtime.load_module(str(MODEL / "deploy.so"))
    module = graph_executor.create((MODEL / "deploy.json").read_text(), lib, runtime.cpu())
    module.load_params((MODEL / "deploy.params").read_bytes())
    module.run(image=image)
    expected = module.get_output(0).numpy()
    assert (tmp_path / "out_0.bin").read_bytes() == expected.astype("<f4").tobytes()


def test_a_kernel_error_has_the_python_runtimes_words(
    native: NativeBuild, compile_c: Callable[..., Path]
) -> None:
    name = "fused_matmul_add_relu"
    proc = native.run(compile_c(native, "ffi_calls"), "bad-call", MODEL / "deploy.so", name)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wrong = runtime.nd.array(np.zeros((2, 64), "float32"))
    with pytest.raises(KernelError) as info:
        runtime.load_module(str(MODEL / "deploy.so"))[name](wrong, wrong, wrong, wrong)
    assert proc.stdout == f"{info.value}\n"
    assert proc.stdout.startswith("ValueError: Mismatched param_1.ndim on argument #2")


def test_a_single_file_build_runs_from_its_factory(
    native: NativeBuild, compile_c: Callable[..., Path], tmp_path: Path
) -> None:
    """standalone.so: kernels and the graph factory in __tvm_ffi__library_bin, one file."""
    with np.load(MODEL / "heldout.npz") as npz:
        image = npz["image"].astype(np.float32)
    image.tofile(tmp_path / "image.bin")
    exe = compile_c(native, "run_model")
    proc = native.run(
        exe, "factory", MODEL / "standalone.so", "image", tmp_path / "image.bin", tmp_path / "o"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    module = runtime.load_module(str(MODEL / "standalone.so"))["default"](runtime.cpu())
    module["set_input"]("image", runtime.nd.array(image))
    module["run"]()
    expected = module["get_output"](0).numpy()
    assert (tmp_path / "o0.bin").read_bytes() == expected.astype("<f4").tobytes()


@pytest.fixture(scope="module")
def compiled_cnn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`tvmrt compile` of a small ONNX CNN (convolutions, pooling, dense) with today's TVM."""
    if importlib.util.find_spec("tvm") is None or importlib.util.find_spec("onnx") is None:
        pytest.skip("needs the compile extra: pip install 'tvmrt[compile]'")
    import onnx

    from tvmrt.compiler import testing as models

    work = tmp_path_factory.mktemp("compiled-cnn")
    onnx.save(models.cnn(), str(work / "cnn.onnx"))
    cmd = [
        sys.executable,
        "-m",
        "tvmrt",
        "compile",
        str(work / "cnn.onnx"),
        "-o",
        str(work / "out"),
    ]
    proc = subprocess.run(
        [*cmd, "--input-shape", "x=2x3x32x32"], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return work / "out"


@pytest.mark.parametrize("form", ["files", "factory"])
def test_a_model_compiled_here_runs_bitwise_as_in_python(
    native: NativeBuild,
    compile_c: Callable[..., Path],
    compiled_cnn: Path,
    tmp_path: Path,
    form: str,
) -> None:
    x = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)
    x.tofile(tmp_path / "x.bin")
    if form == "files":
        lib = compiled_cnn / "deploy.so"
        where = [lib, compiled_cnn / "deploy.json", compiled_cnn / "deploy.params"]
        module = graph_executor.create(
            (compiled_cnn / "deploy.json").read_text(), runtime.load_module(str(lib)), runtime.cpu()
        )
        module.load_params((compiled_cnn / "deploy.params").read_bytes())
        module.run(x=x)
        expected = module.get_output(0).numpy()
    else:
        where = [compiled_cnn / "standalone.so"]
        factory = runtime.load_module(str(where[0]))["default"](runtime.cpu())
        factory["set_input"]("x", runtime.nd.array(x))
        factory["run"]()
        expected = factory["get_output"](0).numpy()
    exe = compile_c(native, "run_model")
    proc = native.run(exe, form, *where, "x", tmp_path / "x.bin", tmp_path / "o")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert expected.shape == (2, 10)
    assert (tmp_path / "o0.bin").read_bytes() == expected.astype("<f4").tobytes()
