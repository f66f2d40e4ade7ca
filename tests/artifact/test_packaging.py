"""Packaging forms built here with the system compiler: TVM 0.7/0.8 link-params, C exports.

No public TVM 0.8 link-params sample exists, so the library is written in that layout: a
legacy packed kernel, ``_lookup_linked_param(storage_id)`` returning the address of the
constant weights of that storage entry (NULL otherwise), and a ``__tvm_dev_mblob`` holding
a GraphExecutorFactory with no params. It is compiled against tvmrt's own TVM headers,
which also shows those headers serve C code written for TVM's.
"""

from __future__ import annotations

import io
import json
import shutil
import struct
import subprocess
import tarfile
from pathlib import Path

import numpy as np
import pytest

from support.fixtures import artifact_folder
from tvmrt import runtime
from tvmrt.artifact import find_artifact, load_artifact
from tvmrt.binfmt import abi, binary
from tvmrt.contrib import graph_executor
from tvmrt.error import FunctionNotFoundError, KernelError, ModuleLoadError
from tvmrt.runtime import native_module
from tvmrt.runtime.graph_executor.factory import GraphExecutorFactory, save_factory_binary
from tvmrt.runtime.graph_executor.graph import parse_graph
from tvmrt.runtime.graph_executor.linked import linked_params
from tvmrt.runtime.loaders import dispatch, link

pytestmark = pytest.mark.skipif(
    link.find_compiler() is None or link.find_cxx_compiler() is None, reason="no C compiler"
)

WEIGHTS = [0.5, -1.25, 3.0, 8.0]

KERNELS_C = r"""
#include "tvm/runtime/c_runtime_api.h"
#include "tvm/runtime/c_backend_api.h"

#ifdef __cplusplus
extern "C" {  /* TVM's C exports are compiled as C++ (g++), with C names */
#endif

static const float p0_data[4] __attribute__((aligned(64))) = {%(weights)s};

/* TVM 0.8 link-params: the graph executor asks for each storage id */
TVM_DLL int32_t _lookup_linked_param(TVMValue* args, int* codes, int num_args,
                                     TVMValue* ret, int* ret_code, void* resource) {
  if (num_args != 1 || codes[0] != kTVMArgInt) {
    TVMAPISetLastError("_lookup_linked_param: expected one int");
    return -1;
  }
  if (args[0].v_int64 == %(sid)d) {
    ret->v_handle = (void*)p0_data;
    *ret_code = kTVMOpaqueHandle;
  } else {
    ret->v_handle = 0;
    *ret_code = kTVMNullptr;
  }
  return 0;
}

TVM_DLL int32_t tvmgen_default_fused_add(TVMValue* args, int* codes, int num_args,
                                         TVMValue* ret, int* ret_code, void* resource) {
  DLTensor* a = (DLTensor*)args[0].v_handle;
  DLTensor* b = (DLTensor*)args[1].v_handle;
  DLTensor* c = (DLTensor*)args[2].v_handle;
  int i;
  if (num_args != 3) return -1;
  for (i = 0; i < 4; ++i) ((float*)c->data)[i] = ((float*)a->data)[i] + ((float*)b->data)[i];
  return 0;
}
"""
CLOSE = """
#ifdef __cplusplus
}
#endif
"""


