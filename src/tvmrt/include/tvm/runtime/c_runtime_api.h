/*
 * tvmrt's tvm/runtime/c_runtime_api.h: TVM's C runtime API (TVM <= 0.19, "legacy" packed
 * functions) with TVM's names and signatures: TVMValue, the argument type codes, the
 * functions kernels call, and the runtime API applications call (modules, packed
 * functions, the global registry, arrays, streams). Written for tvmrt from its ABI notes.
 * libtvmrt_runtime (C11, no Python) implements all of it; the Python extension implements
 * the kernel-facing part (TVMAPISetLastError, TVMFuncCall).
 *
 * Handles and ownership follow TVM: a module, function or array handle that a call gives
 * you (TVMModLoadFromFile, TVMFuncGetGlobal, TVMModGetFunction, TVMFuncCreateFromCFunc,
 * TVMArrayAlloc, an object returned by TVMFuncCall) is yours to free (TVMModFree,
 * TVMFuncFree, TVMArrayFree, TVMObjectFree); arguments are borrowed for the call.
 * TVMGetLastError's text stays valid until the next failing call on the same thread.
 */
#ifndef TVM_RUNTIME_C_RUNTIME_API_H_
#define TVM_RUNTIME_C_RUNTIME_API_H_

#include <stddef.h>
#include <stdint.h>

#include "dlpack/dlpack.h"

#define TVM_VERSION "0.19.0"

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

/* the index type of shapes */
typedef int64_t tvm_index_t;

/* TVM's own device types beyond DLPack's (TVM >= 0.13 numbering). */
typedef enum { kDLAOCL = 32, kDLSDAccel, kOpenGL, kDLMicroDev } TVMDeviceExtType;

/* argument type codes 16..20 were NNVM's; extension codes start at 16 */
#define kTVMExtBegin 16
#define kTVMNNVMFirst 16
#define kTVMNNVMLast 20
#define kTVMExtReserveEnd 64
#define kTVMExtEnd 128

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

/* A packed function written in C (TVMFuncCreateFromCFunc); set the result with
   TVMCFuncSetReturn, return 0, or call TVMAPISetLastError and return -1. */
typedef int (*TVMPackedCFunc)(TVMValue* args, int* type_codes, int num_args, TVMRetValueHandle ret,
                              void* resource_handle);
typedef void (*TVMPackedCFuncFinalizer)(void* resource_handle);

/* -- errors -- */
TVM_DLL void TVMAPISetLastError(const char* msg);
TVM_DLL const char* TVMGetLastError(void);
/* NULL: the C runtime's errors carry no C++ stack trace (TVM gives one for InternalError) */
TVM_DLL const char* TVMGetLastBacktrace(void);
/* C has no exceptions: prints the last error to stderr and aborts (an uncaught throw);
   C++ code throws tvm::runtime::Error itself (tvm/runtime/logging.h) */
TVM_DLL void TVMThrowLastError(void);

/* -- modules -- */
TVM_DLL int TVMModLoadFromFile(const char* file_name, const char* format, TVMModuleHandle* out);
/* tvmrt's (TVM has none): a shared library (format "so" or "") from `size` bytes in memory,
   e.g. a model decrypted there. It goes through a memfd (Linux), so nothing of it is written
   to a disk; it is checked and loaded as the same file would be. */
TVM_DLL int TVMModLoadFromMemory(const void* data, size_t size, const char* format,
                                 TVMModuleHandle* out);
TVM_DLL int TVMModImport(TVMModuleHandle mod, TVMModuleHandle dep);
TVM_DLL int TVMModGetFunction(TVMModuleHandle mod, const char* func_name, int query_imports,
                              TVMFunctionHandle* out);
TVM_DLL int TVMModFree(TVMModuleHandle mod);

/* -- packed functions and the global registry -- */
TVM_DLL int TVMFuncFree(TVMFunctionHandle func);
TVM_DLL int TVMFuncCall(TVMFunctionHandle func, TVMValue* arg_values, int* type_codes, int num_args,
                        TVMValue* ret_val, int* ret_type_code);
