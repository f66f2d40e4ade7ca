"""The C runtime reaches a device only through its table of backends (runtime/devices.c).

A device is one file that defines a ``tvmrt_device_backend`` and one line in ``k_backends``;
arrays, streams, the graph executor, the Relax VM and the workspace ask the table. So no
other C file names a device type other than the CPU's, and a device the table lacks is
refused with the table's own list (checked through the C API in test_c_errors.py).
"""

from __future__ import annotations

import re

from tests.native.conftest import NATIVE_SRC

RUNTIME = NATIVE_SRC / "runtime"
# the non-CPU device types of dlpack.h
_DEVICE_TYPE = re.compile(
    r"\bkDL(CUDA|CUDAHost|OpenCL|Vulkan|Metal|VPI|ROCM|ROCMHost|ExtDev|CUDAManaged|OneAPI"
    r"|WebGPU|Hexagon|MAIA)\b"
)
# a device's own files (its backend, its module loader, its compiler), and DLR's table of the
# device names compiled.meta gives ("gpu", "opencl", any other: ext_dev; dlr_files.c)
_OWN = {
    "cuda.c": {"CUDA"},
    "cuda_module.c": {"CUDA"},
    "nvrtc.c": {"CUDA"},
    "opencl.c": {"OpenCL"},
    "opencl_module.c": {"OpenCL"},
    "dlr_files.c": {"CUDA", "OpenCL", "ExtDev"},
}


def _code(path) -> str:
    """The file's text without comments."""
    text = path.read_text(encoding="utf-8")
    return re.sub(r"/\*.*?\*/|//[^\n]*", "", text, flags=re.S)


def test_no_file_outside_a_backend_names_a_device_type() -> None:
    named = {}
    for path in sorted(RUNTIME.glob("*.[ch]")):
        found = {m.group(1) for m in _DEVICE_TYPE.finditer(_code(path))}
        if found - _OWN.get(path.name, set()):
            named[path.name] = sorted(found)
    assert named == {}, "a device is reached through tvmrt_device_backend_of (devices.c)"


def test_each_backend_is_defined_in_its_own_file_and_listed_once() -> None:
    table = _code(RUNTIME / "devices.c")
    listed = re.findall(r"&(tvmrt_\w+_backend)\b", table)
    assert listed == sorted(set(listed), key=listed.index)  # once each
    assert listed, "k_backends lists no backend"
    for name in listed:
        definers = [
            p.name
            for p in RUNTIME.glob("*.c")
            if re.search(rf"\bconst tvmrt_device_backend {name} = {{", _code(p))
        ]
        assert len(definers) == 1, (name, definers)
        assert definers[0] == name.removeprefix("tvmrt_").removesuffix("_backend") + ".c"
