"""The C runtime makes the Python runtime's checks, with the same error class and words.

One table of hostile inputs, each made here from a real model (relay016's tvmc-package: a
small CNN ending in softmax) by mutating its graph JSON, its params or the input array. Each
runs through the Python runtime's packed-function face and through a C program driving
libtvmrt_runtime's C API (tests/native/c/checks.c), plain and under ASan + UBSan + LSan. A
row either names the error (both sides must fail at the same step with that class and
words) or runs (both outputs must equal TVM's golden output bit for bit). Issue 31 found the
C runtime answering these wrong with exit 0.
"""

from __future__ import annotations

import copy
import json
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.native.conftest import NativeBuild

from tvmrt import runtime
from tvmrt.error import TVMError

Graph = dict[str, Any]
Params = dict[str, np.ndarray]


@dataclass(frozen=True)
class Hostile:
    """One hostile input and what both runtimes must answer."""

    name: str
    mode: str = "plain"  # how the input is given: see checks.c
    graph: Callable[[Graph], None] | None = None  # mutates the decoded graph JSON
    text: Callable[[str], str] | None = None  # rewrites the graph JSON text
    params: Callable[[Params], None] | None = None  # mutates the params dict
    error: str | None = None  # "<step>: <Class>: <words in both>"; None: runs to golden
    same_words: bool = True  # the whole line is equal on both sides (else the fragment)


def _sid(eid: int, sid: int) -> Callable[[Graph], None]:
    def mutate(g: Graph) -> None:
        g["attrs"]["storage_id"][1][eid] = sid

    return mutate


def _rename(nid: int, name: str) -> Callable[[Graph], None]:
    def mutate(g: Graph) -> None:
        g["nodes"][nid]["name"] = name

    return mutate


def _unlist(nid: int) -> Callable[[Graph], None]:
    def mutate(g: Graph) -> None:
        g["arg_nodes"].remove(nid)

    return mutate


def _shape(eid: int, shape: list[int]) -> Callable[[Graph], None]:
    def mutate(g: Graph) -> None:
        g["attrs"]["shape"][1][eid] = shape

    return mutate


def _device(eid: int | None, device_type: int) -> Callable[[Graph], None]:
    """device_index[eid] (every entry's when eid is None) set to device_type."""

    def mutate(g: Graph) -> None:
        table = g["attrs"]["device_index"][1]
        for i in range(len(table)) if eid is None else [eid]:
            table[i] = device_type

    return mutate


def _int_attr(g: Graph) -> None:
    g["nodes"][1]["attrs"]["num_inputs"] = 1


def _word_attr(g: Graph) -> None:
    g["nodes"][1]["attrs"]["flatten_data"] = "yes"


def _param(name: str, change: Callable[[np.ndarray], np.ndarray]) -> Callable[[Params], None]:
    def mutate(p: Params) -> None:
        p[name] = change(p[name])

    return mutate


def _set(*path: str | int, value: object) -> Callable[[Graph], None]:
    """Sets graph[path[0]][path[1]]... = value (a key that is not there is added)."""

    def mutate(g: Graph) -> None:
        target: Any = g
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return mutate


def _pop(*path: str | int) -> Callable[[Graph], None]:
    def mutate(g: Graph) -> None:
        target: Any = g
        for key in path[:-1]:
            target = target[key]
        target.pop(path[-1])

    return mutate


L1 = "'tvmgen_default_fused_layout_transform'"  # node 1
CONV = "'tvmgen_default_fused_nn_contrib_conv2d_NCHWc_add_nn_relu'"  # node 4


def _leading_zero(text: str) -> str:
    assert '"arg_nodes": [0, ' in text
    return text.replace('"arg_nodes": [0, ', '"arg_nodes": [00, ')


