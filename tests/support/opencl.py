"""Whether the OpenCL tests can run here: pyopencl, an OpenCL device, and a driver that
compiles kernels for this CPU.

The pocl that pyopencl's wheel bundles (PoCL 3.0, LLVM 14) names CPUs LLVM 14 does not know
(AMD Zen 5, family 26) "generic", which its compiler then refuses (``unknown target CPU
'generic'``): every kernel build fails. Debian's pocl (``pocl-opencl-icd``, PoCL 3.1 on
LLVM 15) builds there, and the ICD loaders list it first; ``.ci/run`` installs it.
"""

from __future__ import annotations

from functools import cache

__all__ = ["opencl_unusable"]

_PROBE = "__kernel void probe(__global float* a) { a[get_global_id(0)] = 1.0f; }"


@cache
def opencl_unusable() -> str | None:
    """Why the OpenCL tests must skip here, or None when device 0 builds a kernel."""
    try:
        import pyopencl as cl
    except ImportError:
        return "pyopencl is not installed (pip install -e '.[test]')"
    from tvmrt import runtime

    if not runtime.opencl(0).exist:
        return "no OpenCL device (install pocl-binary-distribution or Debian's pocl-opencl-icd)"
    from tvmrt.runtime.device_api import get_device_api

    device = get_device_api(runtime.opencl(0)).cl_devices()[0]  # tvmrt's opencl(0)
    try:
        cl.Program(cl.Context([device]), _PROBE).build()
    except cl.Error as exc:
        log = " ".join(str(exc).split())[:300]
        return (
            f"OpenCL device 0 ({device.name}, {device.platform.version.strip()}) cannot compile "
            f"a kernel on this CPU: {log}. pyopencl's bundled pocl (LLVM 14) does not know "
            "newer CPUs such as AMD Zen 5; install Debian's pocl-opencl-icd, which is then "
            "device 0"
        )
    return None
