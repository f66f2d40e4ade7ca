/*
 * tvmrt's tvm/runtime/module.h: runtime::Module (LoadFromFile, GetFunction, Import) for
 * C++ programs written against TVM <= 0.19. Defined with PackedFunc in packed_func.h,
 * which each needs.
 */
#ifndef TVMRT_TVM_RUNTIME_MODULE_H_
#define TVMRT_TVM_RUNTIME_MODULE_H_

#include <tvm/runtime/packed_func.h>

#endif  // TVMRT_TVM_RUNTIME_MODULE_H_
