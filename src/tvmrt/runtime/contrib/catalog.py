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

# name prefixes -> the library they need
_PREFIXES = (
    ("tvm.contrib.nnpack.", "NNPACK (-libs=nnpack); tvmrt does not bundle NNPACK"),
    (
        "tvm.contrib.cudnn.",
        "cuDNN on a CUDA GPU; tvmrt runs the model's own CUDA kernels, not cuDNN",
    ),
    (
        "tvm.contrib.cublas.",
        "cuBLAS on a CUDA GPU; tvmrt runs the model's own CUDA kernels, not cuBLAS",
    ),
    (
        "tvm.contrib.cublaslt.",
        "cuBLASLt on a CUDA GPU; tvmrt runs the model's own CUDA kernels, not cuBLASLt",
    ),
    (
        "tvm.contrib.curand.",
        "cuRAND on a CUDA GPU; tvmrt runs the model's own CUDA kernels, not cuRAND",
    ),
    (
        "tvm.contrib.thrust.",
        "Thrust on a CUDA GPU; tvmrt runs the model's own CUDA kernels, not Thrust",
    ),
    (
        "tvm.contrib.cutlass.",
        "CUTLASS on a CUDA GPU; tvmrt runs the model's own CUDA kernels, not CUTLASS",
    ),
    ("tvm.contrib.miopen.", "MIOpen on a ROCm GPU; tvmrt has no ROCm backend"),
    ("tvm.contrib.rocblas.", "rocBLAS on a ROCm GPU; tvmrt has no ROCm backend"),
    ("tvm.contrib.hipblas.", "hipBLAS on a ROCm GPU; tvmrt has no ROCm backend"),
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