# the model: entries = nodes; 0 data, 1 layout_transform, 2 p0, 3 p1, 4 conv (reads 1, 2, 3),
# 5 max_pool (storage 1, free after node 4), 6 p2, 7 p3, 8 conv, 9 pool, 10 flatten (storage
# 8), 11 p4, 12 p5, 13 dense (reads 10, 11, 12), 14 softmax (storage 8, the output)
CASES = [
    Hostile(
        "kernel_output_in_its_input_pool",  # item 1: the dense kernel writes where it reads
        graph=_sid(13, 8),
        error="create: GraphFormatError: graph JSON: attrs['storage_id'] puts output 0 of "
        "node 10 'tvmgen_default_fused_layout_transform_nn_batch_flatten' (alive at nodes "
        "10..13) and output 0 of node 13 'tvmgen_default_fused_nn_contrib_dense_pack_add' "
        "(alive at nodes 13..14) in storage pool 8, but both are alive at node 13",
    ),
    Hostile(
        "kernel_output_in_a_weight_pool",  # item 1: every run overwrites p2
        graph=_sid(10, 5),
        error="create: GraphFormatError: graph JSON: node 10 "
        "('tvmgen_default_fused_layout_transform_nn_batch_flatten') writes output 0 into "
        "storage pool 5, which holds input 'p2' (node 6)",
    ),
    Hostile(
        "two_inputs_one_pool",
        graph=_sid(2, 3),
        error="create: GraphFormatError: graph JSON: inputs 'p0' (node 2) and 'p1' (node 3) "
        "share storage pool 3",
    ),
    Hostile(
        "storage_id_implausible",
        graph=_sid(14, 1_000_000),
        error="create: GraphFormatError: graph JSON: attrs['storage_id']: storage id 1000000 "
        "is implausibly large",
    ),
    Hostile(
        "duplicate_input_name",  # item 4: one of the two could never be set
        graph=_rename(3, "p0"),
        error="create: GraphFormatError: graph JSON: arg_nodes: inputs 2 and 3 are both named "
        "'p0'; input names must be unique",
    ),
    Hostile(
        "param_node_not_in_arg_nodes",  # item 5, Python too: nothing can set p1
        graph=_unlist(3),
        error="create: GraphFormatError: graph JSON: arg_nodes: node 3 ('p1') is an input or "
        'param (op "null") but arg_nodes does not list it, so nothing could set it',
    ),
    Hostile(
        "leading_zero_in_json",
        text=_leading_zero,
        error="create: GraphFormatError: graph JSON is not valid JSON",
        same_words=False,  # each JSON reader says where in its own words
    ),
    Hostile(
        "op_attr_not_a_string",
        graph=_int_attr,
        error="create: GraphFormatError: graph JSON: nodes[1] "
        "('tvmgen_default_fused_layout_transform'): attrs['num_inputs'] must be a string",
        same_words=False,  # Python shows the value
    ),
    Hostile(
        "op_attr_not_decimal",
        graph=_word_attr,
        error="create: GraphFormatError: graph JSON: nodes[1] "
        "('tvmgen_default_fused_layout_transform'): attrs['flatten_data'] must be a decimal "
        "integer string, got 'yes'",
    ),
    # the graph's structure: the C runtime's words are the Python runtime's
    Hostile(
        "unknown_top_level_key",
        graph=_set("extra", value=1),
        error="create: GraphFormatError: graph JSON: top level: key 'extra' is not supported; "
        "keys are ['arg_nodes', 'attrs', 'heads', 'metadata', 'node_row_ptr', 'nodes']",
    ),
    Hostile(
        "unknown_node_key",
        graph=_set("nodes", 1, "foo", value=1),
        error="create: GraphFormatError: graph JSON: nodes[1]: do not support key 'foo'; node "
        "keys are ['attr', 'attrs', 'control_deps', 'inputs', 'name', 'op']",
    ),
    Hostile(
        "node_without_inputs",
        graph=_pop("nodes", 1, "inputs"),
        error="create: GraphFormatError: graph JSON: nodes[1]: missing required key 'inputs'",
    ),
    Hostile(
        "op_not_tvm_op",
        graph=_set("nodes", 1, "op", value="conv"),
        error=f"create: GraphFormatError: graph JSON: nodes[1] ({L1}): op must be 'null' or "
        "'tvm_op', got 'conv'",
    ),
    Hostile(
        "op_attrs_miss_num_outputs",
        graph=_pop("nodes", 1, "attrs", "num_outputs"),
        error=f"create: GraphFormatError: graph JSON: nodes[1] ({L1}): attrs misses "
        "['num_outputs']; a tvm_op needs ['func_name', 'num_inputs', 'num_outputs', "
        "'flatten_data']",
    ),
    Hostile(
        "null_node_with_inputs",
        graph=_set("nodes", 2, "inputs", value=[[0, 0, 0]]),
        error="create: GraphFormatError: graph JSON: nodes[2] ('p0'): a null node takes no inputs",
    ),
    Hostile(
        "input_from_a_later_node",
        graph=_set("nodes", 4, "inputs", 0, value=[9, 0, 0]),
        error=f"create: GraphFormatError: graph JSON: nodes[4] ({CONV}) inputs[0]: refers to "
        "node 9, but only nodes 0..3 can be used here",
    ),
    Hostile(
        "input_of_a_missing_output",
        graph=_set("nodes", 4, "inputs", 0, value=[1, 3, 0]),
        error=f"create: GraphFormatError: graph JSON: nodes[4] ({CONV}) inputs[0]: refers to "
        f"output 3 of node 1 ({L1}), which has 1 output(s)",
    ),
    Hostile(
        "input_not_a_pair",
        graph=_set("nodes", 4, "inputs", 0, value=[1]),
        error=f"create: GraphFormatError: graph JSON: nodes[4] ({CONV}) inputs[0]: expected "
        "[node_id, index] or [node_id, index, version]",
        same_words=False,  # Python shows the value
    ),
    Hostile(
        "head_out_of_range",
        graph=_set("heads", 0, value=[15, 0, 0]),
        error="create: GraphFormatError: graph JSON: heads[0]: refers to node 15, but only "
        "nodes 0..14 can be used here",
    ),
    Hostile(
        "node_row_ptr_wrong",
        graph=_set("node_row_ptr", 5, value=6),
        error="create: GraphFormatError: graph JSON: node_row_ptr[5]: is 6 but node 4 "
        f"({CONV}) has 1 outputs, so it must be 5",
    ),
    Hostile(
        "node_row_ptr_short",
        graph=_pop("node_row_ptr", 15),
        error="create: GraphFormatError: graph JSON: node_row_ptr: has 15 items, expected 16 "
        "(nodes + 1)",
    ),
    Hostile(
        "arg_node_is_a_kernel",
        graph=_set("arg_nodes", 1, value=1),
        error=f"create: GraphFormatError: graph JSON: arg_nodes[1]: node 1 ({L1}) is not a "
        "null node",
    ),
    Hostile(
        "arg_node_missing",
        graph=_set("arg_nodes", 1, value=99),
        error="create: GraphFormatError: graph JSON: arg_nodes[1]: node 99 does not exist (15 "
        "nodes)",
    ),
    Hostile(
        "shape_table_short",
        graph=_pop("attrs", "shape", 1, 14),
        error="create: GraphFormatError: graph JSON: attrs['shape']: has 14 items but the "
        "graph has 15 entries",
    ),
    Hostile(
        "shape_dim_negative",
        graph=_set("attrs", "shape", 1, 3, 1, value=-2),
        error="create: GraphFormatError: graph JSON: attrs['shape'][3]: expected an integer "
        ">= 0, got -2",
    ),
    Hostile(
        "storage_id_negative",
        graph=_set("attrs", "storage_id", 1, 3, value=-1),
        error="create: GraphFormatError: graph JSON: attrs['storage_id'][3]: expected an "
        "integer >= 0, got -1",
    ),
    Hostile(
        "dltype_unknown",
        graph=_set("attrs", "dltype", 1, 3, value="floaty"),
        error="create: GraphFormatError: graph JSON: attrs['dltype'][3]: unknown type 'floaty'",
    ),
    Hostile(
        "storage_id_table_mistagged",
        graph=_set("attrs", "storage_id", 0, value="list_str"),
        error="create: GraphFormatError: graph JSON: attrs['storage_id']: expected "
        "['list_int', [...]]",
        same_words=False,  # Python shows the tag
    ),
    Hostile(
        "unknown_attrs_table",
        graph=_set("attrs", "weird", value=["list_str", []]),
        error="create: GraphFormatError: graph JSON: attrs: cannot skip graph attr 'weird' with "
        "type tag 'list_str'",
    ),
    Hostile(
        "param_of_another_layout_same_bytes",  # item 4: the weight in another layout
        params=_param("p0", lambda a: np.ascontiguousarray(a.transpose(5, 4, 3, 2, 1, 0))),
        error="load_params: ArrayError: param 'p0' has shape (4, 3, 3, 3, 1, 2) and dtype "
        "float32, but the graph's input has shape (2, 1, 3, 3, 3, 4) and dtype float32",
    ),
    Hostile(
        "param_relabelled_int32",  # item 4
        params=_param("p0", lambda a: a.view(np.int32)),
        error="load_params: ArrayError: param 'p0' has shape (2, 1, 3, 3, 3, 4) and dtype "
        "int32, but the graph's input has shape (2, 1, 3, 3, 3, 4) and dtype float32",
    ),
    Hostile("input_with_strides", mode="strided"),  # item 2: copied by its strides
    Hostile(
        "zero_copy_float64",  # item 3
        mode="zc_float64",
        error="set_input_zero_copy: ArrayError: zero-copy input 'data': expected shape "
        "(1, 3, 16, 16) and dtype float32, got shape (1, 3, 16, 16) and dtype float64",
    ),
    Hostile(
        "zero_copy_int32",  # item 3
        mode="zc_int32",
        error="set_input_zero_copy: ArrayError: zero-copy input 'data': expected shape "
        "(1, 3, 16, 16) and dtype float32, got shape (1, 3, 16, 16) and dtype int32",
    ),
    Hostile("share_params_with_itself", mode="share_self"),  # item 4: no leak (LSan)
    Hostile(
        "input_bound_read_only_then_set",  # issue 43: the C runtime wrote it
        mode="zc_read_only",
        error="set_input: ArrayError: input 'data' is bound to read-only memory "
        "(set_input_zero_copy); bind writable memory to copy into it",
    ),
    Hostile(
        "output_bound_read_only",  # issue 43: kernels wrote it
        mode="zc_out_read_only",
        error="set_output_zero_copy: ArrayError: zero-copy output 0: the array is read-only "
        "(a read-only mapping, immutable bytes or writeable=False), but kernels write this "
        "entry; pass writable memory",
    ),
    Hostile(
        "get_output_into_float64",
        mode="out_float64",
        error="get_output: ArrayError: get_output(0): out has shape (1, 10) and dtype float64, "
        "expected shape (1, 10) and dtype float32",
    ),
    Hostile(
        "entry_of_2_48_bytes",
        graph=_shape(14, [1 << 20, 1 << 20, 1 << 6]),
        error="create: GraphFormatError: graph JSON: attrs['shape'][14]: shape (1048576, "
        "1048576, 64) of float32 takes 281474976710656 bytes; no machine can hold an entry of "
        "281474976710656 bytes (2**48) or more",
    ),
    # device_index: a device type >= 1; a pool on one device; a type no device was given for
    # runs on the first device (TVM's SetupStorage), here the CPU
    Hostile(
        "device_index_zero",
        graph=_device(0, 0),
        error="create: GraphFormatError: graph JSON: attrs['device_index'][0]: expected an "
        "integer >= 1, got 0",
    ),
    Hostile(
        "pool_on_two_devices",  # entries 1 and 5 share pool 1
        graph=_device(5, 4),
        error="create: GraphFormatError: graph JSON: storage pool 1 is assigned to entries on "
        "device types 1 and 4 (entry 5): The same pool entry cannot be assigned to multiple "
        "devices",
    ),
    Hostile("device_type_without_a_device_falls_back", graph=_device(None, 7)),
    Hostile(
        "plan_larger_than_memory",  # 64 TiB
        graph=_shape(14, [1 << 20, 1 << 20, 1 << 4]),
        error="create: DeviceOutOfMemoryError: cannot create the graph executor: the storage "
        "plan needs 65536.0 GiB of host memory, more than this machine's",
    ),
]