def _graph(p0_storage_id: int) -> str:
    return json.dumps(
        {
            "nodes": [
                {"op": "null", "name": "x", "inputs": []},
                {"op": "null", "name": "p0", "inputs": []},
                {
                    "op": "tvm_op",
                    "name": "tvmgen_default_fused_add",
                    "inputs": [[0, 0, 0], [1, 0, 0]],
                    "attrs": {
                        "func_name": "tvmgen_default_fused_add",
                        "num_inputs": "2",
                        "num_outputs": "1",
                        "flatten_data": "0",
                    },
                },
            ],
            "arg_nodes": [0, 1],
            "heads": [[2, 0, 0]],
            "node_row_ptr": [0, 1, 2, 3],
            "attrs": {
                "dltype": ["list_str", ["float32"] * 3],
                "shape": ["list_shape", [[4], [4], [4]]],
                "storage_id": ["list_int", [0, p0_storage_id, 2]],
            },
        }
    )


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def _blob(graph_json: str) -> bytes:
    """A TVM >= 0.7 module blob: factory, _lib, _import_tree (factory imports the lib)."""
    factory = save_factory_binary(GraphExecutorFactory(graph_json, {}, "default"))
    payload = struct.pack("<Q", 3) + _string("GraphExecutorFactory") + factory
    payload += _string("_lib")
    payload += _string("_import_tree") + struct.pack("<QQQQ", 3, 0, 1, 1)
    payload += struct.pack("<QQ", 1, 1)
    return struct.pack("<Q", len(payload)) + payload


def _build(tmp_path: Path, sid: int = 1, with_blob: bool = True) -> Path:
    source = KERNELS_C % {"weights": ", ".join(f"{w}f" for w in WEIGHTS), "sid": sid}
    if with_blob:
        data = _blob(_graph(sid))
        source += "TVM_DLL extern const unsigned char __tvm_dev_mblob[];\n"
        source += f"const unsigned char __tvm_dev_mblob[{len(data)}] = {{"
        source += ",".join(str(b) for b in data) + "};\n"
    source += CLOSE
    c_file = tmp_path / "lib.c"
    c_file.write_text(source)
    out = tmp_path / "linkparams08.so"
    compiler = link.find_compiler()
    assert compiler is not None
    subprocess.run(
        [
            *compiler,
            "-shared",
            "-fPIC",
            "-O2",
            f"-I{link.include_dir()}",
            "-o",
            str(out),
            str(c_file),
        ],
        check=True,
        capture_output=True,
    )
    return out


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TVMRT_CACHE_DIR", str(tmp_path / "cache"))


def test_linked_params_08_factory(tmp_path):
    path = _build(tmp_path)
    symbols = abi.scan_tvm_symbols(binary.ElfFile.from_path(path).symbols())
    assert symbols.linked_params
    lib = runtime.load_module(path)
    m = graph_executor.GraphModule(lib["default"](runtime.cpu(0)))
    x = np.array([1.0, 2.0, 3.0, 4.0], dtype="float32")
    m.set_input("x", x)
    m.run()
    np.testing.assert_array_equal(m.get_output(0).numpy(), x + np.array(WEIGHTS, "float32"))
    assert lib["get_graph_params"]()["p0"].numpy().tolist() == WEIGHTS


def test_linked_params_follow_the_storage_id(tmp_path):
    """The lookup is by storage id, not by node: a library answering for another id links nothing."""
    path = _build(tmp_path, sid=7, with_blob=False)
    lib = runtime.load_module(path)
    graph = _graph(1)  # p0 lives in storage 1, the library only knows storage 7
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "deploy.json").write_text(graph)
    shutil.copy(path, folder / "deploy.so")
    model = load_artifact(find_artifact(folder))
    assert "p0" not in model.param_names
    assert linked_params(lib, parse_graph(graph)) == {}
    assert list(linked_params(lib, parse_graph(_graph(7)))) == ["p0"]


def test_linked_params_08_with_separate_graph_runs_through_load_artifact(tmp_path):
    path = _build(tmp_path, with_blob=False)
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "deploy.json").write_text(_graph(1))
    shutil.copy(path, folder / "deploy.so")
    model = load_artifact(find_artifact(folder))
    assert model.user_inputs() == {"x": ((4,), "float32")}
    x = np.array([4.0, 3.0, 2.0, 1.0], dtype="float32")
    model.executor.set_input("x", x)
    model.executor.run()
    np.testing.assert_array_equal(
        model.executor.get_output(0).numpy(), x + np.array(WEIGHTS, "float32")
    )


