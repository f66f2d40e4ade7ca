"""Whether the OpenCL tests can run here (an OpenCL driver that builds and runs a kernel for
tvmrt's ``opencl(0)``), and the device's properties read from the driver by the test itself.

tvmrt's C runtime opens the system's ICD loader, ``libOpenCL.so.1`` (Debian:
``ocl-icd-libopencl1``), whose drivers are listed in ``/etc/OpenCL/vendors``. ``.ci/run``
installs Debian's pocl (``pocl-opencl-icd``, PoCL 3.1 on LLVM 15), which builds kernels on
every x86-64 CPU, AMD Zen 5 included.
"""

from __future__ import annotations

import ctypes
import os
from functools import cache
from typing import Any

import numpy as np

__all__ = ["opencl_unusable", "driver_device_info", "driver_program_binary", "one_kernel_module"]

_PROBE = "__kernel void probe(__global float* a) { a[get_global_id(0)] = 1.0f; }"


def one_kernel_module(name: str, program: str | bytes, fmt: str = "cl", handles: int = 1) -> Any:
    """An ``opencl`` module of one kernel ``name`` taking ``handles`` buffer arguments and a
    grid and block extent, its program OpenCL C source (``fmt="cl"``) or a device binary,
    written as TVM saves it and loaded by tvmrt's OpenCL loader."""
    from tvmrt.binfmt.stream import ByteReader, ByteWriter
    from tvmrt.error import ModuleLoadError
    from tvmrt.runtime.loaders.opencl import load_opencl_binary

    w = ByteWriter()
    w.string(fmt)
    w.u64(1)
    w.string(name)
    w.string("")
    w.u64(handles)
    for _ in range(handles):
        w.u8(3)  # a handle
        w.u8(64)
        w.u16(1)
    w.strings(["blockIdx.x", "threadIdx.x"])
    w.string(program)
    return load_opencl_binary(ByteReader(bytes(w.buffer), "blob", ModuleLoadError))


@cache
def opencl_unusable() -> str | None:
    """Why the OpenCL tests must skip here, or None when tvmrt's opencl(0) runs a kernel."""
    from tvmrt import runtime
    from tvmrt.error import TVMError

    dev = runtime.opencl(0)
    try:
        if not dev.exist:
            runtime.empty((1,), "float32", dev)  # raises what the C runtime found missing
        mod = one_kernel_module("probe", _PROBE)
        out = runtime.array(np.zeros(4, "float32"), dev)
        mod["probe"](out.data_ptr, 1, 4)
        dev.sync()
        if not (out.numpy() == 1).all():
            return f"OpenCL device 0 ({dev.device_name}) ran a kernel with a wrong result"
    except TVMError as exc:
        text = " ".join(str(exc).split())[:400]
        return (
            f"tvmrt's opencl(0) cannot run a kernel here: {text}. Install an OpenCL ICD loader "
            "and a driver that knows this CPU (Debian: ocl-icd-libopencl1 pocl-opencl-icd)"
        )
    return None


# -- the driver's own answers (the reference for tvmrt's Device properties) ----------------

_GPU, _ALL = 1 << 2, 0xFFFFFFFF
_INFO = {  # name -> (cl_device_info, ctype or "text")
    "type": (0x1000, ctypes.c_uint64),
    "max_compute_units": (0x1002, ctypes.c_uint32),
    "max_work_group_size": (0x1004, ctypes.c_size_t),
    "max_work_item_sizes": (0x1005, ctypes.c_size_t * 3),
    "max_clock_frequency": (0x100C, ctypes.c_uint32),
    "global_mem_size": (0x101F, ctypes.c_uint64),
    "local_mem_size": (0x1023, ctypes.c_uint64),
    "name": (0x102B, "text"),
    "driver_version": (0x102D, "text"),
    "version": (0x102F, "text"),
}


