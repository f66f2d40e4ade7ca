"""Device: constructors, equality, repr, properties, backends."""

from __future__ import annotations

import os
import pickle

import pytest

from tvmrt import runtime
from tvmrt.error import DeviceUnavailableError
from tvmrt.runtime import Device
from tvmrt.testing import emulated_device

pytestmark = pytest.mark.arm  # numpy-only: also runs on emulated ARM (make test-arm)


@pytest.mark.parametrize(
    ("dev", "text"),
    [
        (runtime.cpu(), "cpu(0)"),
        (runtime.cuda(1), "cuda(1)"),
        (runtime.opencl(), "opencl(0)"),
        (runtime.cl(2), "opencl(2)"),
        (runtime.vulkan(), "vulkan(0)"),
        (runtime.metal(), "metal(0)"),
        (runtime.mtl(), "metal(0)"),
        (runtime.vpi(), "vpi(0)"),
        (runtime.rocm(), "rocm(0)"),
        (runtime.ext_dev(), "ext_dev(0)"),
    ],
)
def test_constructors_and_repr(dev, text):
    assert repr(dev) == str(dev) == text


def test_gpu_is_deprecated():
    with pytest.warns(DeprecationWarning, match=r"gpu\(\) is deprecated"):
        assert runtime.gpu(1) == runtime.cuda(1)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("cuda:1",), runtime.cuda(1)),
        (("cpu",), runtime.cpu(0)),
        (("llvm",), runtime.cpu(0)),
        (("llvm -mcpu=znver3",), runtime.cpu(0)),
        (("cuda", 2), runtime.cuda(2)),
        ((2, 3), runtime.cuda(3)),
        ((runtime.cuda(1),), runtime.cuda(1)),
    ],
)
def test_device_factory(args, expected):
    assert runtime.device(*args) == expected


def test_device_factory_errors():
    with pytest.raises(ValueError, match="unknown device type 'tpu'; expected one of"):
        runtime.device("tpu")
    with pytest.raises(ValueError, match="index 'x' is not a number"):
        runtime.device("cuda:x")
    with pytest.raises(TypeError, match="device type must be a str or int"):
        runtime.device(1.5)  # type: ignore[arg-type]


def test_equality_hash_immutability_pickle():
    assert Device(1, 0) == runtime.cpu()
    assert Device(1, 0) != runtime.cpu(1)
    assert len({runtime.cpu(), Device(1, 0), runtime.cuda()}) == 2
    with pytest.raises(AttributeError, match="immutable"):
        runtime.cpu().device_id = 3  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(runtime.cuda(2))) == runtime.cuda(2)
    assert repr(Device(129, 0)) == "remote[0]:cpu(0)"


def test_cpu_properties():
    cpu = runtime.cpu()
    assert cpu.exist
    assert not runtime.cpu(1).exist
    assert cpu.warp_size is None
    assert cpu.max_threads_per_block is None
    assert cpu.compute_version is None
    assert cpu.total_global_memory is None
    cpu.sync()


def test_devices_without_backend():
    assert not runtime.vulkan().exist
    assert runtime.vulkan().warp_size is None
    with pytest.raises(DeviceUnavailableError, match=r"no backend for device vulkan\(0\)"):
        runtime.vulkan().sync()
    with pytest.raises(DeviceUnavailableError):
        runtime.empty((2,), "float32", runtime.vulkan())


@pytest.mark.skipif(os.path.exists("/dev/nvidiactl"), reason="this machine has an NVIDIA driver")
def test_cuda_without_a_driver_says_why():
    assert not runtime.cuda().exist
    assert runtime.cuda().warp_size is None
    with pytest.raises(DeviceUnavailableError, match="CUDA: cannot load the NVIDIA driver"):
        runtime.cuda().sync()
    with pytest.raises(DeviceUnavailableError, match=r"libcuda\.so\.1"):
        runtime.empty((2,), "float32", runtime.cuda())


def test_emulated_device():
    with emulated_device(runtime.cuda().device_type, num_devices=2) as api:
        assert runtime.cuda(1).exist
        assert not runtime.cuda(2).exist
        arr = runtime.empty((3,), "float32", runtime.cuda(1))
        assert arr.device == runtime.cuda(1)
        runtime.cuda().sync()
        assert api.syncs == 1
        with pytest.raises(DeviceUnavailableError, match=r"cuda\(5\) does not exist"):
            runtime.empty((3,), "float32", runtime.cuda(5))
    assert not runtime.cuda().exist