def test_linked_params_08_through_create_as_tvm_did(tmp_path):
    """TVM 0.8's create(graph_json, lib, dev) asked the library for its weights itself."""
    lib = runtime.load_module(_build(tmp_path, with_blob=False))
    m = graph_executor.create(_graph(1), lib, runtime.cpu(0))
    shapes, _ = m.get_input_info()
    assert list(shapes) == ["x"]  # the linked weight is a param, not an input to give
    x = np.array([0.5, 1.5, 2.5, 3.5], dtype="float32")
    m.run(x=x)
    np.testing.assert_array_equal(m.get_output(0).numpy(), x + np.array(WEIGHTS, "float32"))


def test_the_c_runtime_reads_linked_params(tmp_path):
    """The C graph executor asks the library for its TVM 0.7/0.8 linked params, as TVM 0.8's
    did: the weights are params (get_input_info leaves them out), and from Python the face
    runs such a library on the C engine, with the Python engine's results."""
    path = _build(tmp_path, with_blob=False)
    lib = native_module.load_file(str(path))
    c_module = native_module.c_global("tvm.graph_executor.create")(_graph(1), lib, 1, 0)
    x = np.array([0.5, 1.5, 2.5, 3.5], dtype="float32")
    c_module["set_input"]("x", runtime.array(x))
    c_module["run"]()
    want = x + np.array(WEIGHTS, "float32")
    np.testing.assert_array_equal(c_module["get_output"](0).numpy(), want)
    m = graph_executor.create(_graph(1), runtime.load_module(path), runtime.cpu(0))
    assert isinstance(m.module, native_module.NativeModule)
    shapes, _ = m.get_input_info()
    assert list(shapes) == ["x"]
    m.run(x=x)
    np.testing.assert_array_equal(m.get_output(0).numpy(), want)


def test_the_c_runtime_looks_linked_params_up_by_storage_id(tmp_path):
    """As in Python (above): a library that answers for storage 7 links nothing into a graph
    whose p0 lives in storage 1, and links p0 where it lives in storage 7."""
    lib = native_module.load_file(str(_build(tmp_path, sid=7, with_blob=False)))
    create = native_module.c_global("tvm.graph_executor.create")
    shapes = create(_graph(1), lib, 1, 0)["get_input_info"]()["shape"]
    assert sorted(shapes) == ["p0", "x"]  # p0 is an input to give: nothing was linked
    shapes = create(_graph(7), lib, 1, 0)["get_input_info"]()["shape"]
    assert list(shapes) == ["x"]


def test_c_source_export_compiles_against_tvmrts_headers(tmp_path):
    """A target="c"-style export tar (C source only) is compiled with tvmrt's own headers."""
    source = KERNELS_C % {"weights": ", ".join(f"{w}f" for w in WEIGHTS), "sid": 1}
    data = _blob(_graph(1))
    source += "TVM_DLL extern const unsigned char __tvm_dev_mblob[];\n"
    source += f"const unsigned char __tvm_dev_mblob[{len(data)}] = {{"
    source += ",".join(str(b) for b in data) + "};\n" + CLOSE
    (tmp_path / "lib0.c").write_text(source)
    tar = tmp_path / "export.tar"
    with tarfile.open(tar, "w:gz") as archive:
        archive.add(tmp_path / "lib0.c", arcname="lib0.c")
    assert dispatch.sniff(str(tar)).form == "export-tar"
    lib = runtime.load_module(tar)
    m = graph_executor.GraphModule(lib["default"](runtime.cpu(0)))
    m.set_input("x", np.zeros(4, "float32"))
    m.run()
    assert m.get_output(0).numpy().tolist() == WEIGHTS