@dataclass(frozen=True)
class Model:
    lib: Path
    graph: Graph
    params: Params
    data: np.ndarray
    golden: np.ndarray


@pytest.fixture(scope="module")
def model(artifacts: Path, tmp_path_factory: pytest.TempPathFactory) -> Model:
    folder = artifacts / "relay016" / "tvmc-package"
    work = tmp_path_factory.mktemp("checks-model")
    with tarfile.open(folder / "module.tar") as tar:
        tar.extractall(work, filter="data")
    params = runtime.load_param_dict((work / "mod.params").read_bytes())
    golden = np.load(folder / "golden.npz")
    return Model(
        work / "mod.so",
        json.loads((work / "mod.json").read_text()),
        {k: v.numpy() for k, v in params.items()},
        golden["data"],
        golden["output_0"],
    )


def _make(case: Hostile, model: Model) -> tuple[str, bytes]:
    """The hostile graph JSON text and params blob of `case`."""
    graph = copy.deepcopy(model.graph)
    if case.graph is not None:
        case.graph(graph)
    text = json.dumps(graph)
    if case.text is not None:
        text = case.text(text)
    params = dict(model.params)
    if case.params is not None:
        case.params(params)
    blob = runtime.save_param_dict({k: runtime.nd.array(v) for k, v in params.items()})
    return text, bytes(blob)


