"""DLR 1.10's weight order (issue 47, item 7), from libdlr.so's C API and from tvmrt.dlr.

DLR lists a TVM model's weights (``GetDLRWeightName(i)``, the Python ``DLRModel.weight_names``)
in the order TVM v0.8's ``Map<String, NDArray>`` iterates the params file's names: up to four in
file order, past that its hash table's slot order (libstdc++'s string hash, Fibonacci hashing,
the probe table of ``include/tvm/runtime/container/map.h``). DLR 1.10's own
``tests/cpp/dlr_test.cc`` pins it for ResNet-50's 108 weights ``p0`` ... ``p107``: ``p105`` first,
``p76`` last. The folder here is made by the test: those 108 names in a params file, a graph that
returns its input, and a library with no kernels (TVM's export of an empty ``lib0.c``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from tests.native.conftest import NativeBuild
from tests.native.dlr_programs import check_program

from tvmrt import dlr
from tvmrt.dlr._backends import weight_order
from tvmrt.error import DLRError
from tvmrt.runtime.params import save_param_dict


def _folder(root: Path, names: list[str]) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to make the model's (empty) library with")
    folder = root / f"weights-{len(names)}"
    folder.mkdir()
    nodes = ["data", *names]
    graph = {
        "nodes": [{"op": "null", "name": n, "inputs": []} for n in nodes],
        "arg_nodes": list(range(len(nodes))),
        "heads": [[0, 0, 0]],
        "node_row_ptr": list(range(len(nodes) + 1)),
        "attrs": {
            "dltype": ["list_str", ["float32"] * len(nodes)],
            "shape": ["list_shape", [[2]] * len(nodes)],
            "storage_id": ["list_int", list(range(len(nodes)))],
        },
    }
    (folder / "model.json").write_text(json.dumps(graph))
    params = {n: np.full(2, i, "float32") for i, n in enumerate(names)}
    (folder / "model.params").write_bytes(bytes(save_param_dict(params)))
    (folder / "lib0.c").write_text("")
    lib = folder / "model.so"
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-o", str(lib), str(folder / "lib0.c")], check=True
    )
    (folder / "lib0.c").unlink()
    return folder


RESNET50 = [f"p{i}" for i in range(108)]


def test_the_order_is_dlr_1_10s_for_resnet50s_weights() -> None:
    order = weight_order(RESNET50)
    assert (order[0], order[107]) == ("p105", "p76")  # DLR 1.10's dlr_test.cc
    assert sorted(order) == sorted(RESNET50)


def test_up_to_four_names_keep_the_files_order_and_a_repeated_name_is_listed_once() -> None:
    assert weight_order(["w3", "b", "a", "w1"]) == ["w3", "b", "a", "w1"]
    assert weight_order(["b", "a", "b"]) == ["b", "a"]
    assert weight_order([]) == []
    many = [f"layer{i}.weight" for i in range(40)]
    assert weight_order(many + many[:7]) == weight_order(many)  # where TVM's Map.Set keeps them
    with pytest.raises(DLRError, match=r"param name 'a\\x00b' holds a NUL character"):
        weight_order(["a\0b", "a\0c"])  # C strings would list them as one "a"


def test_libdlr_and_tvmrt_dlr_list_the_same_order(
    native: NativeBuild, native_root: Path, tmp_path: Path
) -> None:
    folder = _folder(tmp_path, RESNET50)
    exe = check_program(native, native_root, "dlr_weights")
    done = native.run(exe, folder)
    assert done.returncode == 0, done.stderr
    count, *names = done.stdout.splitlines()
    assert int(count) == 108
    assert names == weight_order(RESNET50)
    model = dlr.DLRModel(str(folder))
    assert model._impl.weight_names == names  # DLR's DLRModelImpl holds them, as DLR 1.10's
    assert model.get_input_names() == ["data"]  # the weights are not inputs