@pytest.mark.parametrize(
    ("make", "form", "message"),
    [
        (lambda p: p.write_bytes(b""), "other", r"not a shared library \(it is an empty file\)"),
        (
            lambda p: p.write_bytes(struct.pack("<Q", 0xF7E58D4F05049CB7) + b"\0" * 16),
            "other",
            r"not a shared library \(it is a TVM params blob\)",
        ),
    ],
    ids=["empty", "params"],
)
def test_refusals_name_the_form(tmp_path, make, form, message):
    path = tmp_path / "model.so"
    make(path)
    found = dispatch.sniff(str(path))
    assert found.form == form
    with pytest.raises(ModuleLoadError, match=message):
        runtime.load_module(path)


SYSLIB_C = r"""
#include "tvm/runtime/c_runtime_api.h"
#include "tvm/runtime/c_backend_api.h"

TVM_DLL int32_t %(name)s(TVMValue* args, int* codes, int num_args, TVMValue* ret,
                         int* ret_code, void* resource) {
  ret->v_int64 = args[0].v_int64 * %(factor)d;
  *ret_code = kTVMArgInt;
  return 0;
}
%(extra)s
__attribute__((constructor)) static void register_me(void) {
  TVMBackendRegisterSystemLibSymbol("%(registered)s", (void*)%(name)s);
  %(call)s
}
"""


def _system_lib(tmp_path: Path, stem: str, **fields: object) -> Path:
    values = {"extra": "", "call": "", **fields}
    c_file = tmp_path / f"{stem}.c"
    c_file.write_text(SYSLIB_C % values)
    out = tmp_path / f"{stem}.so"
    compiler = link.find_compiler()
    assert compiler is not None
    subprocess.run(
        [*compiler, "-shared", "-fPIC", f"-I{link.include_dir()}", "-o", str(out), str(c_file)],
        check=True,
        capture_output=True,
    )
    return out


def _syslib(prefix: str = "") -> runtime.Module:
    module = runtime.system_lib(prefix)
    assert module.type_key == "system_lib"
    return module


def test_system_lib_prefix_then_unprefixed(tmp_path):
    path = _system_lib(tmp_path, "pre", name="pk_triple", factor=3, registered="pkprefix_times")
    assert dispatch.sniff(str(path)).form == "system-lib-so"
    runtime.load_module(path)
    assert _syslib("pkprefix_")["times"](5) == 15  # prefix + name
    assert _syslib()["pkprefix_times"](2) == 6  # the full name, no prefix
    other = _system_lib(tmp_path, "plain", name="pk_double", factor=2, registered="times")
    runtime.load_module(other)
    assert _syslib("pkprefix_")["times"](5) == 15  # the prefixed one wins
    assert _syslib("nothere_")["times"](5) == 10  # unprefixed fallback
    via_global = runtime.get_global_func("runtime.SystemLib")("pkprefix_")
    assert via_global is runtime.system_lib("pkprefix_")


def test_system_lib_needing_unknown_tvm_function_is_refused_before_loading(tmp_path):
    """Its constructor would call the missing function inside dlopen and kill the process."""
    path = _system_lib(
        tmp_path,
        "needs",
        name="pk_needs",
        factor=1,
        registered="pk_needs",
        extra="int TVMNoSuchRuntimeFunction(void);",
        call="TVMNoSuchRuntimeFunction();",
    )
    with pytest.raises(ModuleLoadError, match=r"system-lib.*TVMNoSuchRuntimeFunction"):
        runtime.load_module(path)
    assert not _syslib().implements_function("pk_needs")


