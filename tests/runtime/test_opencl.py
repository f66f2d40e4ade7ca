"""OpenCL on pocl: device properties, TVM 0.16's OpenCL factories and the CPU+OpenCL graph.

Skipped cleanly without an OpenCL driver that runs a kernel here (Debian:
``ocl-icd-libopencl1 pocl-opencl-icd``). Tolerance and goldens: relay016/README.md.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from support.fixtures import artifact_folder, built_fixtures
from support.opencl import (
    driver_device_info,
    driver_program_binary,
    one_kernel_module,
    opencl_unusable,
)
from tvmrt import runtime
from tvmrt.contrib import graph_executor
from tvmrt.error import ArrayError
from tvmrt.runtime.device_api import get_device_api

if opencl_unusable():
    pytest.skip(str(opencl_unusable()), allow_module_level=True)

TOL = {"rtol": 1e-5, "atol": 1e-5}


def _relay016() -> Path:
    """relay016/, the project's own TVM 0.16 build (tests/fixtures/build_relay016.py)."""
    return artifact_folder("relay016")


def test_device_properties_come_from_the_opencl_device() -> None:
    dev = runtime.cl(0)
    devices = driver_device_info()  # clGetDeviceInfo, read by the test itself
    d = devices[0]
    assert dev.exist
    assert not runtime.opencl(len(devices)).exist
    assert dev.device_name == d["name"]
    assert dev.max_threads_per_block == d["max_work_group_size"]
    assert dev.warp_size == 1
    assert dev.max_shared_memory_per_block == d["local_mem_size"]
    assert dev.multi_processor_count == d["max_compute_units"]
    assert dev.max_clock_rate == int(d["max_clock_frequency"]) * 1000  # type: ignore[call-overload]
    assert dev.max_thread_dimensions == d["max_work_item_sizes"]
    assert dev.driver_version == d["driver_version"]
    major, minor = str(d["version"]).split()[1].split(".")[:2]
    assert dev.compute_version == f"{major}.{minor}"
    assert dev.api_version == int(major) * 100 + int(minor) * 10
    assert dev.total_global_memory == d["global_mem_size"]


def test_cnn_factory_on_opencl() -> None:
    lib = runtime.load_module(str(_relay016() / "opencl-factory" / "deploy.so"))
    golden = np.load(_relay016() / "opencl-factory" / "golden.npz")
    m = graph_executor.GraphModule(lib["default"](runtime.opencl(0)))
    m.set_input("data", golden["data"])
    assert m.get_input("data").device == runtime.opencl(0)
    m.run()
    out = m.get_output(0)
    assert out.device == runtime.opencl(0)
    np.testing.assert_allclose(out.numpy(), golden["output_0"], **TOL)
    m.set_input("data", np.zeros_like(golden["data"]))  # a second run sees new input
    m.run()
    assert not np.allclose(m.get_output(0).numpy(), golden["output_0"], **TOL)


def test_dense_factory_two_outputs_on_opencl() -> None:
    lib = runtime.load_module(str(_relay016() / "opencl-factory" / "dense.so"))
    golden = np.load(_relay016() / "opencl-factory" / "dense_golden.npz")
    m = graph_executor.GraphModule(lib["default"](runtime.opencl(0)))
    m.set_input("x", runtime.array(golden["x"], runtime.opencl(0)))
    m.run()
    for i in range(2):
        np.testing.assert_allclose(m.get_output(i).numpy(), golden[f"output_{i}"], **TOL)


def test_heterogeneous_cpu_opencl_graph() -> None:
    lib = runtime.load_module(str(_relay016() / "hetero-opencl-cpu" / "deploy.so"))
    golden = np.load(_relay016() / "hetero-opencl-cpu" / "golden.npz")
    gmod = lib["default"](runtime.cpu(0), runtime.opencl(0))
    m = graph_executor.GraphModule(gmod)
    m.set_input("data", golden["data"])
    m.run()
    out = m.get_output(0)
    assert out.device == runtime.cpu(0)
    np.testing.assert_allclose(out.numpy(), golden["output_0"], **TOL)
    assert m.get_input("p0").device == runtime.opencl(0)  # conv weights live on OpenCL
    assert m.get_input("p4").device == runtime.cpu(0)  # dense weights on the CPU
    plan = m.storage_plan
    assert set(plan.bytes_by_device()) == {1, 4}


