/* The function table of a CRT module (TVM's tvm/runtime/crt/func_registry.h): what a
 * system library's generated code (lib0.c of an MLF graph package) fills in. tvmrt's micro
 * runtime calls a graph's kernels directly (tvmrt.micro's graph plan), so only the types
 * are here, not TVM's registry functions. */
#ifndef TVM_RUNTIME_CRT_FUNC_REGISTRY_H_
#define TVM_RUNTIME_CRT_FUNC_REGISTRY_H_

#include <stdint.h>

#include "tvm/runtime/c_backend_api.h"
#include "tvm/runtime/c_runtime_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef uint16_t tvm_function_index_t;
typedef uint16_t tvm_module_index_t;

typedef struct TVMFuncRegistry {
  /* bytes 0-1: the number of functions (little-endian), then their NUL-terminated names */
  const char* names;
  /* the functions, in the order of their names */
  const TVMBackendPackedCFunc* funcs;
} TVMFuncRegistry;

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_CRT_FUNC_REGISTRY_H_ */
