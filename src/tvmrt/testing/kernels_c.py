"""C source for hand-written kernel libraries in tests and benchmarks.

:data:`KERNEL_PRELUDE` declares what a TVM <= 0.20 (legacy ABI) kernel library sees, the
way TVM's codegen declares it: the packed-call value union, ``DLTensor``, and the weak
context slots tvmrt fills at load (``__TVMBackendGetFuncFromEnv``, ``__TVMFuncCall``,
``__TVMAPISetLastError``, ``__tvm_module_ctx``). Append kernels to it and compile with the
system C compiler as a shared library.
"""

from __future__ import annotations

__all__ = ["KERNEL_PRELUDE"]

KERNEL_PRELUDE = r"""
#include <stdint.h>
typedef union { int64_t v_int64; double v_float64; void* v_handle; const char* v_str; } TVMValue;
typedef struct {
  void* data; int32_t device_type; int32_t device_id; int32_t ndim;
  uint8_t code; uint8_t bits; uint16_t lanes;
  int64_t* shape; int64_t* strides; uint64_t byte_offset;
} DLTensor;
#define SLOT __attribute__((weak, visibility("default")))
SLOT int (*__TVMBackendGetFuncFromEnv)(void*, const char*, void**) = 0;
SLOT int (*__TVMFuncCall)(void*, TVMValue*, int*, int, TVMValue*, int*) = 0;
SLOT void (*__TVMAPISetLastError)(const char*) = 0;
SLOT void* __tvm_module_ctx = 0;
#define TENSOR(i) ((DLTensor*)args[i].v_handle)
"""