def test_inspect_reads_symbols_of_foreign_tar_members(capsys):
    folder = artifact_folder("wrn-arm32")
    from tvmrt.cli import main as cli_main

    assert cli_main(["inspect", str(folder), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["library"]["form"] == "export-tar"
    assert report["library"]["functions"] > 0
    assert any("built for arm" in p for p in report["problems"])
    assert not any("lacks" in p for p in report["problems"])


def test_load_static_library_keeps_the_object(tmp_path):
    members = {}
    with tarfile.open(artifact_folder("relay016") / "systemlib-tar" / "deploy.tar") as archive:
        for member in archive:
            stream = archive.extractfile(member)
            if stream is not None:
                members[member.name] = stream.read()
    obj = tmp_path / "lib0.o"
    obj.write_bytes(members["lib0.o"])
    kernels = ["tvmgen_default_fused_nn_softmax"]
    lib = runtime.load_static_library(str(obj), kernels)
    assert lib.type_key == "static_library"
    assert lib["get_func_names"]() == kernels
    assert lib.implements_function("tvmgen_default_fused_nn_softmax")
    assert not lib.implements_function("tvmgen_default_fused_nn_max_pool2d")
    with pytest.raises(FunctionNotFoundError):  # not linked: nothing to call, as in TVM
        lib["tvmgen_default_fused_nn_softmax"]
    lib.save(tmp_path / "copy.o")
    assert (tmp_path / "copy.o").read_bytes() == members["lib0.o"]
    with pytest.raises(ValueError, match="does not exist"):
        runtime.load_static_library(str(tmp_path / "missing.o"), kernels)


def _tar_of(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def test_foreign_code_in_mlf_and_tvmc_is_refused_naming_the_form(tmp_path):
    arm_tar = artifact_folder("wrn-arm32") / "wrn_8s_g0-rasp.tar"
    aarch64_so = artifact_folder("aarch64") / "deploy_lib.so"
    with tarfile.open(arm_tar) as archive:
        arm_object = next(
            archive.extractfile(m).read()  # type: ignore[union-attr]
            for m in archive
            if m.isfile() and m.name.endswith(".o")
        )
    meta = json.dumps({"version": 7, "modules": {"default": {"executors": ["graph"]}}})
    mlf = _tar_of(
        tmp_path / "mlf.tar",
        {
            "./metadata.json": meta.encode(),
            "./codegen/host/lib/default_lib0.o": arm_object,
            "./executor-config/graph/default.graph": _graph(1).encode(),
        },
    )
    assert dispatch.sniff(str(mlf)).form == "mlf"
    with pytest.raises(ModuleLoadError, match=r"built for arm .*Model Library Format tar"):
        runtime.load_module(mlf)
    tvmc = _tar_of(
        tmp_path / "module.tar",
        {"mod.so": aarch64_so.read_bytes(), "mod.json": _graph(1).encode(), "mod.params": b""},
    )
    assert dispatch.sniff(str(tvmc)).form == "tvmc"
    with pytest.raises(ModuleLoadError, match=r"built for aarch64 .*tvmc package"):
        runtime.load_module(tvmc)


SLOT_C = r"""
#include "tvm/runtime/c_runtime_api.h"
#include "tvm/runtime/c_backend_api.h"

/* older system-lib builds call the runtime through registered slots */
void (*__TVMAPISetLastError)(const char*) = 0;

TVM_DLL int32_t pkslot_fail(TVMValue* args, int* codes, int num_args, TVMValue* ret,
                            int* ret_code, void* resource) {
  if (__TVMAPISetLastError == 0) return -2;
  __TVMAPISetLastError("pkslot_fail: reported through the registered slot");
  return -1;
}

__attribute__((constructor)) static void register_me(void) {
  TVMBackendRegisterSystemLibSymbol("pkslot_fail", (void*)pkslot_fail);
  TVMBackendRegisterSystemLibSymbol("__TVMAPISetLastError", (void*)&__TVMAPISetLastError);
}
"""


def test_system_lib_slots_registered_by_old_builds_are_filled(tmp_path):
    c_file = tmp_path / "slot.c"
    c_file.write_text(SLOT_C)
    out = tmp_path / "slot.so"
    compiler = link.find_compiler()
    assert compiler is not None
    subprocess.run(
        [*compiler, "-shared", "-fPIC", f"-I{link.include_dir()}", "-o", str(out), str(c_file)],
        check=True,
        capture_output=True,
    )
    runtime.load_module(out)
    with pytest.raises(KernelError, match="reported through the registered slot"):
        _syslib()["pkslot_fail"]()
