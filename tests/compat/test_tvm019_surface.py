"""tvmrt's Python surface against TVM v0.19's, name for name and parameter for parameter.

TVM 0.19's surface is read from TVM itself (the ``tvm019`` peer) into
``data/tvm019_surface.json``; the comparison runs from that file without the peer, so a
regression fails here even offline. Every difference is listed, with its reason, in
``support/tvm019_differences.py``; behaviour of the names tvmrt added is checked against
TVM 0.19 on the same inputs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tvmrt
from support.api_surface import accepts, compare, signature
from support.paths import REPO
from support.peers import tvm019_env, tvm019_python
from support.tvm019_differences import DELIBERATE, OPEN
from tvmrt import runtime

FIXTURE = Path(__file__).parent / "data" / "tvm019_surface.json"
SURFACE = REPO / "tests" / "support" / "api_surface.py"


def _tvm019(script: str, *args: str, threads: str = "1") -> str:
    """Runs ``script`` (from a file: TVMScript reads its source back) under TVM 0.19."""
    python = tvm019_python()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "peer_script.py"
        path.write_text(script)
        done = subprocess.run(
            [str(python), str(path), *args],
            capture_output=True,
            text=True,
            env={**tvm019_env(python), "TVM_NUM_THREADS": threads},
            cwd=REPO / "tests" / "support",
        )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_differences_are_exactly_the_listed_ones():
    result = compare(json.loads(FIXTURE.read_text()))
    listed = {**DELIBERATE, **OPEN}
    assert not DELIBERATE.keys() & OPEN.keys()
    unlisted = {k: v for k, v in result.differences.items() if k not in listed}
    gone = sorted(listed.keys() - result.differences.keys())
    assert not unlisted, f"differences from TVM 0.19 with no reason listed: {unlisted}"
    assert not gone, f"listed differences that are gone (remove them): {gone}"
    assert all(reason.strip() for reason in listed.values())


def test_fixture_is_what_tvm019_prints():
    printed = _tvm019(SURFACE.read_text())
    assert json.loads(printed) == json.loads(FIXTURE.read_text())


def test_compat_doc_section_is_current():
    script = REPO / "scripts" / "gen_tvm_compat.py"
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_accepts_refuses_what_tvm_accepts():
    def f_tvm(file_name, *, fcompile=None, **kwargs): ...
    def f_old(file_name, **kwargs): ...
    def f_renamed(dtype): ...
    def f_more(file_name, fcompile=None, *, extra=1, **kwargs): ...
    def f_required(file_name, fcompile, **kwargs): ...

    tvm = signature(f_tvm)
    assert accepts(tvm, signature(f_more)) == []
    assert accepts(tvm, signature(f_old)) == []  # **kwargs takes fcompile=
    assert accepts(signature(f_more), signature(f_old)) == ["no positional parameter 1 (fcompile)"]
    assert accepts(signature(f_renamed), signature(lambda type_str: 0)) == [
        "parameter 0 is type_str (pk) where TVM's is dtype"
    ]
    assert "fcompile has no default where TVM's is None" in accepts(tvm, signature(f_required))


# -- the calls issue 34 names ---------------------------------------------------------------
def test_export_library_takes_fcompile_positionally(artifacts, tmp_path):
    lib = runtime.load_module(str(artifacts / "iris-factory" / "deploy_lib.tar"))
    calls = []

    def fcompile(output, files, **kwargs):
        calls.append((output, sorted(Path(f).name for f in files), kwargs))
        return "made"

    fcompile.object_format = "o"
    assert lib.export_library(str(tmp_path / "x.so"), fcompile) == "made"
    assert lib.export_library(str(tmp_path / "y.so"), fcompile=fcompile, options=["-O2"]) == "made"
    assert calls[0][0] == str(tmp_path / "x.so")
    assert calls[0][1] == calls[1][1]
    assert "devc.c" in calls[0][1]
    assert calls[1][2] == {"options": ["-O2"]}


def test_datatype_type_str_and_from_dlpack_dltensor_keywords():
    assert runtime.DataType(type_str="float16x2").lanes == 2
    source = np.arange(6, dtype="int32")
    arr = runtime.ndarray.from_dlpack(dltensor=source)
    np.testing.assert_array_equal(arr.numpy(), source)
    source[0] = 42
    assert arr.numpy()[0] == 42  # shared, not copied


def test_device_constructors_import_from_runtime_ndarray():
    from tvmrt.runtime.ndarray import cl, cpu, cuda, device, gpu, opencl

    assert cpu(0) == tvmrt.cpu(0)
    assert cuda(1) == tvmrt.cuda(1)
    with pytest.warns(DeprecationWarning, match="gpu"):
        assert gpu(1) == tvmrt.cuda(1)
    assert cl(0) == opencl(0) == tvmrt.opencl(0)
    assert device("cpu", 0) == tvmrt.cpu(0)
    from tvmrt.runtime.container import ShapeTuple, String

    assert ShapeTuple is runtime.ShapeTuple
    assert String is runtime.String


# -- behaviour of the added names, against TVM 0.19 on the same inputs --------------------
_BEHAVIOUR = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    {imports}
    out = {{}}
    out["enabled"] = {{t: enabled(t) for t in ["cpu", "llvm", "llvm -mcpu=skylake", "stackvm", "rpc"]}}
    out["num_threads"] = num_threads()
    out["mask"] = [int(ModulePropertyMask.BINARY_SERIALIZABLE), int(ModulePropertyMask.RUNNABLE), int(ModulePropertyMask.DSO_EXPORTABLE)]
    s = ShapeTuple([1, 3, 224, 224])
    out["shape"] = [list(s), len(s), s[-1], s == [1, 3, 224, 224], s.legacy_repr()]
    f = convert_to_tvm_func(lambda a, b: a + b)
    out["func"] = [f(2, 3), f("a", "b"), f(1.5, 2)]
    values = [None, 3, 2.5, np.float16(1), np.float64(2), True, "s", [1, 2.0], np.arange(3)]
    def describe(v):
        if isinstance(v, str):
            return ["str", v]
        if hasattr(v, "shape"):
            return ["array", str(v.dtype), list(v.shape), v.numpy().tolist()]
        return ["tuple", [describe(x) for x in v]]
    out["vm_convert"] = [describe(v) for v in convert(values)]
    kinds = ["float32", "float32x4", "int8", "bool", "float16x2", "int64", "uint1"]
    out["itemsize"] = [DataType(type_str=t).itemsize() for t in kinds]
    buf = np.zeros(6 + 16, dtype="int32")  # TVM takes 64-byte-aligned memory only
    aligned = buf[(-buf.ctypes.data % 64) // 4 :][:6]
    aligned[:] = np.arange(6)
    out["from_dlpack"] = from_dlpack(dltensor=aligned).numpy().tolist()
    json.dump(out, sys.stdout)
    """
)
_TVM_IMPORTS = (
    "from tvm.runtime.module import enabled, num_threads, ModulePropertyMask\n"
    "from tvm.runtime.container import ShapeTuple\n"
    "from tvm.runtime.packed_func import convert_to_tvm_func\n"
    "from tvm.runtime.vm import convert\n"
    "from tvm.runtime import DataType\n"
    "from tvm.runtime.ndarray import from_dlpack\n"
)


