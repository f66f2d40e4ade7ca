/*
 * tvmrt's own minimal tvm/runtime/c_backend_api.h: the backend services generated kernels
 * call (workspace, thread pool, function lookup, system-library registration), declared
 * as tvmrt's native backend implements them. Written for tvmrt from its ABI notes.
 */
#ifndef TVM_RUNTIME_C_BACKEND_API_H_
#define TVM_RUNTIME_C_BACKEND_API_H_

#include "tvm/runtime/c_runtime_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  void* sync_handle;
  int32_t num_task;
} TVMParallelGroupEnv;

typedef int (*FTVMParallelLambda)(int task_id, TVMParallelGroupEnv* penv, void* cdata);

TVM_DLL int TVMBackendGetFuncFromEnv(void* mod_node, const char* func_name, TVMFunctionHandle* out);
TVM_DLL int TVMBackendRegisterSystemLibSymbol(const char* name, void* ptr);
TVM_DLL void* TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes,
                                       int dtype_code_hint, int dtype_bits_hint);
TVM_DLL int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr);
TVM_DLL int TVMBackendParallelLaunch(FTVMParallelLambda flambda, void* cdata, int num_task);
TVM_DLL int TVMBackendParallelBarrier(int task_id, TVMParallelGroupEnv* penv);

#ifdef __cplusplus
} /* extern "C" */
#endif
#endif /* TVM_RUNTIME_C_BACKEND_API_H_ */
