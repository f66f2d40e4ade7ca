/*
 * Shared by backend.c and the native runtime functions (sort.c): the packed-function C ABI
 * and the table of functions tvmrt implements in C.
 *
 * A native function's handle (what TVMBackendGetFuncFromEnv gives a kernel) is the address
 * of its table entry; TVMFuncCall recognises such handles with tvmrt_native_entry_of and
 * calls the function without going through Python.
 */
#ifndef TVMRT_NATIVE_H_
#define TVMRT_NATIVE_H_

#include <stdint.h>

#include <dlpack/dlpack.h>

#define EXPORT __attribute__((visibility("default")))

typedef union {
  int64_t v_int64;
  double v_float64;
  void* v_handle;
  const char* v_str;
} TVMValue;

/* A packed function implemented in C: TVM's legacy calling convention, no resource. */
typedef int (*tvmrt_native_fn)(TVMValue* args, int* codes, int num_args, TVMValue* ret_val,
                               int* ret_code);

typedef struct {
  const char* name;
  tvmrt_native_fn fn;
} tvmrt_native_entry;

/* The entry `handle` points to, or NULL if it is not a native function handle. */
const tvmrt_native_entry* tvmrt_native_entry_of(const void* handle);

/* backend.c: the calling thread's error slot */
void TVMAPISetLastError(const char* msg);

#endif /* TVMRT_NATIVE_H_ */
