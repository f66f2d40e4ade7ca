"""MLF AOT packages that must fail cleanly, and the compile cache (made here, no TVM).

Each package is written by the test: ``metadata.json`` (version 7), the ``c`` interface's
header and one C file whose ``tvmgen_h_run`` does what the case needs: abort through
``TVMPlatformAbort``, fail with ``TVMAPISetLastError``, include a Cortex-M header, not
compile. None may end the process; each names what went wrong.
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest

import tvmrt._version
from tvmrt.artifact import find_artifact, inspect_artifact, load_artifact
from tvmrt.error import ModuleLoadError, TVMError
from tvmrt.runtime.loaders import link, mlf_aot

HEADER = b"""#include <stdint.h>
struct tvmgen_h_inputs { void* x; };
struct tvmgen_h_outputs { void* output; };
int32_t tvmgen_h_run(struct tvmgen_h_inputs* inputs, struct tvmgen_h_outputs* outputs);
"""

DOUBLE = """
  float* x = (float*)inputs->x;
  float* y = (float*)outputs->output;
  float* scratch = (float*)TVMBackendAllocWorkspace(1, 0, 16, 2, 32);
  if (scratch == 0) return -1;
  for (int i = 0; i < 4; ++i) scratch[i] = x[i] * 2.0f;
  for (int i = 0; i < 4; ++i) y[i] = scratch[i];
  TVMBackendFreeWorkspace(1, 0, scratch);
  return 0;
