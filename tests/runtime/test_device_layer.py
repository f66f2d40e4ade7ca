"""The device layer on opaque device memory: the null backend, and OpenCL where present.

Every test runs on ``null`` (no driver needed) and again on ``opencl`` where an OpenCL
driver runs a kernel (pocl); the OpenCL run is skipped otherwise, saying why.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from support.opencl import opencl_unusable
from tvmrt import runtime
from tvmrt.contrib import graph_executor
from tvmrt.error import ArrayError, DeviceUnavailableError
from tvmrt.runtime.device_api import get_device_api
from tvmrt.runtime.params import save_param_dict
from tvmrt.testing import GraphBuilder, numpy_op_library
from tvmrt.testing.devices import null_device

EXT = runtime.ext_dev().device_type


def _opencl_present() -> bool:
    return opencl_unusable() is None


@pytest.fixture(params=["null", "opencl"])
def dev(request: pytest.FixtureRequest) -> Iterator[runtime.Device]:
    if request.param == "null":
        with null_device(EXT):
            yield runtime.ext_dev(0)
    else:
        if not _opencl_present():
            pytest.skip(str(opencl_unusable()))
        yield runtime.opencl(0)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "int64", "uint16"])
def test_round_trip_through_device_memory(dev: runtime.Device, dtype: str) -> None:
    host = (np.arange(24) * 3 - 7).astype(dtype).reshape(2, 3, 4)
    arr = runtime.array(host, dev)
    assert arr.device == dev
    assert arr.shape == (2, 3, 4)
    assert arr.dtype == dtype
    out = arr.numpy()
    assert out.dtype == host.dtype
    np.testing.assert_array_equal(out, host)
    out[0, 0, 0] = 99  # numpy() is a copy, never the device memory
    assert arr.numpy()[0, 0, 0] == host[0, 0, 0]


def test_device_memory_has_no_numpy_view(dev: runtime.Device) -> None:
    arr = runtime.empty((4,), "float32", dev)
    with pytest.raises(ArrayError, match=r"device memory.*numpy\(\)"):
        arr.numpy_view()
    assert arr.data_ptr % 64 == 0
    dl = arr.dltensor()
    assert (dl.device.device_type, dl.device.device_id) == (dev.device_type, dev.device_id)
    assert dl.data == arr.data_ptr
    assert dl.byte_offset == 0


def test_copies_between_devices(dev: runtime.Device) -> None:
    host = np.random.default_rng(0).standard_normal((5, 7)).astype("float32")
    a = runtime.array(host, dev)
    b = a.copyto(dev)  # device -> device
    assert b.data_ptr != a.data_ptr
    np.testing.assert_array_equal(b.numpy(), host)
    c = b.copyto(runtime.cpu())  # device -> host
    assert c.device == runtime.cpu()
    np.testing.assert_array_equal(c.numpy_view(), host)
    d = runtime.empty((5, 7), "float32", dev)
    runtime.array(host.T.copy().T).copyto(d)  # host (Fortran order) -> device
    np.testing.assert_array_equal(d.numpy(), host)
    d.copyfrom(host * 2)  # numpy -> device
    np.testing.assert_array_equal(d.numpy(), host * 2)
    e = runtime.empty((35,), "int32", dev)  # same bytes, other shape and dtype, as in TVM
    d.copyto(e)
    np.testing.assert_array_equal(e.numpy(), (host * 2).reshape(-1).view(np.int32))


def test_copy_size_and_shape_checks(dev: runtime.Device) -> None:
    a = runtime.empty((4,), "float32", dev)
    with pytest.raises(ArrayError, match="size in bytes must exactly match"):
        a.copyto(runtime.empty((5,), "float32", dev))
    with pytest.raises(ArrayError, match="shape do not match"):
        a.copyfrom(np.zeros(3, "float32"))
    a.copyfrom([1, 2, 3, 4])  # converted to the array's dtype
    np.testing.assert_array_equal(a.numpy(), [1, 2, 3, 4])


def test_views_share_device_storage(dev: runtime.Device) -> None:
    a = runtime.array(np.arange(8, dtype="float32"), dev)
    v = a._create_view((2, 2), relative_byte_offset=16)
    assert v.byte_offset == 16
    assert v.device == dev
    np.testing.assert_array_equal(v.numpy(), [[4, 5], [6, 7]])
    v.copyfrom(np.full((2, 2), -1, "float32"))
    np.testing.assert_array_equal(a.numpy(), [0, 1, 2, 3, -1, -1, -1, -1])
    with pytest.raises(ArrayError, match="would occupy bytes 4 <= i_byte < 36"):
        a._create_view((8,), relative_byte_offset=4)


def test_fill_and_empty_arrays(dev: runtime.Device) -> None:
    a = runtime.empty((3,), "int32", dev)
    a[:] = 7
    np.testing.assert_array_equal(a.numpy(), [7, 7, 7])
    z = runtime.array(np.zeros((0, 3), "float32"), dev)
    assert z.shape == (0, 3)
    assert z.numpy().shape == (0, 3)


def test_streams_and_sync(dev: runtime.Device) -> None:
    api = get_device_api(dev)
    stream = api.create_stream(dev)
    api.set_stream(dev, stream)
    a = runtime.array(np.arange(4, dtype="float32"), dev)
    api.sync(dev, stream)
    dev.sync()
    np.testing.assert_array_equal(a.numpy(), np.arange(4))
    api.set_stream(dev, 0)
    api.free_stream(dev, stream)
    with pytest.raises(ValueError, match="stream"):
        api.free_stream(dev, stream)


def test_missing_device_index(dev: runtime.Device) -> None:
    other = runtime.Device(dev.device_type, 7)
    assert not other.exist
    with pytest.raises(DeviceUnavailableError, match="does not exist"):
        runtime.empty((2,), "float32", other)


def _copy_graph(dev_type: int, n: int = 4) -> str:
    """x (host) -> __copy -> device -> __copy -> host -> add(., w on device -> host)."""
    b = GraphBuilder()
    x = b.input("x", (n,), device_type=1)
    w = b.input("w", (n,), device_type=dev_type)
    (on_dev,) = b.op("to_dev", "__copy", [x], [(n,)], device_type=dev_type)
    (back,) = b.op("to_host", "__copy", [on_dev], [(n,)], device_type=1)
    (w_host,) = b.op("w_to_host", "__copy", [w], [(n,)], device_type=1)
    (s,) = b.op("add", "add", [back, w_host], [(n,)], device_type=1)
    (out,) = b.op("out_to_dev", "__copy", [s], [(n,)], device_type=dev_type)
    b.output(out)
    return b.to_json()


def test_graph_executor_on_device(dev: runtime.Device) -> None:
    mod = graph_executor.create(
        _copy_graph(dev.device_type), numpy_op_library(), [runtime.cpu(), dev]
    )
    x = np.arange(4, dtype="float32")
    w = np.array([10, 20, 30, 40], "float32")
    mod.load_params(save_param_dict({"w": w}))
    assert mod.get_input("w").device == dev
    np.testing.assert_array_equal(mod.get_input("w").numpy(), w)
    mod.set_input("x", x)
    mod.run()
    out = mod.get_output(0)
    assert out.device == dev  # like TVM: the output stays on its device
    np.testing.assert_array_equal(out.numpy(), x + w)
    mod.set_input("w", runtime.array(w * 2, dev))  # device -> device input
    mod.run()
    np.testing.assert_array_equal(mod.get_output(0).numpy(), x + 2 * w)
    host_out = runtime.empty((4,), "float32")
    mod.get_output(0, host_out)  # copied to the host array given
    np.testing.assert_array_equal(host_out.numpy(), x + 2 * w)


def test_timing_synchronises_the_device() -> None:
    """time_evaluator/benchmark wait for the device around every measurement (TVM's rule)."""
    with null_device(EXT) as api:
        dev = runtime.ext_dev(0)
        mod = graph_executor.create(
            _copy_graph(dev.device_type), numpy_op_library(), [dev, runtime.cpu()]
        )
        before = api.syncs
        result = mod.benchmark(dev, number=1, repeat=3)
        assert len(result.results) == 3
        assert api.syncs >= before + 2 * 3  # before and after each measurement
        evaluator = mod.module.time_evaluator("run", dev, number=2, repeat=2)
        before = api.syncs
        evaluator()
        assert api.syncs >= before + 2 * 2


def test_cpu_kernels_never_see_device_memory() -> None:
    """A graph with CPU entries but no CPU device is refused instead of crashing a kernel."""
    from tvmrt.error import ArrayError

    with null_device(EXT), pytest.raises(ArrayError, match="no cpu device was given"):
        graph_executor.create(_copy_graph(EXT), numpy_op_library(), [runtime.ext_dev(0)])


def test_dlpack_exports_device_memory(dev: runtime.Device) -> None:
    from tvmrt.runtime._ctypes_api import DLManagedTensorVersioned
    from tvmrt.runtime._dlpack import capsule_name, capsule_pointer

    arr = runtime.array(np.arange(6, dtype="float32").reshape(2, 3), dev)
    assert arr.__dlpack_device__() == (dev.device_type, dev.device_id)
    capsule = arr.__dlpack__(max_version=(1, 0))
    name = capsule_name(capsule)
    tensor = DLManagedTensorVersioned.from_address(capsule_pointer(capsule, name)).dl_tensor
    assert (tensor.device.device_type, tensor.device.device_id) == arr.__dlpack_device__()
    assert tensor.data == arr.data_ptr
    assert [tensor.strides[i] for i in range(2)] == [3, 1]
    back = runtime.from_dlpack(capsule)  # tvmrt's own device memory: wrapped, not copied
    assert back.device == dev
    assert back.data_ptr == arr.data_ptr
    np.testing.assert_array_equal(back.numpy(), arr.numpy())
    view = arr._create_view((3,), relative_byte_offset=12)
    imported = runtime.from_dlpack(view)
    assert imported.byte_offset == 12
    np.testing.assert_array_equal(imported.numpy(), [3, 4, 5])


def test_host_numpy_and_device_capsules(dev: runtime.Device) -> None:
    arr = runtime.array(np.arange(4, dtype="int32"), dev)
    with pytest.raises(BufferError, match=r"not on the requested device cpu\(0\); pass copy=True"):
        np.from_dlpack(arr, device="cpu")
    np.testing.assert_array_equal(np.from_dlpack(arr, device="cpu", copy=True), [0, 1, 2, 3])
    with pytest.raises((BufferError, RuntimeError), match="device"):
        np.from_dlpack(arr)  # numpy reads host memory only


def test_foreign_device_memory_is_refused(dev: runtime.Device) -> None:
    from tvmrt.runtime._ctypes_api import DLManagedTensorVersioned
    from tvmrt.runtime._dlpack import capsule_name, capsule_pointer

    capsule = runtime.array(np.arange(4, dtype="float32"), dev).__dlpack__(max_version=(1, 0))
    name = capsule_name(capsule)
    tensor = DLManagedTensorVersioned.from_address(capsule_pointer(capsule, name)).dl_tensor
    tensor.data = 0x1000  # memory no tvmrt backend handed out
    with pytest.raises(BufferError, match=r"is not memory tvmrt's .* backend allocated"):
        runtime.from_dlpack(capsule)


def test_raw_streams_on_device(dev: runtime.Device) -> None:
    """TVM's Device.create_raw_stream / set_raw_stream / sync(stream) / free_raw_stream."""
    stream = dev.create_raw_stream()
    assert stream.value
    dev.set_raw_stream(stream)
    a = runtime.array(np.arange(5, dtype="int16"), dev)
    dev.sync(stream)
    np.testing.assert_array_equal(a.numpy(), np.arange(5))
    dev.set_raw_stream(None)
    dev.free_raw_stream(stream)
    with pytest.raises(ValueError, match="stream"):
        dev.set_raw_stream(stream)


def test_raw_streams_on_cpu_are_null() -> None:
    stream = runtime.cpu().create_raw_stream()
    assert stream.value is None
    runtime.cpu().set_raw_stream(stream)
    runtime.cpu().sync(stream)
    runtime.cpu().free_raw_stream(stream)
