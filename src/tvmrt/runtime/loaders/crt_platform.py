"""The small CRT platform an MLF AOT package's C code needs on the host (C source).

microTVM's C runtime (CRT) gives generated AOT code a handful of functions; on a
microcontroller the project template supplies them. tvmrt compiles this file together
with the package's ``codegen/host/src/*.c`` (:mod:`.mlf_aot`), and links the library with
``-Bsymbolic`` so the code binds to these definitions, never to another runtime's symbols
already in the process:

* ``TVMBackendAllocWorkspace`` / ``TVMBackendFreeWorkspace``: 64-byte aligned heap
  blocks (the kernels' scratch when the build has no static workspace pool);
* ``TVMPlatformMemoryAllocate`` / ``TVMPlatformMemoryFree``: the same, CRT's signature;
* ``TVMPlatformAbort``: a fatal error inside the model; it returns to the caller of the
  entry function (``tvmrt_crt_call_*``), which reports it, instead of ending the process;
* ``TVMAPISetLastError`` (kept per thread; ``tvmrt_crt_last_error`` reads it),
  ``TVMBackendParallelLaunch`` (one task, serially: the CRT has no thread pool),
  ``TVMBackendParallelBarrier``, ``TVMBackendGetFuncFromEnv`` (no functions to find),
  ``TVMBackendRegisterSystemLibSymbol``.

The entry function is called through ``tvmrt_crt_call_c`` (the ``c`` interface:
``tvmgen_<name>_run(inputs, outputs)``), ``tvmrt_crt_call_packed`` (the ``packed``
interface: ``args``, type codes, count).
"""

from __future__ import annotations

__all__ = ["PLATFORM_SOURCE", "PLATFORM_VERSION"]

PLATFORM_VERSION = "tvmrt-crt-platform-v1"  # part of the compile cache key

PLATFORM_SOURCE = r"""
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tvm/runtime/c_backend_api.h"
#include "tvm/runtime/c_runtime_api.h"

static _Thread_local jmp_buf* tvmrt_crt_jump;
static _Thread_local char tvmrt_crt_error[1024];

void TVMAPISetLastError(const char* msg) {
  snprintf(tvmrt_crt_error, sizeof(tvmrt_crt_error), "%s", msg ? msg : "(null)");
}

const char* tvmrt_crt_last_error(void) { return tvmrt_crt_error; }

static void* tvmrt_crt_alloc(uint64_t nbytes) {
  void* ptr = NULL;
  uint64_t size = (nbytes + 63u) & ~(uint64_t)63u;
  if (size == 0) size = 64;
  if (size > (uint64_t)SIZE_MAX || posix_memalign(&ptr, 64, (size_t)size) != 0) {
    snprintf(tvmrt_crt_error, sizeof(tvmrt_crt_error),
             "out of memory: the model asked for a %llu-byte workspace",
             (unsigned long long)nbytes);
    return NULL;
  }
  return ptr;
}

void* TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes,
                               int dtype_code_hint, int dtype_bits_hint) {
  (void)device_id;
  (void)dtype_code_hint;
  (void)dtype_bits_hint;
  if (device_type != 1) {
    snprintf(tvmrt_crt_error, sizeof(tvmrt_crt_error),
             "the model asked for workspace on device type %d; this host platform has the "
             "CPU (1) only", device_type);
    return NULL;
  }
  return tvmrt_crt_alloc(nbytes);
}

int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr) {
  (void)device_type;
  (void)device_id;
  free(ptr);
  return 0;
}

int32_t TVMPlatformMemoryAllocate(size_t num_bytes, DLDevice dev, void** out_ptr) {
  (void)dev;
  *out_ptr = tvmrt_crt_alloc((uint64_t)num_bytes);
  return *out_ptr == NULL ? -1 : 0;
}

int32_t TVMPlatformMemoryFree(void* ptr, DLDevice dev) {
  (void)dev;
  free(ptr);
  return 0;
}

void TVMPlatformAbort(int32_t code) {
  if (tvmrt_crt_jump != NULL) {
    snprintf(tvmrt_crt_error, sizeof(tvmrt_crt_error), "TVMPlatformAbort(%d) in the model",
             (int)code);
    longjmp(*tvmrt_crt_jump, 1);
  }
  abort();
}

int TVMBackendParallelLaunch(FTVMParallelLambda flambda, void* cdata, int num_task) {
  (void)num_task;
  TVMParallelGroupEnv env;
  memset(&env, 0, sizeof(env));
  env.num_task = 1;
  return flambda(0, &env, cdata);
}

int TVMBackendParallelBarrier(int task_id, TVMParallelGroupEnv* penv) {
  (void)task_id;
  (void)penv;
  return 0;
}

int TVMBackendGetFuncFromEnv(void* mod_node, const char* func_name, TVMFunctionHandle* out) {
  (void)mod_node;
  *out = NULL;
  snprintf(tvmrt_crt_error, sizeof(tvmrt_crt_error),
           "the model looked up the runtime function '%s'; the host CRT platform has none",
           func_name ? func_name : "(null)");
  return -1;
}

int TVMBackendRegisterSystemLibSymbol(const char* name, void* ptr) {
  (void)name;
  (void)ptr;
  return 0;
}

typedef int32_t (*tvmrt_crt_c_entry)(void*, void*);
typedef int32_t (*tvmrt_crt_packed_entry)(void*, void*, int, void*, void*, void*);

#define TVMRT_CRT_GUARDED(call)              \
  jmp_buf here;                              \
  jmp_buf* volatile saved = tvmrt_crt_jump;  \
  tvmrt_crt_error[0] = 0;                    \
  if (setjmp(here) != 0) {                   \
    tvmrt_crt_jump = saved;                  \
    return -2;                               \
  }                                          \
  tvmrt_crt_jump = &here;                    \
  int32_t rc = (call);                       \
  tvmrt_crt_jump = saved;                    \
  return rc;

int32_t tvmrt_crt_call_c(tvmrt_crt_c_entry entry, void* inputs, void* outputs) {
  TVMRT_CRT_GUARDED(entry(inputs, outputs))
}

int32_t tvmrt_crt_call_packed(tvmrt_crt_packed_entry entry, void* args, void* codes, int num) {
  TVMValue ret;
  int ret_code = 0;
  TVMRT_CRT_GUARDED(entry(args, codes, num, &ret, &ret_code, NULL))
}
"""
