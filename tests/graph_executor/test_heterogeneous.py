"""Heterogeneous graphs (TVM's test_runtime_heterogeneous) with an emulated second device."""

from __future__ import annotations

import numpy as np
import pytest

from tvmrt import runtime
from tvmrt.contrib import graph_executor
from tvmrt.error import GraphFormatError
from tvmrt.testing import GraphBuilder, emulated_device, graphs, numpy_op_library

CUDA = runtime.cuda().device_type


def test_simplex_data_transferring():
    with emulated_device(CUDA):
        devs = [runtime.cpu(), runtime.cuda()]
        mod = graph_executor.create(graphs.heterogeneous_simplex(CUDA), numpy_op_library(), devs)
        a, b, c = (np.random.uniform(size=4).astype("float32") for _ in range(3))
        mod.run(A=a, B=b, C=c)
        np.testing.assert_allclose(mod.get_output(0).numpy(), (a + b) - c, rtol=1e-6)
        assert mod.get_input("A").device == runtime.cuda()
        assert mod.get_input("C").device == runtime.cpu()
        assert mod.get_output(0).device == runtime.cpu()
        assert mod.storage_plan.bytes_by_device() == {CUDA: 3 * 16, 1: 3 * 16}


def duplex_graph(n: int = 4) -> str:
    """TVM's duplex graph: device → cpu → device with storage ids [4,5,0,1,6,2,0,7,3]."""
    b = GraphBuilder()
    a = b.input("A", (n,), storage_id=4, device_type=CUDA)
    bb = b.input("B", (n,), storage_id=5, device_type=CUDA)
    (s,) = b.op("elemwise_add", "add", [a, bb], [(n,)], storage_ids=[0], device_type=CUDA)
    (c0,) = b.op("__copy_add_to_sub", "__copy", [s], [(n,)], storage_ids=[1], device_type=1)
    c = b.input("C", (n,), storage_id=6, device_type=1)
    (d,) = b.op("elemwise_sub", "subtract", [c0, c], [(n,)], storage_ids=[2], device_type=1)
    (c1,) = b.op("__copy_sub_to_add", "__copy", [d], [(n,)], storage_ids=[0], device_type=CUDA)
    dd = b.input("D", (n,), storage_id=7, device_type=CUDA)
    (out,) = b.op("elemwise_add1", "add", [c1, dd], [(n,)], storage_ids=[3], device_type=CUDA)
    b.output(out)
    return b.to_json()


def test_duplex_data_transferring():
    with emulated_device(CUDA) as api:
        devs = [runtime.cpu(), runtime.cuda()]
        mod = graph_executor.create(duplex_graph(), numpy_op_library(), devs)
        vals = {k: np.random.uniform(size=4).astype("float32") for k in "ABCD"}
        mod.run(**vals)
        expected = vals["A"] + vals["B"] - vals["C"] + vals["D"]
        np.testing.assert_allclose(mod.get_output(0).numpy(), expected, rtol=1e-6)
        assert mod.get_output(0).device == runtime.cuda()
        assert mod.storage_plan.entry_storage == (4, 5, 0, 1, 6, 2, 0, 7, 3)
        assert api.allocations == 5  # pools 0, 3, 4, 5, 7 live on the device


def test_one_pool_on_two_devices_is_rejected():
    b = GraphBuilder()
    x = b.input("x", (4,), storage_id=0, device_type=1)
    (y,) = b.op("copy", "__copy", [x], [(4,)], storage_ids=[0], device_type=CUDA)
    b.output(y)
    with (
        emulated_device(CUDA),
        pytest.raises(
            GraphFormatError, match="storage pool 0 is assigned to entries on device types 1 and 2"
        ),
    ):
        graph_executor.create(b.to_json(), numpy_op_library(), [runtime.cpu(), runtime.cuda()])


def test_device_without_backend_is_a_clear_error():
    from tvmrt.error import DeviceUnavailableError

    vulkan = runtime.vulkan()
    with pytest.raises(DeviceUnavailableError, match=r"no backend for device vulkan\(0\)"):
        graph_executor.create(
            graphs.heterogeneous_simplex(vulkan.device_type), numpy_op_library(),
            [runtime.cpu(), vulkan],
        )  # fmt: skip
