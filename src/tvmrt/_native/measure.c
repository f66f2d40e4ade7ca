/*
 * Measurement helpers for tests and benchmarks: call sequences, empty launches and
 * workspace pairs timed in C (see services.c for the whole picture).
 */
#include <time.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "services.h"

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

/* Call `count` legacy packed functions back to back with prebuilt arguments, `repeat`
 * times, without the interpreter in between. Returns the elapsed nanoseconds, or -1 if a
 * call failed (its error is set). Used to measure the cost of dispatching from Python. */
TVM_DLL int64_t tvmrt_time_call_sequence(int count, void** funcs, void** args, void** codes,
                                         int* num_args, int repeat) {
  TVMValue ret;
  int ret_code, r, i;
  uint64_t start = now_ns();
  for (r = 0; r < repeat; ++r) {
    for (i = 0; i < count; ++i) {
      TVMBackendPackedCFunc f = (TVMBackendPackedCFunc)funcs[i];
      ret_code = 4;
      if (f((TVMValue*)args[i], (int*)codes[i], num_args[i], &ret, &ret_code, NULL) != 0) return -1;
    }
  }
  return (int64_t)(now_ns() - start);
}

/* Like tvmrt_time_call_sequence, for tvm-ffi kernels: f(NULL, args[i], num_args[i], &ret). */
TVM_DLL int64_t tvmrt_time_ffi_call_sequence(int count, void** funcs, void** args, int* num_args,
                                             int repeat) {
  TVMFFIAny ret;
  int r, i;
  uint64_t start = now_ns();
  for (r = 0; r < repeat; ++r) {
    for (i = 0; i < count; ++i) {
      ret.type_index = 0;
      ret.zero_padding = 0;
      ret.v_int64 = 0;
      if (((TVMFFISafeCallType)funcs[i])(NULL, (const TVMFFIAny*)args[i], num_args[i], &ret) != 0)
        return -1;
    }
  }
  return (int64_t)(now_ns() - start);
}

static int empty_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  (void)task_id;
  (void)penv;
  (void)cdata;
  return 0;
}

/* Nanoseconds per empty parallel launch (the pool's own overhead), over `repeat` launches. */
TVM_DLL double tvmrt_time_empty_launch(int repeat) {
  int r;
  uint64_t start;
  if (repeat <= 0) return 0.0;
  start = now_ns();
  for (r = 0; r < repeat; ++r) TVMBackendParallelLaunch(empty_task, NULL, 0);
  return (double)(now_ns() - start) / repeat;
}

/* Nanoseconds per workspace alloc+free pair of `nbytes`, over `repeat` pairs. */
TVM_DLL double tvmrt_time_workspace(uint64_t nbytes, int repeat) {
  int r;
  uint64_t start;
  if (repeat <= 0) return 0.0;
  start = now_ns();
  for (r = 0; r < repeat; ++r) {
    void* p = TVMBackendAllocWorkspace(kDLCPU, 0, nbytes, 2, 32);
    if (p == NULL) return -1.0;
    TVMBackendFreeWorkspace(kDLCPU, 0, p);
  }
  return (double)(now_ns() - start) / repeat;
}