def test_program_binary_format(tmp_path: Path) -> None:
    """A module saved as a device binary (TVM's xclbin/aocx formats) loads with the binary."""
    src = "__kernel void twice(__global float* a, __global float* b) { int i = get_global_id(0); b[i] = 2.0f * a[i]; }"
    mod = one_kernel_module("twice", driver_program_binary(src), fmt="xclbin", handles=2)
    a = runtime.array(np.arange(8, dtype="float32"), runtime.opencl(0))
    b = runtime.empty((8,), "float32", runtime.opencl(0))
    mod["twice"](a.data_ptr, b.data_ptr, 2, 4)  # host code passes handles + grid, block
    runtime.opencl(0).sync()
    np.testing.assert_array_equal(b.numpy(), np.arange(8) * 2)


def test_kernels_run_on_a_created_stream() -> None:
    dev = runtime.opencl(0)
    api = get_device_api(dev)
    stream = api.create_stream(dev)
    api.set_stream(dev, stream)
    try:
        lib = runtime.load_module(str(_relay016() / "opencl-factory" / "dense.so"))
        golden = np.load(_relay016() / "opencl-factory" / "dense_golden.npz")
        m = graph_executor.GraphModule(lib["default"](dev))
        m.set_input("x", golden["x"])
        m.run()
        api.sync(dev, stream)
        np.testing.assert_allclose(m.get_output(1).numpy(), golden["output_1"], **TOL)
    finally:
        api.set_stream(dev, 0)
        api.free_stream(dev, stream)


@pytest.mark.parametrize(
    ("case", "so", "golden"),
    [
        ("opencl-factory", "deploy.so", "golden.npz"),
        ("hetero-opencl-cpu", "deploy.so", "golden.npz"),
    ],
)
def test_cli_run_device_opencl(tmp_path: Path, case: str, so: str, golden: str) -> None:
    import subprocess
    import sys

    ref = np.load(_relay016() / case / golden)
    np.savez(tmp_path / "in.npz", data=ref["data"])
    out = tmp_path / "out.npz"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tvmrt",
            "run",
            str(_relay016() / case / so),
            "--device",
            "opencl",
            "-i",
            str(tmp_path / "in.npz"),
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    (result,) = np.load(out).values()
    np.testing.assert_allclose(result, ref["output_0"], **TOL)


def test_debug_executor_times_opencl_kernels(tmp_path: Path) -> None:
    from tvmrt.contrib.debugger import debug_executor

    lib = runtime.load_module(str(_relay016() / "hetero-opencl-cpu" / "deploy.so"))
    golden = np.load(_relay016() / "hetero-opencl-cpu" / "golden.npz")
    devs = [runtime.cpu(0), runtime.opencl(0)]
    m = debug_executor.create(lib["get_graph_json"](), lib, devs, dump_root=str(tmp_path))
    for name, arr in lib["get_graph_params"]().items():
        m.set_input(name, arr)
    m.set_input("data", golden["data"])
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), golden["output_0"], **TOL)
    conv = m.debug_get_output("tvmgen_default_fused_nn_conv2d_add_nn_relu")
    assert np.all(conv.numpy() >= 0)  # relu
    report = m.profile()
    devices = {c["Name"]: c["Device"] for c in report.calls}
    assert devices["tvmgen_default_fused_nn_conv2d_add_nn_relu"] == "opencl0"
    assert devices["tvmgen_default_fused_nn_max_pool2d"] == "cpu0"
    assert m.run_individual_node(4, number=2, repeat=2).mean > 0


def test_opencl_kernels_refuse_host_memory() -> None:
    """An OpenCL factory run on the CPU alone hands kernels host pointers: a clean error."""
    from tvmrt.error import KernelError

    lib = runtime.load_module(str(_relay016() / "opencl-factory" / "dense.so"))
    m = graph_executor.GraphModule(lib["default"](runtime.cpu(0)))
    m.set_input("x", np.load(_relay016() / "opencl-factory" / "dense_golden.npz")["x"])
    with pytest.raises(KernelError, match="not the data handle of a live OpenCL array"):
        m.run()


def test_zero_copy_device_input() -> None:
    dev = runtime.opencl(0)
    lib = runtime.load_module(str(_relay016() / "opencl-factory" / "dense.so"))
    golden = np.load(_relay016() / "opencl-factory" / "dense_golden.npz")
    m = graph_executor.GraphModule(lib["default"](dev))
    x = runtime.array(golden["x"], dev)
    m.set_input_zero_copy("x", x)
    assert m.get_input("x").data_ptr == x.data_ptr
    m.run()
    np.testing.assert_allclose(m.get_output(1).numpy(), golden["output_1"], **TOL)
    with pytest.raises(ArrayError, match=r"expected an array on opencl\(0\), got one on cpu"):
        m.set_input_zero_copy("x", runtime.array(golden["x"]))


