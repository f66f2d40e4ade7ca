"""``export_library`` of a tvm-ffi factory loaded from a ``.tar`` (TVM's export of a
tvm-ffi graph build: kernels ``lib0.o`` + ``__tvm_ffi__library_bin`` in its own object)
writes one blob, tvm-ffi's, and the result runs; a library an older tvmrt wrote with both
blobs is read by its tvm-ffi one in ``inspect`` and ``run`` alike.

The factory is built by apache-tvm (the test extra) in a child process: this process never
imports ``tvm``.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

from support.cli import tvmrt
from support.paths import REPO
from tvmrt import runtime
from tvmrt.binfmt import abi, binary
from tvmrt.runtime.loaders import link
from tvmrt.runtime.pack_imports import module_blob, pack_imports_to_c

N = 4
BUILD = f"""
import json, sys
import numpy as np
import tvm
from tvm import te
from tvmrt.compiler.build import write_factory_library

a = te.placeholder(({N},), "float32", name="A")
b = te.placeholder(({N},), "float32", name="B")
c = te.compute(({N},), lambda i: a[i] + b[i], name="C")
f = te.create_prim_func([a, b, c]).with_attr("global_symbol", "add_kernel")
target = tvm.target.Target({{"kind": "llvm", "mcpu": "x86-64"}})
lib = tvm.compile(tvm.IRModule({{"add_kernel": f}}), target=target)
op = {{"func_name": "add_kernel", "num_inputs": "2", "num_outputs": "1", "flatten_data": "0"}}
graph = {{
    "nodes": [
        {{"op": "null", "name": "x", "inputs": []}},
        {{"op": "null", "name": "y", "inputs": []}},
        {{"op": "tvm_op", "name": "add", "inputs": [[0, 0, 0], [1, 0, 0]], "attrs": op}},
    ],
    "arg_nodes": [0, 1],
    "node_row_ptr": [0, 1, 2, 3],
    "heads": [[2, 0, 0]],
    "attrs": {{
        "dltype": ["list_str", ["float32"] * 3],
        "shape": ["list_shape", [[{N}]] * 3],
        "storage_id": ["list_int", [0, 1, 2]],
    }},
}}
params = {{"y": np.arange({N}, dtype="float32") * 10}}
write_factory_library(lib, sys.argv[1], json.dumps(graph), params, target)
"""


@pytest.fixture(scope="module")
def factory_tar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if importlib.util.find_spec("tvm") is None:
        pytest.skip("apache-tvm is not installed (pip install -e '.[test]')")
    if link.find_compiler() is None:
        pytest.skip("export_library needs a C compiler")
    out = tmp_path_factory.mktemp("ffi-factory") / "factory.tar"
    env_path = str(REPO / "src")
    done = subprocess.run(
        [sys.executable, "-c", BUILD, str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def _blobs(path: Path) -> list[str]:
    """The module-blob symbols the library's dynamic symbol table defines."""
    defined = {s.name for s in binary.ElfFile.from_path(path).symbols() if s.defined}
    return [name for name in abi.BLOB_SYMBOLS if name in defined]


def _runs(path: Path, tmp_path: Path) -> None:
    """``inspect`` says it runs and ``run`` computes x + y."""
    shown = json.loads(tvmrt("inspect", path, "--json").stdout)
    assert shown["runnable"], shown["problems"]
    assert shown["library"]["abi"] == "tvm-ffi"
    out = tmp_path / "out.npz"
    done = tvmrt("run", path, "--fill", "ones", "-o", out)
    assert done.returncode == 0, done.stderr
    np.testing.assert_array_equal(np.load(out)["add_0"], 1 + np.arange(N, dtype="float32") * 10)


@pytest.mark.parametrize("suffix", [".so", ".tar"])
def test_reexport_writes_one_tvm_ffi_blob_and_runs(
    factory_tar: Path, tmp_path: Path, suffix: str
) -> None:
    factory = runtime.load_module(str(factory_tar))
    again = tmp_path / f"again{suffix}"
    factory.export_library(str(again))
    if suffix == ".so":
        assert _blobs(again) == ["__tvm_ffi__library_bin"]
    else:
        with tarfile.open(again) as tar:
            names = tar.getnames()
        assert sum(1 for n in names if n.endswith((".c", ".o")) and "devc" in n) == 1, names
    _runs(again, tmp_path)


def test_a_library_with_both_blobs_is_read_by_its_tvm_ffi_one(
    factory_tar: Path, tmp_path: Path
) -> None:
    """What an older tvmrt wrote: the tar's objects plus a legacy ``devc.c``."""
    with tarfile.open(factory_tar) as tar:
        tar.extractall(tmp_path / "members", filter="data")
    objects = sorted(str(p) for p in (tmp_path / "members").iterdir())
    factory = runtime.load_module(str(factory_tar))
    devc = tmp_path / "devc.c"
    devc.write_text(pack_imports_to_c(module_blob(factory), False))
    both = tmp_path / "both.so"
    cc = link.find_compiler()
    assert cc is not None
    subprocess.run([*cc, "-shared", "-fPIC", "-o", str(both), *objects, str(devc)], check=True)
    assert _blobs(both) == ["__tvm_dev_mblob", "__tvm_ffi__library_bin"]
    _runs(both, tmp_path)