@pytest.mark.parametrize("threads", ["1", "3"])
def test_added_names_behave_as_tvm019(threads):
    script = _BEHAVIOUR.format(imports=_TVM_IMPORTS)
    theirs = json.loads(_tvm019(script, threads=threads))
    env = dict(os.environ, TVM_NUM_THREADS=threads, OMP_NUM_THREADS="1")
    ours_script = _BEHAVIOUR.format(imports=_TVM_IMPORTS.replace("from tvm.", "from tvmrt."))
    done = subprocess.run(
        [sys.executable, "-c", ours_script], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    ours = json.loads(done.stdout)
    # documented (docs/tvm-compat.md, enabled): TVM answers what its library was built
    # with, tvmrt what it can run; tvmrt has no stackvm or rpc runtime module
    for name in ("stackvm", "rpc"):
        assert theirs["enabled"].pop(name) is True
        assert ours["enabled"].pop(name) is False
    # documented (Defaults, num_threads): TVM caps TVM_NUM_THREADS at the machine's CPU
    # count (hardware_concurrency); tvmrt takes it up to 4 per usable CPU
    assert theirs.pop("num_threads") == min(int(threads), os.cpu_count() or 1)
    assert ours.pop("num_threads") == int(threads)
    assert ours == theirs


def test_clear_imports_and_property_mask(artifacts):
    lib = runtime.load_module(str(artifacts / "iris-factory" / "deploy_lib.tar"))
    assert lib.get_property_mask() == int(
        runtime.module.ModulePropertyMask.RUNNABLE
        | runtime.module.ModulePropertyMask.DSO_EXPORTABLE
    )
    assert lib.is_runnable
    assert lib.is_dso_exportable
    assert not lib.is_binary_serializable
    assert not lib.is_device_module
    assert lib.imported_modules
    lib.clear_imports()
    assert lib.imported_modules == []
    so = runtime.load_module(str(artifacts / "mobilenet_v1" / "deploy_lib.so"))
    assert so.get_property_mask() == int(runtime.module.ModulePropertyMask.RUNNABLE)


def test_find_include_path_has_the_runtime_headers(tmp_path, monkeypatch):
    monkeypatch.delenv("TVM_INCLUDE_PATH", raising=False)
    folders = runtime.module.find_include_path()
    assert any((Path(f) / "tvm" / "runtime" / "c_runtime_api.h").exists() for f in folders)
    assert any((Path(f) / "dlpack" / "dlpack.h").exists() for f in folders)
    (tmp_path / "include").mkdir()
    (tmp_path / "extra").mkdir()
    assert runtime.module.find_include_path(search_path=str(tmp_path))[-1] == str(
        tmp_path / "include"
    )
    assert runtime.module.find_include_path(["extra", "none"], [str(tmp_path)]) == [
        str(tmp_path / "extra")
    ]
    monkeypatch.setenv("TVM_INCLUDE_PATH", str(tmp_path))
    assert runtime.module.find_include_path()[0] == str(tmp_path / "include")
    assert runtime.module.find_include_path("no_such_folder", optional=True) is None
    with pytest.raises(RuntimeError, match="no_such_folder"):
        runtime.module.find_include_path("no_such_folder")


_PROFILE = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import tvm
    from tvm.script import tir as T
    from tvm.runtime.profiling import profile_function

    @T.prim_func
    def bump(A: T.Buffer((2,), "float32")):
        A[0] = A[0] + T.float32(1)
        A[1] = A[1] * T.float32(2)

    lib = tvm.build(tvm.IRModule({"bump": bump}), target="llvm")
    lib.export_library(sys.argv[1])
    a = tvm.nd.array(np.array([0, 1], dtype="float32"))
    metrics = profile_function(lib, tvm.cpu(), [], func_name="bump", warmup_iters=3)(a)
    missing = profile_function(lib, tvm.cpu(), [], func_name="absent")  # fails when called
    try:
        missing(a)
        raised = False
    except tvm.TVMError:
        raised = True
    json.dump([dict(metrics), a.numpy().tolist(), raised], sys.stdout)
    """
)


def test_profile_function_runs_a_tvm019_kernel_as_tvm019_does(tmp_path):
    so = tmp_path / "bump.so"
    theirs = json.loads(_tvm019(_PROFILE, str(so)))
    lib = runtime.load_module(str(so))  # the library TVM 0.19 built and profiled
    a = tvmrt.nd.array(np.array([0, 1], dtype="float32"))
    metrics = runtime.profiling.profile_function(lib, tvmrt.cpu(), [], "bump", warmup_iters=3)(a)
    missing = runtime.profiling.profile_function(lib, tvmrt.cpu(), [], func_name="absent")
    with pytest.raises(tvmrt.TVMError, match="absent"):
        missing(a)
    assert [metrics, a.numpy().tolist(), True] == theirs == [{}, [4.0, 16.0], True]


def test_metric_collectors_see_the_measured_run_only():
    seen = []

    class Calls(runtime.profiling.MetricCollector):
        def init(self, devices):
            seen.append(("init", [d.device for d in devices]))

        def start(self, dev):
            seen.append(("start", dev))
            return len(calls)

        def stop(self, state):
            return {"Calls": runtime.profiling.Count(len(calls) - state)}

    calls = []
    mod = runtime.PyModule({"f": lambda x: calls.append(x)})
    quiet = runtime.profiling.MetricCollector()  # measures nothing: start returns None
    prof = runtime.profiling.profile_function(mod, tvmrt.cpu(), [Calls(), quiet], "f", 2)
    assert prof(7) == {"Calls": runtime.profiling.Count(1)}
    assert calls == [7, 7, 7]
    assert seen == [("init", [tvmrt.cpu()]), ("start", tvmrt.cpu())]
    assert isinstance(quiet, runtime.Object)
    assert isinstance(runtime.profiling.Count(1), runtime.profiling.Object)
    with pytest.raises(TypeError, match="MetricCollector"):
        runtime.profiling.profile_function(mod, tvmrt.cpu(), [object()])
    with pytest.raises(ValueError, match="warmup_iters"):
        runtime.profiling.profile_function(mod, tvmrt.cpu(), [], "f", warmup_iters=-1)


def test_invoke_with_outputs_fills_the_given_tensors(artifacts):
    from support.relayvm_cases import golden_runs, same_bits

    folder = artifacts / "relayvm" / "adt-closure"
    vm = runtime.vm.VirtualMachine(runtime.load_module(str(folder / "vm.so")), tvmrt.cpu())
    (run,) = golden_runs(folder, ["a", "b", "c"])
    outputs = [tvmrt.nd.empty(w.shape, str(w.dtype)) for w in run.outputs]
    assert vm.invoke_with_outputs("main", run.inputs, outputs) is None
    for got, want in zip(outputs, run.outputs, strict=True):
        assert same_bits(got.numpy(), want)
    wrong = [tvmrt.nd.empty((1,), "int8") for _ in run.outputs]
    with pytest.raises(TypeError, match="output 0 of 'main'"):
        vm.invoke_with_outputs("main", None, wrong)  # None: the inputs set before
    with pytest.raises(TypeError, match="output tensors given"):
        vm.invoke_with_outputs("main", run.inputs, [*outputs, outputs[0]])