"""


def _source(body: str, extra_include: str = "") -> bytes:
    return (
        '#include "tvm/runtime/c_runtime_api.h"\n#include "tvm/runtime/c_backend_api.h"\n'
        f"{extra_include}#include <tvmgen_h.h>\n"
        "void TVMPlatformAbort(int32_t code);\n"
        "int32_t tvmgen_h_run(struct tvmgen_h_inputs* inputs, "
        "struct tvmgen_h_outputs* outputs) {" + body + "}\n"
    ).encode()


def _metadata(output_size: int = 16) -> bytes:
    tensor = {"dtype": "float32", "size": 16}
    output = {"dtype": "float32", "size": output_size}
    main = {"inputs": {"x": tensor}, "outputs": {"output": output}, "workspace_size_bytes": 16}
    module = {
        "executors": ["aot"],
        "target": ["c -keys=cpu"],
        "memory": {"functions": {"main": [main]}},
    }
    return json.dumps({"version": 7, "modules": {"h": module}}).encode()


def _package(
    tmp_path: Path,
    source: bytes,
    name: str = "pkg.tar",
    header: bytes = HEADER,
    output_size: int = 16,
) -> Path:
    members = {
        "metadata.json": _metadata(output_size),
        "codegen/host/include/tvmgen_h.h": header,
        "codegen/host/src/h_lib0.c": source,
        "src/h.relay": b"def @main(%x: Tensor[(1, 4), float32]) {\n  %x\n}\n",
    }
    path = tmp_path / name
    with tarfile.open(path, "w") as tar:
        for member, data in members.items():
            info = tarfile.TarInfo(f"./{member}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TVMRT_CACHE_DIR", str(tmp_path / "cache"))


def _run(path: Path) -> np.ndarray:
    face = load_artifact(find_artifact(path)).executor
    face.set_input("x", np.arange(4, dtype="float32").reshape(1, 4))
    face.run()
    return face.get_output(0).numpy()


def test_a_hand_written_package_runs_with_heap_workspace(tmp_path: Path) -> None:
    got = _run(_package(tmp_path, _source(DOUBLE)))
    assert got.tolist() == [0.0, 2.0, 4.0, 6.0]


def test_platform_abort_is_an_error_not_the_end_of_the_process(tmp_path: Path) -> None:
    path = _package(tmp_path, _source("TVMPlatformAbort(7); return 0;"))
    with pytest.raises(TVMError, match=r"tvmgen_h_run returned -2: TVMPlatformAbort\(7\)"):
        _run(path)
    assert _run(_package(tmp_path, _source(DOUBLE), "ok.tar"))[1] == 2.0  # still alive


def test_a_failing_entry_reports_its_last_error(tmp_path: Path) -> None:
    path = _package(tmp_path, _source('TVMAPISetLastError("kernel 3 failed"); return -1;'))
    with pytest.raises(TVMError, match="tvmgen_h_run returned -1: kernel 3 failed"):
        _run(path)


def test_cortex_m_code_is_refused_by_inspect_and_load(tmp_path: Path) -> None:
    path = _package(tmp_path, _source("return 0;", "#include <arm_nnfunctions.h>\n"))
    report = inspect_artifact(find_artifact(path)).to_dict()
    assert not report["runnable"]
    assert any("<arm_nnfunctions.h> (CMSIS-NN (Arm Cortex-M))" in p for p in report["problems"])
    with pytest.raises(ModuleLoadError, match=r"arm_nnfunctions\.h"):
        load_artifact(find_artifact(path))


def test_code_that_does_not_compile_names_the_compiler_error(tmp_path: Path) -> None:
    path = _package(tmp_path, _source("return undeclared_thing;"))
    cache = tmp_path / "cache" / "mlf"
    with pytest.raises(
        ModuleLoadError,
        match=r"(?s)compiling its C code for this host failed.*codegen/host/src/h_lib0\.c:.*undeclared_thing",
    ):
        load_artifact(find_artifact(path))
    assert not any(cache.iterdir())  # no half-written library left


def test_the_compile_is_cached_and_a_damaged_entry_rebuilt(tmp_path: Path) -> None:
    path = _package(tmp_path, _source(DOUBLE))
    package = mlf_aot.describe(mlf_aot.read_package(str(path), "pkg"), "pkg")
    first = mlf_aot.compile_package(package)
    stamp = first.stat().st_mtime_ns
    assert mlf_aot.compile_package(package) == first
    assert first.stat().st_mtime_ns == stamp
    first.write_bytes(first.read_bytes()[:100])  # truncated: no longer its digest
    again = mlf_aot.compile_package(package)
    assert again == first
    assert again.stat().st_size > 100
    assert _run(path)[3] == 6.0


def test_the_cache_key_covers_the_headers_version_and_compiler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the code reads a macro of a header tvmrt passes with -I: a library cached before the
    # header changed would answer with the old header's code
    body = DOUBLE.replace("x[i] * 2.0f", "x[i] * TVMRT_KEY_SCALE")
    source = _source(body, "#ifndef TVMRT_KEY_SCALE\n#define TVMRT_KEY_SCALE 2.0f\n#endif\n")
    path = _package(tmp_path, source)
    package = mlf_aot.describe(mlf_aot.read_package(str(path), "pkg"), "pkg")
    first = mlf_aot.compile_package(package)
    assert _run(path)[3] == 6.0
    headers = tmp_path / "include"
    shutil.copytree(link.include_dir(), headers)
    api = headers / "tvm" / "runtime" / "c_backend_api.h"
    api.write_text("#define TVMRT_KEY_SCALE 3.0f\n" + api.read_text())
    monkeypatch.setattr(link, "include_dir", lambda: headers)
    second = mlf_aot.compile_package(package)
    assert second != first
    assert _run(path)[3] == 9.0
    monkeypatch.setattr(tvmrt._version, "__version__", "0.0.0-another")
    third = mlf_aot.compile_package(package)
    assert third not in (first, second)
    compiler = link.find_compiler()
    assert compiler is not None
    monkeypatch.setenv("CC", shlex.join([*compiler, "-g"]))  # another compiler command
    assert mlf_aot.compile_package(package) not in (first, second, third)


def test_no_compiler_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    with pytest.raises(ModuleLoadError, match="no C compiler was found; install gcc or clang"):
        load_artifact(find_artifact(_package(tmp_path, _source(DOUBLE))))
    assert not os.path.exists(tmp_path / "cache" / "mlf") or not any(
        (tmp_path / "cache" / "mlf").iterdir()
    )


@pytest.mark.parametrize(
    ("output_size", "header", "says"),
    [
        (4, HEADER, r"'output' is 4 bytes in metadata\.json, but the code was compiled for 16"),
        (1 << 40, HEADER, r"'output' is 1099511627776 bytes in metadata\.json, not a whole"),
        (18, HEADER, r"'output' is 18 bytes in metadata\.json, not a whole number of float32"),
        (16, HEADER, None),  # agreeing sizes: it runs
    ],
)
def test_sizes_that_disagree_with_the_code_are_refused(
    tmp_path: Path, output_size: int, header: bytes, says: str | None
) -> None:
    sized = header + b"#define TVMGEN_H_OUTPUT_SIZE 16\n" if says else header
    path = _package(tmp_path, _source(DOUBLE), header=sized, output_size=output_size)
    if says is None:
        assert _run(path).tolist() == [0.0, 2.0, 4.0, 6.0]
        return
    problems = inspect_artifact(find_artifact(path)).to_dict()["problems"]
    assert any(re.search(says, p) for p in problems), problems
    with pytest.raises(ModuleLoadError, match=says):
        load_artifact(find_artifact(path))  # never runs code that would overrun a buffer


def _with_relay(path: Path, relay: bytes) -> Path:
    with tarfile.open(path) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    members["./src/h.relay"] = relay
    with tarfile.open(path, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_an_input_shape_that_disagrees_with_its_size_is_refused(tmp_path: Path) -> None:
    relay = b"def @main(%x: Tensor[(1, 8), float32]) {\n  %x\n}\n"
    path = _with_relay(_package(tmp_path, _source(DOUBLE)), relay)
    says = r"'x' is 16 bytes in metadata\.json, but its shape \(1, 8\) of float32 makes 32"
    with pytest.raises(ModuleLoadError, match=says):
        load_artifact(find_artifact(path))


def test_an_input_dtype_that_contradicts_the_relay_source_is_refused(tmp_path: Path) -> None:
    # the same 16 bytes, but the model was compiled for int32: fed float32 it would answer
    # from the bits of the wrong type
    relay = b"def @main(%x: Tensor[(1, 4), int32]) {\n  %x\n}\n"
    path = _with_relay(_package(tmp_path, _source(DOUBLE)), relay)
    says = (
        r"'x' is float32 in metadata\.json, but int32 of shape \(1, 4\) in its Relay source "
        r"\(src/h\.relay\)"
    )
    problems = inspect_artifact(find_artifact(path)).to_dict()["problems"]
    assert any(re.search(says, p) for p in problems), problems
    with pytest.raises(ModuleLoadError, match=says):
        load_artifact(find_artifact(path))
