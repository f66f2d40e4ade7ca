/* The functions TVM's generated C code calls (tvm/runtime/c_backend_api.h), for a
 * microcontroller: workspace through the port's TVMPlatformMemoryAllocate/Free, the last
 * error in one static buffer, parallel loops run as one task (the CRT has no threads), no
 * functions to find in an environment. No heap, no libc beyond memcpy/strlen. */
#include <string.h>

#include "tvm/runtime/c_backend_api.h"
#include "tvm/runtime/c_runtime_api.h"
#include "tvm/runtime/crt/error_codes.h"
#include "tvm/runtime/crt/platform.h"

#ifndef TVMRT_CRT_ERROR_BYTES
#define TVMRT_CRT_ERROR_BYTES 128
#endif

static char tvmrt_crt_error[TVMRT_CRT_ERROR_BYTES];

void TVMAPISetLastError(const char* msg) {
  size_t n = msg == NULL ? 0 : strlen(msg);
  if (n >= sizeof(tvmrt_crt_error)) n = sizeof(tvmrt_crt_error) - 1;
  if (n) memcpy(tvmrt_crt_error, msg, n);
  tvmrt_crt_error[n] = 0;
}

const char* TVMGetLastError(void) { return tvmrt_crt_error; }

void* TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes, int dtype_code_hint,
                               int dtype_bits_hint) {
  (void)dtype_code_hint;
  (void)dtype_bits_hint;
  if (device_type != kDLCPU || nbytes > (uint64_t)SIZE_MAX) {
    TVMAPISetLastError(device_type != kDLCPU ? "workspace asked for a device other than the CPU"
                                             : "workspace larger than the address space");
    return NULL;
  }
  DLDevice dev = {(DLDeviceType)device_type, device_id};
  void* ptr = NULL;
  if (TVMPlatformMemoryAllocate((size_t)nbytes, dev, &ptr) != kTvmErrorNoError) {
    TVMAPISetLastError("out of workspace: TVMPlatformMemoryAllocate failed");
    return NULL;
  }
  return ptr;
}

int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr) {
  DLDevice dev = {(DLDeviceType)device_type, device_id};
  return TVMPlatformMemoryFree(ptr, dev) == kTvmErrorNoError ? 0 : -1;
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
  (void)func_name;
  *out = NULL;
  TVMAPISetLastError("TVMBackendGetFuncFromEnv: the micro runtime has no functions to find");
  return -1;
}

int TVMBackendRegisterSystemLibSymbol(const char* name, void* ptr) {
  (void)name;
  (void)ptr;
  return 0;
}
