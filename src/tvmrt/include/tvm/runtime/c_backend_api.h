/*
 * tvmrt's own minimal tvm/runtime/c_backend_api.h: the backend services generated kernels
 * call (workspace, thread pool, function lookup, system-library registration), declared
 * as tvmrt's native backend implements them, and the rest of TVM 0.19's backend API
 * (run-once, the environment's C API, the any-list helpers) that libtvmrt_runtime
 * implements. Written for tvmrt from its ABI notes.
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
TVM_DLL int TVMBackendRunOnce(void** handle, int (*f)(void*), void* cdata, int nbytes);
TVM_DLL int TVMBackendRegisterEnvCAPI(const char* name, void* ptr);
/* `anylist`: items of TVMRetValue's layout (TVMValue, then an int type code), see
   docs/c_runtime.md */
TVM_DLL int TVMBackendAnyListSetPackedArg(void* anylist, int index, TVMValue* args, int* type_codes,
                                          int arg_offset);
TVM_DLL int TVMBackendAnyListResetItem(void* anylist, int index);
TVM_DLL int TVMBackendAnyListMoveFromPackedReturn(void* anylist, int index, TVMValue* args,
                                                  int* type_codes, int ret_offset);

#ifdef __cplusplus
} /* extern "C" */
#endif
#endif /* TVM_RUNTIME_C_BACKEND_API_H_ */
