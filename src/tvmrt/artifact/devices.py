"""Where an artifact runs: the devices an executor gets, device code, kernel threads.

The one rule for devices: a run on the CPU uses ``[cpu]``; a run on another device
keeps the CPU as the second device, ``[dev, cpu()]``, for graph nodes placed on the host
(heterogeneous graphs: ``device_index`` 1 and ``__copy`` nodes). On a device of an RPC
session the host is that session's CPU.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tvmrt.error import DeviceUnavailableError, InvalidArgumentError, TVMError
from tvmrt.runtime import kernel_services
from tvmrt.runtime.device import MASK2STR, Device, DLDeviceType, cpu
from tvmrt.runtime.module import Module
from tvmrt.runtime.remote_session import is_remote, local_type, remote_session

__all__ = [
    "DEVICE_MODULE_KINDS",
    "check_device_code",
    "device_code_problem",
    "executor_devices",
    "set_kernel_threads",
]

# module kinds holding kernels for a device, not the host (see tvmrt.runtime.loaders.blob)
DEVICE_MODULE_KINDS = {"opencl": "OpenCL", "cuda": "CUDA", "vulkan": "Vulkan", "metal": "Metal"}


def executor_devices(device: Device | None) -> list[Device]:
    """The devices a graph executor gets for a run on ``device`` (default ``cpu(0)``)."""
    dev = device or cpu()
    if local_type(dev) == DLDeviceType.kDLCPU:
        return [dev]
    return [dev, remote_session(dev).device(DLDeviceType.kDLCPU) if is_remote(dev) else cpu()]


def check_device_code(lib: Module, dev: Device, path: Path) -> None:
    """Refuse a CPU run of an artifact whose kernels are device code, naming the device,
    and a device run of an artifact without kernels for that device (a CPU-only build on
    ``opencl``), naming the device it was built for.

    Without this its host code would hand CPU memory to the device's kernel launcher, or
    its CPU kernels would get device memory.

    Raises
    ------
    DeviceUnavailableError
        If ``dev`` is the CPU and ``lib`` (or a module it imports) holds device kernels,
        or ``dev`` is a device none of its modules has kernels for.
    """
    stack, kinds = [lib], set()
    while stack:
        module = stack.pop()
        if module.type_key in DEVICE_MODULE_KINDS:
            kinds.add(module.type_key)
        stack.extend(module.imported_modules)
    if dev.device_type != cpu().device_type:
        wanted = MASK2STR.get(dev.device_type, str(dev.device_type))
        if wanted in DEVICE_MODULE_KINDS and wanted not in kinds:
            built = ", ".join(f"{DEVICE_MODULE_KINDS[k]} ({k})" for k in sorted(kinds))
            raise DeviceUnavailableError(
                f"{path.name!r} was built for {built or 'the CPU only'}: it holds no "
                f"{DEVICE_MODULE_KINDS[wanted]} kernels, so it cannot run on {wanted}; run it "
                f"on the device it was built for (tvmrt: drop --device {wanted}), or build it "
                f"for {wanted}"
            )
        return
    if kinds:
        kind = sorted(kinds)[0]
        raise DeviceUnavailableError(
            f"{path.name!r} holds {DEVICE_MODULE_KINDS[kind]} kernels ({kind!r} device "
            f"module), which do not run on the CPU: choose that device (tvmrt ... --device "
            f"{kind}; in Python, pass runtime.{kind}(0) with runtime.cpu(0))"
        )


def device_code_problem(kind: str, image: Any, what: str) -> str | None:
    """Why the kernels of a ``kind`` device module cannot run on this machine, or None.

    CUDA kernels need the NVIDIA driver and a GPU (``cuda(0)``), and a GPU and driver that
    can run the image (``image``: its PTX ISA and SM targets, for
    :func:`~tvmrt.runtime.loaders.cuda_image.check_runs_on`). Loading the driver runs
    none of the artifact's code. Other kinds are not checked here.
    """
    if kind != "cuda":
        return None
    from tvmrt.runtime.device_api import get_device_api
    from tvmrt.runtime.loaders.cuda_image import CudaImage, check_runs_on

    dev = Device(DLDeviceType.kDLCUDA, 0)
    api = get_device_api(dev)
    if not api.attribute(dev, "exist"):
        reason = getattr(api, "reason", None) or (
            f"the NVIDIA driver (CUDA {api.attribute(dev, 'driver_version')}) reports no GPU"
        )
        return f"its CUDA kernels cannot run here: {reason}"
    if isinstance(image, CudaImage):
        major, minor = (int(x) for x in str(api.attribute(dev, "compute_version")).split("."))
        try:
            check_runs_on(image, major * 10 + minor, int(api.attribute(dev, "api_version")), what)
        except TVMError as exc:
            return f"its CUDA kernels cannot run here: {exc}"
    return None


def set_kernel_threads(count: int) -> None:
    """Run parallel kernels on ``count`` threads (``--threads``).

    Raises
    ------
    InvalidArgumentError
        If ``count`` is below 1.
    """
    if count < 1:
        raise InvalidArgumentError(f"--threads must be at least 1, got {count}")
    kernel_services.set_num_threads(count)
