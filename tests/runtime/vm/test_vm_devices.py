"""DeviceCopy (the one opcode no relayvm/ build has) across the CPU and a second device.

The second device is tvmrt's emulated accelerator (host memory behind a device type of
its own), as the heterogeneous graph tests use; a hand-made executable copies the input
there and back.
"""

from __future__ import annotations

import numpy as np
import pytest

import tvmrt.runtime as rt
from tvmrt.error import ArrayError, DeviceUnavailableError
from tvmrt.runtime import vm as vm_rt
from tvmrt.runtime.vm import opcodes as op
from tvmrt.runtime.vm.format import ExecutableData, VMFunction, write_executable
from tvmrt.testing.devices import emulated_device

CUDA = rt.cuda().device_type


def _exe(code):
    main = VMFunction("main", 4, ["x"], [0], code)
    data = ExecutableData(
        "0.16.dev0", [(1, 0, ""), (CUDA, 0, "")], 0, ["main"], [], [], [], {}, [main]
    )
    return vm_rt.Executable.load_exec(write_executable(data), rt.PyModule({}))


def test_device_copy_moves_data_to_the_device_and_back():
    code = [
        (op.DEVICE_COPY, 0, 0, 1, 1),
        (op.DEVICE_COPY, 1, 1, 0, 2),
        (op.ALLOC_ADT, 0, 2, 3, 1, 2),
        (op.RET, 3),
    ]
    x = np.arange(12, dtype="float32").reshape(3, 4)
    with emulated_device(CUDA):
        vm = vm_rt.VirtualMachine(_exe(code), [rt.cuda(0), rt.cpu()])
        on_device, back = vm.invoke("main", x)
        assert on_device.device == rt.cuda(0)
        assert back.device == rt.cpu(0)
        assert np.array_equal(on_device.numpy(), x)
        assert np.array_equal(back.numpy(), x)


def test_device_copy_from_the_wrong_device_is_refused():
    code = [(op.DEVICE_COPY, 0, 1, 0, 1), (op.RET, 1)]
    with emulated_device(CUDA):
        vm = vm_rt.VirtualMachine(_exe(code), [rt.cuda(0), rt.cpu()])
        with pytest.raises(ArrayError, match="expects a tensor on cuda"):
            vm.invoke("main", np.ones(3, "float32"))


def test_a_virtual_device_without_a_physical_one_is_named():
    with pytest.raises(DeviceUnavailableError, match="virtual device 1 needs a device of type 2"):
        vm_rt.VirtualMachine(_exe([(op.RET, 0)]), rt.cpu())
