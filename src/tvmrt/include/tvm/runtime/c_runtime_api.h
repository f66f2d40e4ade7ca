/*
 * tvmrt's own minimal tvm/runtime/c_runtime_api.h: the types and functions of TVM's C ABI
 * (TVM <= 0.20, "legacy" packed functions) that C sources exported by TVM use: TVMValue,
 * the argument type codes and the few runtime functions kernels call. Written for tvmrt
 * from its ABI notes; tvmrt's native backend provides the functions.
 */
#ifndef TVMRT_TVM_RUNTIME_C_RUNTIME_API_H_
#define TVMRT_TVM_RUNTIME_C_RUNTIME_API_H_

#include <stddef.h>
#include <stdint.h>

#include "dlpack/dlpack.h"

#ifndef TVM_DLL
#ifdef _WIN32
#define TVM_DLL __declspec(dllexport)
#else
#define TVM_DLL __attribute__((visibility("default")))
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  kTVMArgInt = 0,
  kTVMArgFloat = 2,
  kTVMOpaqueHandle = 3,
  kTVMNullptr = 4,
  kTVMDataType = 5,
  kDLDevice = 6,
  kTVMDLTensorHandle = 7,
  kTVMObjectHandle = 8,
  kTVMModuleHandle = 9,
  kTVMPackedFuncHandle = 10,
  kTVMStr = 11,
  kTVMBytes = 12,
  kTVMNDArrayHandle = 13,
  kTVMObjectRValueRefArg = 14,
  kTVMArgBool = 15
} TVMArgTypeCode;

typedef DLTensor* TVMArrayHandle;
typedef void* TVMFunctionHandle;
typedef void* TVMModuleHandle;
typedef void* TVMRetValueHandle;
typedef void* TVMStreamHandle;
typedef void* TVMObjectHandle;

/* One 8-byte argument or return value; which member is live is given by its type code. */
typedef union {
  int64_t v_int64;
  double v_float64;
  void* v_handle;
  const char* v_str;
  DLDataType v_type;
  DLDevice v_device;
} TVMValue;

typedef struct {
  const char* data;
  size_t size;
} TVMByteArray;

/* The signature of every packed function a TVM library exports. */
typedef int (*TVMBackendPackedCFunc)(TVMValue* args, int* type_codes, int num_args,
                                     TVMValue* out_ret_value, int* out_ret_tcode,
                                     void* resource_handle);

TVM_DLL void TVMAPISetLastError(const char* msg);
TVM_DLL int TVMFuncCall(TVMFunctionHandle func, TVMValue* arg_values, int* type_codes,
                        int num_args, TVMValue* ret_val, int* ret_type_code);

#ifdef __cplusplus
}  /* extern "C" */
#endif
#endif /* TVMRT_TVM_RUNTIME_C_RUNTIME_API_H_ */
