/* The CRT platform port of the host (an MLF AOT package compiled for this machine, see
 * tvmrt/runtime/loaders/mlf_aot.py): workspace from the heap (64-byte aligned), and
 * TVMPlatformAbort returning to the caller of the entry instead of ending the process. The
 * functions generated code calls are crt_backend.c's, the same as on a microcontroller.
 *
 * The entry is called through tvmrt_crt_call_c (the c interface: inputs and outputs
 * structs) or tvmrt_crt_call_packed (the packed interface); a library's runs take turns
 * (its executor holds a lock), so the one error buffer is never shared by two runs. */
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tvm/runtime/c_backend_api.h"
#include "tvm/runtime/c_runtime_api.h"
#include "tvm/runtime/crt/platform.h"

static _Thread_local jmp_buf* tvmrt_crt_jump;

tvm_crt_error_t TVMPlatformMemoryAllocate(size_t num_bytes, DLDevice dev, void** out_ptr) {
  (void)dev;
  size_t size = num_bytes == 0 ? 64 : num_bytes;
  *out_ptr = NULL;
  if (size > SIZE_MAX - 63 || posix_memalign(out_ptr, 64, (size + 63) & ~(size_t)63) != 0) {
    *out_ptr = NULL;
    return kTvmErrorPlatformNoMemory;
  }
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMPlatformMemoryFree(void* ptr, DLDevice dev) {
  (void)dev;
  free(ptr);
  return kTvmErrorNoError;
}

void TVMPlatformAbort(tvm_crt_error_t code) {
  if (tvmrt_crt_jump != NULL) {
    char message[64];
    snprintf(message, sizeof(message), "TVMPlatformAbort(%d) in the model", (int)code);
    TVMAPISetLastError(message);
    longjmp(*tvmrt_crt_jump, 1);
  }
  abort();
}

const char* tvmrt_crt_last_error(void) { return TVMGetLastError(); }

typedef int32_t (*tvmrt_crt_c_entry)(void*, void*);
typedef int32_t (*tvmrt_crt_packed_entry)(void*, void*, int, void*, void*, void*);

#define TVMRT_CRT_GUARDED(call)                                                                    \
  jmp_buf here;                                                                                    \
  jmp_buf* volatile saved = tvmrt_crt_jump;                                                        \
  TVMAPISetLastError("");                                                                          \
  if (setjmp(here) != 0) {                                                                         \
    tvmrt_crt_jump = saved;                                                                        \
    return -2;                                                                                     \
  }                                                                                                \
  tvmrt_crt_jump = &here;                                                                          \
  int32_t rc = (call);                                                                             \
  tvmrt_crt_jump = saved;                                                                          \
  return rc;

int32_t tvmrt_crt_call_c(tvmrt_crt_c_entry entry, void* inputs,
                         void* outputs){TVMRT_CRT_GUARDED(entry(inputs, outputs))}

int32_t tvmrt_crt_call_packed(tvmrt_crt_packed_entry entry, void* args, void* codes, int num) {
  TVMValue ret;
  int ret_code = 0;
  TVMRT_CRT_GUARDED(entry(args, codes, num, &ret, &ret_code, NULL))
}
