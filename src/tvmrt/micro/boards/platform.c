/* The platform port of the emulated boards (tvm/runtime/crt/platform.h): workspace from a
 * static buffer through the stack allocator (TVMRT_WORKSPACE_BYTES, sized by the build
 * from the package's metadata), abort and messages over semihosting, the timer over SysTick
 * (TVMRT_CPU_HZ), random bytes from xorshift. A firmware project writes its own port; this
 * one is the example the README points to. */
#include <stdarg.h>
#include <stdio.h>

#include "semihost.h"
#include "tvm/runtime/crt/platform.h"
#include "tvm/runtime/crt/stack_allocator.h"

#ifndef TVMRT_WORKSPACE_BYTES
#define TVMRT_WORKSPACE_BYTES 0
#endif
#ifndef TVMRT_CPU_HZ
#define TVMRT_CPU_HZ 25000000u
#endif

void tvmrt_counter_start(void);
uint64_t tvmrt_counter_ticks(void);

#if TVMRT_WORKSPACE_BYTES > 0
static uint8_t tvmrt_workspace_memory[TVMRT_WORKSPACE_BYTES + TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES]
    __attribute__((aligned(TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES)));
#else
static uint8_t tvmrt_workspace_memory[TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES];
#endif
static tvm_workspace_t tvmrt_workspace;
static int tvmrt_initialized;
static uint64_t tvmrt_timer_start;
static int tvmrt_timer_running;
static uint32_t tvmrt_random_state = 0x9E3779B9u;

tvm_crt_error_t TVMPlatformInitialize(void) {
  if (tvmrt_initialized) return kTvmErrorPlatformMemoryManagerInitialized;
  StackMemoryManager_Init(&tvmrt_workspace, tvmrt_workspace_memory, sizeof(tvmrt_workspace_memory));
  tvmrt_initialized = 1;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMPlatformMemoryAllocate(size_t num_bytes, DLDevice dev, void** out_ptr) {
  (void)dev;
  if (!tvmrt_initialized) TVMPlatformInitialize();
  if (num_bytes > 0x7FFFFFFFu) return kTvmErrorPlatformNoMemory;
  return StackMemoryManager_Allocate(&tvmrt_workspace, (int32_t)num_bytes, out_ptr);
}

tvm_crt_error_t TVMPlatformMemoryFree(void* ptr, DLDevice dev) {
  (void)dev;
  return StackMemoryManager_Free(&tvmrt_workspace, ptr);
}

void TVMPlatformAbort(tvm_crt_error_t code) {
  tvmrt_sh_write_u32("tvmrt-micro: TVMPlatformAbort ", (uint32_t)code);
  tvmrt_sh_exit(4);
}

size_t TVMPlatformFormatMessage(char* out_buf, size_t out_buf_size_bytes, const char* fmt,
                                va_list args) {
  int n = vsnprintf(out_buf, out_buf_size_bytes, fmt, args);
  if (n < 0) return 0;
  return (size_t)n < out_buf_size_bytes ? (size_t)n
         : out_buf_size_bytes           ? out_buf_size_bytes - 1
                                        : 0;
}

tvm_crt_error_t TVMPlatformTimerStart(void) {
  if (tvmrt_timer_running) return kTvmErrorPlatformTimerBadState;
  tvmrt_timer_start = tvmrt_counter_ticks();
  tvmrt_timer_running = 1;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMPlatformTimerStop(double* elapsed_time_seconds) {
  if (!tvmrt_timer_running) return kTvmErrorPlatformTimerBadState;
  tvmrt_timer_running = 0;
  *elapsed_time_seconds = (double)(tvmrt_counter_ticks() - tvmrt_timer_start) / TVMRT_CPU_HZ;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMPlatformBeforeMeasurement(void) { return kTvmErrorNoError; }
tvm_crt_error_t TVMPlatformAfterMeasurement(void) { return kTvmErrorNoError; }

tvm_crt_error_t TVMPlatformGenerateRandom(uint8_t* buffer, size_t num_bytes) {
  for (size_t i = 0; i < num_bytes; ++i) {
    tvmrt_random_state ^= tvmrt_random_state << 13;
    tvmrt_random_state ^= tvmrt_random_state >> 17;
    tvmrt_random_state ^= tvmrt_random_state << 5;
    buffer[i] = (uint8_t)tvmrt_random_state;
  }
  return kTvmErrorNoError;
}
