/*
 * Shared by backend.c and the native runtime functions (sort.c): the packed-function C ABI
 * and the table of functions tvmrt implements in C.
 *
 * A native function's handle (what TVMBackendGetFuncFromEnv gives a kernel) is the address
 * of its table entry. The file that implements a table registers it with backend.c
 * (tvmrt_register_native_table) before it hands out any handle, so TVMFuncCall recognises
 * such handles and calls the function without going through Python, while backend.c, the
 * lowest layer, refers to no file above it.
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

/* backend.c: make the `count` entries of `table` callable through TVMFuncCall (idempotent;
   at most TVMRT_NATIVE_TABLES tables). Returns 0, or -1 when the table cannot be added. */
#define TVMRT_NATIVE_TABLES 8
int tvmrt_register_native_table(const tvmrt_native_entry* table, int count);

/* backend.c: the calling thread's error slot */
void TVMAPISetLastError(const char* msg);

#endif /* TVMRT_NATIVE_H_ */