def test_bad_programs_and_launches_fail_cleanly() -> None:
    from tvmrt.error import KernelError, ModuleLoadError

    a = runtime.empty((4,), "float32", runtime.opencl(0))
    broken = one_kernel_module("k", "__kernel void k(__global float* a) { this is not C; }")
    with pytest.raises(ModuleLoadError, match="building the OpenCL program"):
        broken["k"](a.data_ptr, 1, 4)
    missing = one_kernel_module("k", "__kernel void other(__global float* a) { }")
    with pytest.raises(ModuleLoadError, match="has no kernel 'k'"):
        missing["k"](a.data_ptr, 1, 4)
    ok = one_kernel_module("k", "__kernel void k(__global float* a) { a[get_global_id(0)] = 1; }")
    too_big = runtime.opencl(0).max_threads_per_block * 2
    with pytest.raises(KernelError, match="launching OpenCL kernel 'k'"):
        ok["k"](a.data_ptr, 1, too_big)
    ok["k"](a.data_ptr, 1, 4)
    np.testing.assert_array_equal(a.numpy(), [1, 1, 1, 1])


@pytest.mark.parametrize("program", ["add_one", "dense_relu"])
@pytest.mark.parametrize("era", ["tvm021", "tvm025", "tvm027"])
def test_tvm_ffi_opencl_kernels_of_every_era(era: str, program: str) -> None:
    """TVM 0.21-0.27's OpenCL kernel libraries (tests/fixtures/build_opencl.py): their
    ``opencl`` entry's kernel table has TVM >= 0.21's ``arg_extra_tags``, which the loader
    reads as the CUDA loader does (it refused these with bytes left over)."""
    folder = built_fixtures("build_opencl.py", peer=era, folder=f"opencl{era[3:]}")
    with np.load(folder / f"{program}.npz") as npz:
        data = dict(npz)
    lib = runtime.load_module(str(folder / f"{program}.so"))
    dev = runtime.opencl(0)
    inputs = [runtime.array(data[k], dev) for k in sorted(data) if k.startswith("arg")]
    out = runtime.empty(data["expected"].shape, "float32", dev)
    lib[program](*inputs, out)
    np.testing.assert_allclose(out.numpy(), data["expected"], **TOL)


# -- one OpenCL in the process: the C runtime's, behind the Python faces -----------------


def test_graphs_on_opencl_run_on_the_c_engine_over_python_made_arrays() -> None:
    """GraphModule on OpenCL is the C graph executor; an array made from Python is the same
    C array to it (set by handle, no copy through the host), and pyopencl is never loaded."""
    import sys

    from tvmrt.runtime.native_module import NativeModule

    dev = runtime.opencl(0)
    lib = runtime.load_module(str(_relay016() / "opencl-factory" / "dense.so"))
    golden = np.load(_relay016() / "opencl-factory" / "dense_golden.npz")
    m = graph_executor.GraphModule(lib["default"](dev))
    assert isinstance(m.module, NativeModule)  # the C runtime's GraphExecutor
    x = runtime.array(golden["x"], dev)
    m.set_input_zero_copy("x", x)
    m.run()
    out = m.get_output(1)
    assert out.device == dev
    np.testing.assert_allclose(out.numpy(), golden["output_1"], **TOL)
    assert "pyopencl" not in sys.modules


def test_device_properties_are_tvms_global_of_the_c_runtime() -> None:
    """runtime.GetDeviceAttr(device_type, device_id, kind), TVM's numbers, answered in C."""
    from tvmrt.error import InvalidArgumentError
    from tvmrt.runtime.device import DEVICE_ATTR_KINDS
    from tvmrt.runtime.native_module import c_global

    get = c_global("runtime.GetDeviceAttr")
    assert get(1, 0, 0) == 1  # the CPU exists
    assert get(4, 0, DEVICE_ATTR_KINDS["exist"]) == 1
    assert get(4, 63, 0) == 0  # no such OpenCL device
    assert get(4, 63, DEVICE_ATTR_KINDS["device_name"]) is None
    assert get(99, 0, 0) == 0  # no backend for the type
    assert get(4, 0, DEVICE_ATTR_KINDS["device_name"]) == driver_device_info()[0]["name"]
    assert get(4, 0, DEVICE_ATTR_KINDS["max_thread_dimensions"]).startswith("[")
    assert get(4, 0, DEVICE_ATTR_KINDS["max_registers_per_block"]) is None  # TVM: no answer
    with pytest.raises(InvalidArgumentError, match=r"takes \(device_type, device_id, kind\)"):
        get(4, 0)


