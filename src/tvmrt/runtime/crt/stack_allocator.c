/* The stack allocator of tvm/runtime/crt/stack_allocator.h. Sizes are checked against the
 * room left (never by pointer sums that can wrap), a negative size is refused, and a free
 * names a block inside the allocated part or is refused. */
#include "tvm/runtime/crt/stack_allocator.h"

#define TVMRT_ALIGN ((uintptr_t)TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES)

_Static_assert(TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES >= STACK_ALLOCATOR_TAG_SIZE_BYTES &&
                   (TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES & (TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES - 1)) ==
                       0,
               "TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES: a power of two of at least 4");

tvm_crt_error_t StackMemoryManager_Init(tvm_workspace_t* tvm_runtime_workspace,
                                        uint8_t* g_aot_memory, size_t workspace_size) {
  uintptr_t start = (uintptr_t)g_aot_memory;
  uintptr_t aligned = (start + TVMRT_ALIGN - 1u) & ~(TVMRT_ALIGN - 1u);
  size_t skipped = (size_t)(aligned - start);
  tvm_runtime_workspace->workspace = (uint8_t*)aligned;
  tvm_runtime_workspace->next_alloc = (uint8_t*)aligned;
  tvm_runtime_workspace->workspace_size = workspace_size > skipped ? workspace_size - skipped : 0;
  return kTvmErrorNoError;
}

tvm_crt_error_t StackMemoryManager_Allocate_Body(tvm_workspace_t* tvm_runtime_workspace,
                                                 int32_t nbytes, void** current_alloc,
                                                 uint8_t do_lifo_check) {
  if (nbytes < 0) return kTvmErrorFunctionCallInvalidArg;
  size_t used = (size_t)(tvm_runtime_workspace->next_alloc - tvm_runtime_workspace->workspace);
  size_t left = tvm_runtime_workspace->workspace_size - used;
  size_t padded = ((size_t)nbytes + TVMRT_ALIGN - 1u) & ~(size_t)(TVMRT_ALIGN - 1u);
  /* the LIFO tag takes the last 4 bytes of one more aligned slot, so every block stays
   * aligned (TVM's puts it right after the block, leaving the next one 4 bytes off) */
  size_t tag_room = do_lifo_check ? (size_t)TVMRT_ALIGN : 0u;
  size_t need = padded + tag_room;
  if (need > left) return kTvmErrorPlatformNoMemory;
  uint8_t* block = tvm_runtime_workspace->next_alloc;
  uint8_t* next = block + need;
  if (do_lifo_check) {
    uint32_t tag = (uint32_t)need ^ STACK_ALLOCATOR_TAG;
    uint8_t* at = next - STACK_ALLOCATOR_TAG_SIZE_BYTES;
    for (int i = 0; i < STACK_ALLOCATOR_TAG_SIZE_BYTES; ++i) at[i] = (uint8_t)(tag >> (8 * i));
  }
  tvm_runtime_workspace->next_alloc = next;
  *current_alloc = block;
  return kTvmErrorNoError;
}

tvm_crt_error_t StackMemoryManager_Allocate(tvm_workspace_t* tvm_runtime_workspace, int32_t nbytes,
                                            void** current_alloc) {
#ifdef TVM_CRT_STACK_ALLOCATOR_ENABLE_LIFO_CHECK
  return StackMemoryManager_Allocate_Body(tvm_runtime_workspace, nbytes, current_alloc, 1);
#else
  return StackMemoryManager_Allocate_Body(tvm_runtime_workspace, nbytes, current_alloc, 0);
#endif
}

tvm_crt_error_t StackMemoryManager_Free_Body(tvm_workspace_t* tvm_runtime_workspace, void* ptr,
                                             uint8_t do_lifo_check) {
  uint8_t* block = (uint8_t*)ptr;
  if (block < tvm_runtime_workspace->workspace || block > tvm_runtime_workspace->next_alloc) {
    return kTvmErrorPlatformStackAllocBadFree;
  }
  if (do_lifo_check) {
    uint8_t* end = tvm_runtime_workspace->next_alloc;
    if ((size_t)(end - block) < STACK_ALLOCATOR_TAG_SIZE_BYTES) {
      return kTvmErrorPlatformStackAllocBadFree;
    }
    uint32_t tag = 0;
    for (int i = 0; i < STACK_ALLOCATOR_TAG_SIZE_BYTES; ++i) {
      tag |= (uint32_t)end[i - STACK_ALLOCATOR_TAG_SIZE_BYTES] << (8 * i);
    }
    if ((tag ^ STACK_ALLOCATOR_TAG) != (uint32_t)(end - block)) {
      return kTvmErrorPlatformStackAllocBadFree;
    }
  }
  tvm_runtime_workspace->next_alloc = block;
  return kTvmErrorNoError;
}

tvm_crt_error_t StackMemoryManager_Free(tvm_workspace_t* tvm_runtime_workspace, void* ptr) {
#ifdef TVM_CRT_STACK_ALLOCATOR_ENABLE_LIFO_CHECK
  return StackMemoryManager_Free_Body(tvm_runtime_workspace, ptr, 1);
#else
  return StackMemoryManager_Free_Body(tvm_runtime_workspace, ptr, 0);
#endif
}
