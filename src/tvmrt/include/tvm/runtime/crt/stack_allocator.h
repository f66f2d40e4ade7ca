/* TVM's stack allocator (tvm/runtime/crt/stack_allocator.h): workspace taken and given
 * back in LIFO order from one static buffer, the way AOT code uses it. With
 * TVM_CRT_STACK_ALLOCATOR_ENABLE_LIFO_CHECK each block carries a 4-byte tag and a free out
 * of order is refused (kTvmErrorPlatformStackAllocBadFree); without it a free of a pointer
 * outside the allocated part is refused all the same. */
#ifndef TVM_RUNTIME_CRT_STACK_ALLOCATOR_H_
#define TVM_RUNTIME_CRT_STACK_ALLOCATOR_H_

#include <stddef.h>
#include <stdint.h>

#if defined(__has_include)
#if __has_include("crt_config.h")
#include "crt_config.h"
#endif
#endif
#include "tvm/runtime/crt/error_codes.h"

#define STACK_ALLOCATOR_TAG 0xabcd1234
#define STACK_ALLOCATOR_TAG_SIZE_BYTES 4

#ifndef TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES
#define TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES 16
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  uint8_t* next_alloc;   /* the next free byte, aligned */
  uint8_t* workspace;    /* the start of the workspace, aligned */
  size_t workspace_size; /* its bytes from `workspace` on */
} tvm_workspace_t;

tvm_crt_error_t StackMemoryManager_Init(tvm_workspace_t* tvm_runtime_workspace,
                                        uint8_t* g_aot_memory, size_t workspace_size);
tvm_crt_error_t StackMemoryManager_Allocate(tvm_workspace_t* tvm_runtime_workspace, int32_t nbytes,
                                            void** current_alloc);
tvm_crt_error_t StackMemoryManager_Allocate_Body(tvm_workspace_t* tvm_runtime_workspace,
                                                 int32_t nbytes, void** current_alloc,
                                                 uint8_t do_lifo_check);
tvm_crt_error_t StackMemoryManager_Free(tvm_workspace_t* tvm_runtime_workspace, void* ptr);
tvm_crt_error_t StackMemoryManager_Free_Body(tvm_workspace_t* tvm_runtime_workspace, void* ptr,
                                             uint8_t do_lifo_check);

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_CRT_STACK_ALLOCATOR_H_ */
