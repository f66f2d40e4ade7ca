"""What TVM v0.19's runtime gave kernels by name that tvmrt does not, and why.

Used by :mod:`tvmrt.runtime.loaders.needs` to explain a refusal: a library whose kernels
look up one of these names is refused at load, naming it, instead of failing at its first
run. The names come from ``TVM_REGISTER_GLOBAL`` in TVM v0.19's ``src/runtime/contrib/``
(CPU libraries) and the GPU library prefixes TOPI's externs use.
"""

from __future__ import annotations

__all__ = ["unsupported_reason"]

# exact names: CPU functions of optional libraries tvmrt does not bundle
_NAMES = {
    "tvm.contrib.dnnl.conv2d": (
        "oneDNN's conv2d extern (TVM built with USE_DNNL); tvmrt provides "
        "tvm.contrib.dnnl.matmul only"
    ),
}

# GPU libraries TVM's externs call (-libs=...): their prefix after tvm.contrib., the name
_NVIDIA = (("cudnn", "cuDNN"), ("cublas", "cuBLAS"), ("cublaslt", "cuBLASLt"),
           ("curand", "cuRAND"), ("thrust", "Thrust"), ("cutlass", "CUTLASS"))  # fmt: skip
_ROCM = (("miopen", "MIOpen"), ("rocblas", "rocBLAS"), ("hipblas", "hipBLAS"))

# name prefixes -> the library they need
_PREFIXES = (
    ("tvm.contrib.nnpack.", "NNPACK (-libs=nnpack); tvmrt does not bundle NNPACK"),
    *(
        (
            f"tvm.contrib.{key}.",
            f"{lib} on a CUDA GPU; tvmrt runs the model's own CUDA kernels, not {lib}",
        )
        for key, lib in _NVIDIA
    ),
    *(
        (f"tvm.contrib.{key}.", f"{lib} on a ROCm GPU; tvmrt has no ROCm backend")
        for key, lib in _ROCM
    ),
    ("tvm.contrib.mps.", "Apple Metal Performance Shaders; tvmrt runs CPU kernels"),
    ("tvm.contrib.coreml", "Apple Core ML; tvmrt has no Core ML runtime"),
    ("tvm.contrib.tflite", "the TensorFlow Lite runtime, which tvmrt does not include"),
    ("tvm.contrib.amx.", "Intel AMX tile configuration (USE_AMX); tvmrt does not set up AMX"),
    ("tvm.contrib.papi", "PAPI hardware counters; tvmrt does not include PAPI"),
)


def unsupported_reason(name: str) -> str | None:
    """Why tvmrt lacks ``name`` if TVM's runtime had it, else ``None`` (an unknown name).

    >>> unsupported_reason("tvm.contrib.nnpack.fully_connected_inference")
    'NNPACK (-libs=nnpack); tvmrt does not bundle NNPACK'
    >>> unsupported_reason("my.function") is None
    True
    """
    if name in _NAMES:
        return _NAMES[name]
    for prefix, reason in _PREFIXES:
        if name.startswith(prefix):
            return reason
    return None
