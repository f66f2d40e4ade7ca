"""A kernel library with no kernels loads as TVM 0.19 loads it: a ``library`` module with no
functions (issue 47, item 1).

TVM exports a module that has no kernels (a Relay VM whose ops are all VM instructions,
tuples or ADTs; a graph that only passes its inputs through) as a library built from an
empty ``lib0.c``: it defines no symbol at all, and its GNU hash table hashes nothing. tvmrt
refused it twice: its ELF check read that table's symbol count as exact ("the symbol count of
DT_GNU_HASH chains is 1; expected 5"), and its loader called it "not a TVM module". The
library here is made the way TVM's export makes it (the C compiler on an empty source).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from support.cli import tvmrt
from tvmrt import runtime
from tvmrt.contrib import graph_executor
from tvmrt.runtime import vm as vm_rt
from tvmrt.runtime.vm import opcodes as op
from tvmrt.runtime.vm.format import ExecutableData, VMFunction, write_executable


@pytest.fixture(scope="module")
def empty_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to make the empty library with")
    folder = tmp_path_factory.mktemp("empty")
    (folder / "lib0.c").write_text("")
    lib = folder / "lib.so"
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-o", str(lib), str(folder / "lib0.c")], check=True
    )
    return lib


def test_it_loads_as_a_library_module_with_no_functions(empty_lib: Path) -> None:
    lib = runtime.load_module(str(empty_lib))
    assert lib.type_key == "library"
    assert lib.imported_modules == []
    with pytest.raises(AttributeError):
        lib.get_function("anything", query_imports=True)
    from_bytes = runtime.load_module(empty_lib.read_bytes())
    assert from_bytes.type_key == "library"


def test_a_relay_vm_executable_without_kernels_runs_over_it(empty_lib: Path) -> None:
    # main(x, y) = (x, y): AllocADT only, as relay.vm.compile makes of a tuple function
    main = VMFunction("main", 3, ["x", "y"], [0, 0], [(op.ALLOC_ADT, 0, 2, 2, 0, 1), (op.RET, 2)])
    data = ExecutableData("0.16.dev0", [(1, 0, "")], 0, ["main"], [], [], [], {}, [main])
    (empty_lib.parent / "code.ro").write_bytes(write_executable(data))
    x, y = np.arange(3, dtype="float32"), np.ones((2, 2), "int32")
    for engine in ("native", "python"):
        exe = vm_rt.Executable.load_exec(
            (empty_lib.parent / "code.ro").read_bytes(), runtime.load_module(str(empty_lib))
        )
        machine = vm_rt.VirtualMachine(exe, runtime.cpu(), engine=engine)
        assert machine.engine == engine, machine.engine_reason
        out = machine.invoke("main", x, y)
        assert [f.numpy().tobytes() for f in out] == [x.tobytes(), y.tobytes()]


def test_a_graph_with_no_operators_runs_over_it(empty_lib: Path) -> None:
    graph = {
        "nodes": [{"op": "null", "name": "x", "inputs": []}],
        "arg_nodes": [0],
        "heads": [[0, 0, 0]],
        "node_row_ptr": [0, 1],
        "attrs": {
            "dltype": ["list_str", ["float32"]],
            "shape": ["list_shape", [[2, 3]]],
            "storage_id": ["list_int", [0]],
        },
    }
    module = graph_executor.create(
        json.dumps(graph), runtime.load_module(str(empty_lib)), runtime.cpu()
    )
    x = np.arange(6, dtype="float32").reshape(2, 3)
    module.run(x=x)
    assert module.get_output(0).numpy().tobytes() == x.tobytes()


def test_inspect_says_it_runs_with_a_graph_or_code_beside_it(empty_lib: Path) -> None:
    done = tvmrt("inspect", empty_lib)
    assert "is not a TVM module" not in done.stdout + done.stderr
    assert "DT_GNU_HASH" not in done.stdout + done.stderr
    assert "a library with no kernels" in done.stdout