def _python(case: Hostile, model: Model, text: str, blob: bytes) -> tuple[str, np.ndarray | None]:
    """What the Python runtime answers: "ok" and output 0, or "<step>: <Class>: <message>"."""
    lib = runtime.load_module(str(model.lib))
    create = runtime.get_global_func("tvm.graph_executor.create")
    step = "create"
    try:
        m = create(text, lib, 1, 0)
        step = "load_params"
        m["load_params"](bytearray(blob))
        if case.mode in ("zc_read_only", "zc_out_read_only"):
            output = case.mode == "zc_out_read_only"
            memory = runtime.empty(model.golden.shape if output else model.data.shape)
            frozen = memory.numpy_view().view()  # 64-byte aligned, as a binding must be
            frozen.setflags(write=False)
            read_only = runtime.NDArray.from_host_memory(
                frozen, runtime.DataType("float32"), runtime.cpu(), memory
            )
            step = "set_output_zero_copy" if output else "set_input_zero_copy"
            m[step](0 if output else "data", read_only)
            step = "set_input"
            m["set_input"]("data", runtime.nd.array(model.data))
        elif case.mode.startswith("zc_"):
            step = "set_input_zero_copy"
            wrong = np.zeros(model.data.shape, case.mode[3:])
            m["set_input_zero_copy"]("data", runtime.nd.array(wrong))
        elif case.mode == "strided":
            step = "set_input"
            nhwc = np.ascontiguousarray(model.data.transpose(0, 2, 3, 1))
            view = nhwc.transpose(0, 3, 1, 2)  # strides (768, 1, 48, 3) elements
            m["set_input"]("data", runtime.nd.from_dlpack(view))
        else:
            step = "set_input"
            m["set_input"]("data", runtime.nd.array(model.data))
            if case.mode == "share_self":
                step = "share_params"
                m["share_params"](m, bytearray(blob))
        step = "run"
        m["run"]()
        step = "get_output"
        if case.mode == "out_float64":
            m["get_output"](0, runtime.nd.array(np.zeros(model.golden.shape, "float64")))
        out = m["get_output"](0).numpy()
    except TVMError as exc:
        return f"{step}: {type(exc).__name__}: {exc}", None
    return "ok", out


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_c_and_python_answer_alike(
    case: Hostile,
    model: Model,
    native: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    tmp_path: Path,
) -> None:
    text, blob = _make(case, model)
    py_line, py_out = _python(case, model, text, blob)
    (tmp_path / "graph.json").write_text(text)
    (tmp_path / "p.params").write_bytes(blob)
    model.data.astype(np.float32).tofile(tmp_path / "in.bin")
    exe = compile_c(native, "checks", False)
    proc = native.run(
        exe,
        model.lib,
        tmp_path / "graph.json",
        tmp_path / "p.params",
        tmp_path / "in.bin",
        case.mode,
        tmp_path / "out.bin",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr  # ASan/LSan clean, handles freed
    c_line = proc.stdout.strip()
    if case.error is None:
        assert py_line == "ok"
        assert c_line == "ok"
        np.testing.assert_array_equal(py_out, model.golden)
        c_out = np.fromfile(tmp_path / "out.bin", dtype=np.float32).reshape(model.golden.shape)
        np.testing.assert_array_equal(c_out, model.golden)
        return
    assert py_line.startswith(case.error), py_line
    assert c_line.startswith(case.error), c_line
    if case.same_words:
        assert c_line == py_line


def test_a_handle_freed_twice_is_an_error_not_a_read_of_freed_memory(
    native: NativeBuild, compile_c: Callable[[NativeBuild, str, bool], Path]
) -> None:
    exe = compile_c(native, "checks", False)
    proc = native.run(exe, "-", "-", "-", "-", "double_free", "-")
    assert proc.returncode == 0, proc.stdout + proc.stderr  # ASan aborts on a use after free
    lines = dict(line.split(": ", 1) for line in proc.stdout.splitlines())
    assert sorted(lines) == sorted(
        ["TVMArrayFree", "TVMFuncFree", "TVMObjectFree", "TVMFuncCall", "TVMModFree"]
    )
    for call, error in lines.items():
        assert error.startswith("ArgumentTypeError: "), (call, error)
        assert error.endswith("freed already?)"), (call, error)