def driver_device_info() -> list[dict[str, object]]:
    """Every device TVM numbers ``opencl(0)``, ``opencl(1)``... (the GPUs of every platform,
    else every device), read with clGetDeviceInfo through ``libOpenCL.so.1`` directly."""
    lib = ctypes.CDLL(os.environ.get("TVMRT_LIBOPENCL") or "libOpenCL.so.1")
    found = []
    for d in _device_handles(lib):
        info: dict[str, object] = {}
        for name, (code, kind) in _INFO.items():
            if kind == "text":
                buf = ctypes.create_string_buffer(1024)
                lib.clGetDeviceInfo(ctypes.c_void_p(d), code, 1023, buf, None)
                info[name] = buf.value.decode()
            else:
                value = kind()
                lib.clGetDeviceInfo(ctypes.c_void_p(d), code, ctypes.sizeof(value),
                                    ctypes.byref(value), None)  # fmt: skip
                info[name] = list(value) if isinstance(value, ctypes.Array) else value.value
        found.append(info)
    return found


def driver_program_binary(source: str, index: int = 0) -> bytes:
    """The device binary the driver builds of OpenCL C ``source`` for device ``index`` (in
    TVM's numbering), through ``libOpenCL.so.1`` directly: what a module saved in a binary
    format (xclbin, aocx) holds."""
    lib = ctypes.CDLL(os.environ.get("TVMRT_LIBOPENCL") or "libOpenCL.so.1")
    lib.clCreateContext.restype = ctypes.c_void_p
    lib.clCreateProgramWithSource.restype = ctypes.c_void_p
    device = ctypes.c_void_p(_device_handles(lib)[index])
    status = ctypes.c_int32()
    context = lib.clCreateContext(None, 1, ctypes.byref(device), None, None, ctypes.byref(status))
    assert context, f"clCreateContext: {status.value}"
    text = ctypes.c_char_p(source.encode())
    program = lib.clCreateProgramWithSource(
        ctypes.c_void_p(context), 1, ctypes.byref(text), None, ctypes.byref(status)
    )
    assert program, f"clCreateProgramWithSource: {status.value}"
    program_p = ctypes.c_void_p(program)
    try:
        rc = lib.clBuildProgram(program_p, 1, ctypes.byref(device), None, None, None)
        assert rc == 0, f"clBuildProgram: {rc}"
        size = ctypes.c_size_t()
        lib.clGetProgramInfo(program_p, 0x1165, ctypes.sizeof(size), ctypes.byref(size), None)
        binary = ctypes.create_string_buffer(size.value)
        pointer = ctypes.c_char_p(ctypes.addressof(binary))
        rc = lib.clGetProgramInfo(
            program_p, 0x1166, ctypes.sizeof(pointer), ctypes.byref(pointer), None
        )
        assert rc == 0, f"clGetProgramInfo: {rc}"
        return binary.raw
    finally:
        lib.clReleaseProgram(program_p)
        lib.clReleaseContext(ctypes.c_void_p(context))


def _device_handles(lib: ctypes.CDLL) -> list[int]:
    """The cl_device_ids in TVM's numbering (the GPUs of every platform, else every device)."""
    n = ctypes.c_uint32()
    platforms = (ctypes.c_void_p * 16)()
    if lib.clGetPlatformIDs(16, platforms, ctypes.byref(n)) != 0:
        return []
    found: list[tuple[int, int]] = []
    for p in platforms[: min(n.value, 16)]:
        devices = (ctypes.c_void_p * 64)()
        count = ctypes.c_uint32()
        if lib.clGetDeviceIDs(ctypes.c_void_p(p), ctypes.c_uint64(_ALL), 64, devices,
                              ctypes.byref(count)) != 0:  # fmt: skip
            continue
        for d in devices[: min(count.value, 64)]:
            kind = ctypes.c_uint64()
            lib.clGetDeviceInfo(ctypes.c_void_p(d), 0x1000, 8, ctypes.byref(kind), None)
            found.append((int(d), kind.value))
    gpus = [d for d, kind in found if kind & _GPU]
    return gpus or [d for d, _ in found]
