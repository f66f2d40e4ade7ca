"""What ``tvm.runtime.module`` answers about the runtime itself: ``enabled``,
``num_threads``, ``find_include_path`` and ``ModulePropertyMask``."""

from __future__ import annotations

import enum
import os
from pathlib import Path

from tvmrt.error import ArgumentTypeError, InvalidArgumentError, ModuleLoadError
from tvmrt.runtime.device import Device, DLDeviceType
from tvmrt.runtime.registry import get_global_func

__all__ = ["ModulePropertyMask", "enabled", "find_include_path", "num_threads"]


class ModulePropertyMask(enum.IntFlag):
    """Bits of :meth:`Module.get_property_mask <tvmrt.runtime.Module.get_property_mask>`
    (TVM's ``ModulePropertyMask``, same values)."""

    BINARY_SERIALIZABLE = 0b001
    RUNNABLE = 0b010
    DSO_EXPORTABLE = 0b100


def num_threads() -> int:
    """Threads a kernel's parallel loops use (``tvm.runtime.num_threads``).

    ``TVM_NUM_THREADS``, else ``OMP_NUM_THREADS``, else one per physical core the process
    may use (docs/tvm-compat.md, "Defaults", has how this differs from TVM's count).
    """
    return int(get_global_func("runtime.NumThreads")())


_PACKAGE = Path(__file__).resolve().parents[1]  # holds include/ (tvm/runtime, dlpack)


def find_include_path(
    name: str | list[str] | None = None,
    search_path: str | list[str] | None = None,
    optional: bool = False,
) -> list[str] | None:
    """Folders of the C headers a program built against the runtime includes.

    As TVM's ``find_include_path``: the roots are ``$TVM_INCLUDE_PATH`` (if set), tvmrt's
    package folder and ``search_path``; the answer is each root's ``include`` folder
    (``name`` None; tvmrt's holds ``tvm/runtime/c_runtime_api.h`` and ``dlpack/dlpack.h``),
    or each root's ``name`` folders (a name or a list), those that exist.

    Returns
    -------
    The folders found; None when there are none and ``optional`` is true.

    Raises
    ------
    ModuleLoadError
        When nothing is found and ``optional`` is false (TVM raises ``RuntimeError``).
    """
    env = os.environ.get("TVM_INCLUDE_PATH")
    roots = [Path(env)] if env else []
    roots.append(_PACKAGE)
    if search_path is not None:
        roots += [Path(p) for p in ([search_path] if isinstance(search_path, str) else search_path)]
    names = ["include"] if name is None else [name] if isinstance(name, str) else list(name)
    candidates = [root / n for n in names for root in roots]
    found = [str(c) for c in candidates if c.is_dir()]
    if found:
        return found
    if optional:
        return None
    raise ModuleLoadError(
        f"cannot find the header folders; candidates: {', '.join(str(c) for c in candidates)}"
    )


# TVM's RuntimeEnabled names, by the device type whose backend they ask about
_RUNTIME_NAMES: dict[str, int | None] = {
    "cpu": int(DLDeviceType.kDLCPU),
    "llvm": int(DLDeviceType.kDLCPU),
    "cuda": int(DLDeviceType.kDLCUDA),
    "gpu": int(DLDeviceType.kDLCUDA),
    "nvptx": int(DLDeviceType.kDLCUDA),
    "cl": int(DLDeviceType.kDLOpenCL),
    "opencl": int(DLDeviceType.kDLOpenCL),
    "sdaccel": int(DLDeviceType.kDLOpenCL),
    "mtl": int(DLDeviceType.kDLMetal),
    "metal": int(DLDeviceType.kDLMetal),
    "vulkan": int(DLDeviceType.kDLVulkan),
    "rocm": int(DLDeviceType.kDLROCM),
    "hexagon": int(DLDeviceType.kDLHexagon),
    "tflite": None,
    "stackvm": None,
    "rpc": None,
}


def enabled(target: str) -> bool:
    """Whether tvmrt can run code for ``target`` here (``tvm.runtime.enabled``).

    ``"cpu"`` and ``"llvm ..."`` are always true (host kernels); a device target
    (``"cuda"``, ``"gpu"``, ``"opencl"``, ``"vulkan"``, ``"metal"``, ``"rocm"``,
    ``"nvptx..."``, ``"hexagon"``) is true when tvmrt has a backend for it and device 0
    exists. ``"tflite"``, ``"stackvm"`` and ``"rpc"`` are runtimes tvmrt does not have.
    TVM answered whether its library was *built* with the runtime; tvmrt answers whether
    it can run it on this machine.

    >>> enabled("cpu"), enabled("llvm -mcpu=skylake"), enabled("stackvm")
    (True, True, False)

    Raises
    ------
    InvalidArgumentError
        For a name TVM does not know either (``Unknown optional runtime``).
    """
    if not isinstance(target, str):
        raise ArgumentTypeError(f"enabled() takes a target name, got {type(target).__name__}")
    name = target.strip()
    key = name.split(maxsplit=1)[0] if name else name
    for prefix in ("nvptx", "rocm", "llvm"):
        if key.startswith(prefix):
            key = prefix
    if key not in _RUNTIME_NAMES:
        raise InvalidArgumentError(
            f"Unknown optional runtime {target!r}; expected one of {', '.join(_RUNTIME_NAMES)}"
        )
    device_type = _RUNTIME_NAMES[key]
    if device_type is None:
        return False
    return Device(device_type, 0).exist
