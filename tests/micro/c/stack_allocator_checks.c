/* The micro runtime's stack allocator and workspace functions, on the host under ASan and
 * UBSan: LIFO use, alignment, the room left, negative and huge sizes, frees out of place,
 * and (built with TVM_CRT_STACK_ALLOCATOR_ENABLE_LIFO_CHECK) frees out of order. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tvm/runtime/c_backend_api.h"
#include "tvm/runtime/crt/platform.h"
#include "tvm/runtime/crt/stack_allocator.h"

static int failures;
#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond);                                   \
      ++failures;                                                                                  \
    }                                                                                              \
  } while (0)

static uint8_t memory[256 + 3];
static tvm_workspace_t workspace;

/* the platform port TVMBackendAllocWorkspace reaches */
tvm_crt_error_t TVMPlatformMemoryAllocate(size_t num_bytes, DLDevice dev, void** out_ptr) {
  (void)dev;
  if (num_bytes > 0x7FFFFFFF) return kTvmErrorPlatformNoMemory;
  return StackMemoryManager_Allocate(&workspace, (int32_t)num_bytes, out_ptr);
}

tvm_crt_error_t TVMPlatformMemoryFree(void* ptr, DLDevice dev) {
  (void)dev;
  return StackMemoryManager_Free(&workspace, ptr);
}

int main(void) {
  /* an unaligned buffer: the workspace starts at the next 16-byte boundary */
  StackMemoryManager_Init(&workspace, memory + 3, sizeof(memory) - 3);
  CHECK(((uintptr_t)workspace.workspace & 15u) == 0);
  CHECK(workspace.workspace_size <= sizeof(memory) - 3);
  void *a = NULL, *b = NULL, *c = NULL;
  CHECK(StackMemoryManager_Allocate(&workspace, 10, &a) == kTvmErrorNoError);
  CHECK(StackMemoryManager_Allocate(&workspace, 1, &b) == kTvmErrorNoError);
  CHECK(((uintptr_t)b & 15u) == 0 && (uint8_t*)b > (uint8_t*)a);
  CHECK(StackMemoryManager_Allocate(&workspace, -1, &c) == kTvmErrorFunctionCallInvalidArg);
  CHECK(StackMemoryManager_Allocate(&workspace, 0x7FFFFFFF, &c) == kTvmErrorPlatformNoMemory);
  CHECK(StackMemoryManager_Allocate(&workspace, 4096, &c) == kTvmErrorPlatformNoMemory);
  /* a pointer outside the allocated part is refused, the state unchanged */
  CHECK(StackMemoryManager_Free(&workspace, memory + sizeof(memory)) ==
        kTvmErrorPlatformStackAllocBadFree);
  CHECK(StackMemoryManager_Free(&workspace, memory) == kTvmErrorPlatformStackAllocBadFree);
#ifdef TVM_CRT_STACK_ALLOCATOR_ENABLE_LIFO_CHECK
  CHECK(StackMemoryManager_Free(&workspace, a) == kTvmErrorPlatformStackAllocBadFree);
#endif
  CHECK(StackMemoryManager_Free(&workspace, b) == kTvmErrorNoError);
  CHECK(StackMemoryManager_Free(&workspace, a) == kTvmErrorNoError);
  CHECK(workspace.next_alloc == workspace.workspace);
  /* all of it, exactly, then not a byte more */
  size_t all = workspace.workspace_size;
  all &= ~(size_t)15;
#ifdef TVM_CRT_STACK_ALLOCATOR_ENABLE_LIFO_CHECK
  all -= 16; /* the tag's slot */
#endif
  CHECK(StackMemoryManager_Allocate(&workspace, (int32_t)all, &a) == kTvmErrorNoError);
  CHECK(StackMemoryManager_Allocate(&workspace, 1, &b) == kTvmErrorPlatformNoMemory);
  CHECK(StackMemoryManager_Free(&workspace, a) == kTvmErrorNoError);
  /* the backend's functions over the port: the CPU only, NULL with a message otherwise */
  void* w = TVMBackendAllocWorkspace(kDLCPU, 0, 64, 2, 32);
  CHECK(w != NULL);
  CHECK(TVMBackendFreeWorkspace(kDLCPU, 0, w) == 0);
  CHECK(TVMBackendAllocWorkspace(kDLCUDA, 0, 64, 2, 32) == NULL);
  CHECK(TVMBackendAllocWorkspace(kDLCPU, 0, (uint64_t)1 << 40, 2, 32) == NULL);
  CHECK(TVMGetLastError()[0] != 0);
  TVMFunctionHandle f = (TVMFunctionHandle)1;
  CHECK(TVMBackendGetFuncFromEnv(NULL, "tvm.missing", &f) == -1 && f == NULL);
  if (failures == 0) printf("ok\n");
  return failures != 0;
}
