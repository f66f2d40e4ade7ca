"""libtvmrt_runtime's errors come back through TVMGetLastError as "<Class>: <message>" with
the Python runtime's class names and words: tests/native/c/errors.c makes each mistake
through the C API, and the same mistake is made here through tvmrt's Python runtime."""

from __future__ import annotations

import struct
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from tests.native.conftest import NativeBuild

from tvmrt import runtime


def _python_error(action: Callable[[], object]) -> str:
    with pytest.raises(Exception) as info:  # noqa: PT011 - any tvmrt error, compared below
        action()
    return f"{type(info.value).__name__}: {info.value}"


def _python_messages(artifacts: Path) -> dict[str, str]:
    lib = runtime.load_module(str(artifacts / "relay016" / "systemlib-so" / "deploy.so"))
    m = lib["default"](runtime.cpu())
    good = runtime.nd.array(np.zeros((1, 3, 16, 16), "float32"))
    bad = runtime.nd.array(np.zeros((1, 3, 16, 15), "float32"))
    return {
        "load_missing": _python_error(lambda: runtime.load_module("/nonexistent/x.so")),
        "load_foreign_arch": _python_error(
            lambda: runtime.load_module(str(artifacts / "aarch64" / "deploy_lib.so"))
        ),
        "alloc_vulkan": _python_error(lambda: runtime.nd.empty((2,), "float32", runtime.vulkan())),
        "set_input_unknown_name": _python_error(lambda: m["set_input"]("nope", good)),
        "set_input_wrong_shape": _python_error(lambda: m["set_input"]("data", bad)),
        "get_output_index": _python_error(lambda: m["get_output"](3)),
        "get_input_index_range": _python_error(lambda: m["get_input"](7)),
        "get_input_index_int": _python_error(lambda: m["get_input_index"](7)),
        "load_params_magic": _python_error(lambda: m["load_params"](bytearray(b"A" * 64))),
        "load_params_short": _python_error(lambda: m["load_params"](bytearray(b"A" * 4))),
    }


def _vulkan_blob(out: Path) -> Path:
    """A library whose module blob holds a "vulkan" module: a kind the C runtime has no
    loader for."""

    def text(s: str) -> bytes:
        return struct.pack("<Q", len(s)) + s.encode()

    body = struct.pack("<Q", 2) + text("_lib") + text("vulkan")
    blob = struct.pack("<Q", len(body)) + body
    src = out.with_suffix(".c")
    values = ",".join(str(b) for b in blob)
    src.write_text(f"const unsigned char __tvm_dev_mblob[{len(blob)}] = {{{values}}};\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(out), str(src)], check=True)
    return out


def test_errors_use_the_python_runtime_words(
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    artifacts: Path,
    tmp_path: Path,
) -> None:
    exe = compile_c(native, "errors", False)
    proc = native.run(
        exe,
        artifacts / "relay016" / "systemlib-so" / "deploy.so",
        artifacts / "aarch64" / "deploy_lib.so",
        _vulkan_blob(tmp_path / "vulkan.so"),  # blob: a "vulkan" module
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = dict(line.split(": ", 1) for line in proc.stdout.splitlines())
    assert "NO ERROR" not in got.values(), proc.stdout
    for case, want in _python_messages(artifacts).items():
        if case == "alloc_vulkan":
            # the same words up to the list of backends, which is the C runtime's own (cpu,
            # cuda and opencl) where Python's depends on what this machine has (a driver)
            head = want.split(" on ", 1)[0] + " on "
            assert got[case].startswith(head), (got[case], want)
            assert got[case].endswith(
                "on cpu (the C runtime ships backends for cpu, cuda and opencl)"
            )
            continue
        assert got[case] == want, case
    assert got["global_missing"] == "null"  # TVM: a NULL handle, not an error
    assert got["function_missing"] == "null"
    assert got["graph_json_invalid"].startswith("GraphFormatError: graph JSON is not valid JSON")
    # TVM's words (GraphExecutor::CreateTVMOp)
    assert got["graph_missing_kernel"] == (
        "FunctionNotFoundError: no such function in module: no_such_kernel"
    )
    assert got["graph_create_arity"].endswith(
        "The expected number of arguments for graph_executor.create is at least 4, but it has 2"
    )
    assert "{vulkan}" in got["load_unknown_blob_kind"]
    assert got["load_tar"].startswith("ModuleLoadError: Cannot load deploy.tar: format 'tar'")