def test_a_stream_handle_the_runtime_did_not_make_is_refused() -> None:
    from tvmrt.error import InvalidArgumentError

    dev = runtime.opencl(0)
    api = get_device_api(dev)
    a = runtime.empty((4,), "float32", dev)  # a buffer handle is not a queue either
    for bogus in (0x1234, a.data_ptr):
        with pytest.raises(InvalidArgumentError, match="is not a command queue"):
            api.sync(dev, bogus)
        with pytest.raises(InvalidArgumentError, match="is not a command queue"):
            api.set_stream(dev, bogus)
        with pytest.raises(InvalidArgumentError, match="was not made on opencl"):
            api.free_stream(dev, bogus)
    with pytest.raises(InvalidArgumentError, match="default queue"):
        api.free_stream(dev, 0)


@pytest.mark.parametrize(
    ("case", "so", "golden", "name", "devices"),
    [
        ("opencl-factory", "deploy.so", "golden.npz", "data", ("opencl",)),
        ("opencl-factory", "dense.so", "dense_golden.npz", "x", ("opencl",)),
        ("hetero-opencl-cpu", "deploy.so", "golden.npz", "data", ("cpu", "opencl")),
    ],
)
def test_both_graph_engines_give_the_same_bits_on_opencl(
    monkeypatch: pytest.MonkeyPatch, case: str, so: str, golden: str, name: str, devices: tuple
) -> None:
    """The Python engine (a library changed in Python, TVMRT_GRAPH_ENGINE=python) runs the
    same C kernels on the same C arrays as the C engine: outputs equal bit for bit."""
    from tvmrt.runtime.native_module import NativeModule

    ref = np.load(_relay016() / case / golden)
    devs = [runtime.cpu(0) if d == "cpu" else runtime.opencl(0) for d in devices]
    outputs = {}
    for engine in ("native", "python"):
        monkeypatch.setenv("TVMRT_GRAPH_ENGINE", engine)
        lib = runtime.load_module(str(_relay016() / case / so))
        m = graph_executor.GraphModule(lib["default"](*devs))
        assert isinstance(m.module, NativeModule) == (engine == "native")
        m.set_input(name, ref[name])
        m.run()
        outputs[engine] = [m.get_output(i).numpy() for i in range(m.get_num_outputs())]
    for c_out, py_out in zip(outputs["native"], outputs["python"], strict=True):
        np.testing.assert_array_equal(c_out, py_out)
    np.testing.assert_allclose(outputs["native"][0], ref["output_0"], **TOL)


@pytest.mark.parametrize("era", ["tvm021", "tvm025", "tvm027"])
def test_relax_vm_models_of_every_era_run_on_opencl(era: str) -> None:
    """A Relax VM executable built for OpenCL (tests/fixtures/build_relax_opencl.py) runs on
    opencl(0) from Python: the C runtime's Relax VM over arrays made in Python, which are its
    own (with pyopencl's arrays, until issue 43 item 4, the C VM refused them)."""
    from tvmrt import relax

    folder = built_fixtures("build_relax_opencl.py", peer=era, folder=f"relax_opencl{era[3:]}")
    with np.load(folder / "model.npz") as data:
        x, w, want = data["x"], data["w"], data["want"]
    dev = runtime.opencl(0)
    vm = relax.VirtualMachine(runtime.load_module(str(folder / "model.so")), dev)
    first = vm["main"](runtime.array(x, dev), runtime.array(w, dev))
    assert first.device == dev
    np.testing.assert_allclose(first.numpy(), want, **TOL)
    again = vm["main"](runtime.array(x, dev), runtime.array(w, dev))
    np.testing.assert_array_equal(again.numpy(), first.numpy())
    profiled = relax.VirtualMachine(
        runtime.load_module(str(folder / "model.so")), dev, profile=True
    )
    report = profiled.profile("main", runtime.array(x, dev), runtime.array(w, dev))
    kernels = [c for c in report.calls if not str(c["Name"]).startswith("vm.builtin.")]
    assert kernels
    assert all(str(c["Device"]) == "opencl0" for c in kernels)