TVM_DLL int TVMCFuncSetReturn(TVMRetValueHandle ret, TVMValue* value, int* type_code, int num_ret);
TVM_DLL int TVMCbArgToReturn(TVMValue* value, int* code);
TVM_DLL int TVMFuncCreateFromCFunc(TVMPackedCFunc func, void* resource_handle,
                                   TVMPackedCFuncFinalizer fin, TVMFunctionHandle* out);
TVM_DLL int TVMFuncRegisterGlobal(const char* name, TVMFunctionHandle f, int override);
TVM_DLL int TVMFuncGetGlobal(const char* name, TVMFunctionHandle* out);
TVM_DLL int TVMFuncListGlobalNames(int* out_size, const char*** out_array);
TVM_DLL int TVMFuncRemoveGlobal(const char* name);

/* -- arrays (CPU) -- */
TVM_DLL int TVMArrayAlloc(const tvm_index_t* shape, int ndim, int dtype_code, int dtype_bits,
                          int dtype_lanes, int device_type, int device_id, TVMArrayHandle* out);
TVM_DLL int TVMArrayFree(TVMArrayHandle handle);
TVM_DLL int TVMArrayCopyFromBytes(TVMArrayHandle handle, void* data, size_t nbytes);
TVM_DLL int TVMArrayCopyToBytes(TVMArrayHandle handle, void* data, size_t nbytes);
TVM_DLL int TVMArrayCopyFromTo(TVMArrayHandle from, TVMArrayHandle to, TVMStreamHandle stream);
TVM_DLL int TVMArrayGetTypeIndex(TVMArrayHandle handle, unsigned* out_tindex);

/* -- DLPack: an array over another framework's tensor, and back -- */
TVM_DLL int TVMArrayFromDLPack(DLManagedTensor* from, TVMArrayHandle* out);
TVM_DLL int TVMArrayToDLPack(TVMArrayHandle from, DLManagedTensor** out);
TVM_DLL void TVMDLManagedTensorCallDeleter(DLManagedTensor* dltensor);

/* -- streams (the CPU has none: these succeed and do nothing there) -- */
TVM_DLL int TVMStreamCreate(int device_type, int device_id, TVMStreamHandle* out);
TVM_DLL int TVMStreamFree(int device_type, int device_id, TVMStreamHandle stream);
TVM_DLL int TVMSetStream(int device_type, int device_id, TVMStreamHandle handle);
TVM_DLL int TVMSynchronize(int device_type, int device_id, TVMStreamHandle stream);
TVM_DLL int TVMStreamStreamSynchronize(int device_type, int device_id, TVMStreamHandle src,
                                       TVMStreamHandle dst);

/* -- objects: module and function handles -- */
TVM_DLL int TVMObjectRetain(TVMObjectHandle obj);
TVM_DLL int TVMObjectFree(TVMObjectHandle obj);
TVM_DLL int TVMByteArrayFree(TVMByteArray* arr);
TVM_DLL int TVMObjectGetTypeIndex(TVMObjectHandle obj, unsigned* out_tindex);
TVM_DLL int TVMObjectTypeKey2Index(const char* type_key, unsigned* out_tindex);
/* *out_type_key is malloc'ed: the caller frees it */
TVM_DLL int TVMObjectTypeIndex2Key(unsigned tindex, char** out_type_key);
TVM_DLL int TVMObjectDerivedFrom(uint32_t child_type_index, uint32_t parent_type_index,
                                 int* is_derived);

/* -- raw device memory (CPU) -- */
TVM_DLL int TVMDeviceAllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment,
                                    DLDataType type_hint, void** out_data);
TVM_DLL int TVMDeviceAllocDataSpaceWithScope(DLDevice dev, int ndim, const int64_t* shape,
                                             DLDataType dtype, const char* mem_scope,
                                             void** out_data);
TVM_DLL int TVMDeviceFreeDataSpace(DLDevice dev, void* ptr);
TVM_DLL int TVMDeviceCopyDataFromTo(DLTensor* from, DLTensor* to, TVMStreamHandle stream);

#ifdef __cplusplus
} /* extern "C" */
#endif
#endif /* TVM_RUNTIME_C_RUNTIME_API_H_ */
