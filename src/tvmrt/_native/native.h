/*
 * The internal header every C file of tvmrt includes (the backend services, the Python
 * extension's glue and the C runtime): the public ABI headers (tvm/runtime/c_runtime_api.h,
 * c_backend_api.h and dlpack/dlpack.h under src/tvmrt/include), the one export macro (TVM's
 * TVM_DLL), the one error setter, and the few services entry points the other files call.
 * No ABI type is declared here that the public headers declare.
 *
 * A native function's handle (what TVMBackendGetFuncFromEnv gives a kernel) is the address
 * of its table entry. The file that implements a table registers it with func_env.c
 * (tvmrt_register_native_table) before it hands out any handle, so TVMFuncCall recognises
 * such handles and calls the function directly, while func_env.c refers to no file above it.
 */
#ifndef TVMRT_NATIVE_H_
#define TVMRT_NATIVE_H_

#include <stddef.h>
#include <stdint.h>

#include "glibc_floor.h"
#include "tvm/runtime/c_backend_api.h"
#include "tvm/runtime/c_runtime_api.h"

/* ------------------------------------------------------------------------------------ */
/* errors: the calling thread's slot (services.c)                                        */

/* The one error setter: formats the message into the thread's slot under `kind` (the Python
 * runtime's class name, "" for TVM's legacy untyped errors) and returns -1. The slot's full
 * text is "<kind>: <message>" (just the message when kind is ""): what TVMGetLastError
 * shows; tvmrt_take_last_error gives the kind and the message apart. */
int tvmrt_fail(const char* kind, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
const char* tvmrt_peek_last_error(void);
void tvmrt_clear_last_error(void);

/* ------------------------------------------------------------------------------------ */
/* tvm-ffi's call convention (for prepared calls and timing)                             */

typedef struct {
  int32_t type_index;
  uint32_t zero_padding;
  int64_t v_int64;
} TVMFFIAny;

typedef int (*TVMFFISafeCallType)(void* self, const TVMFFIAny* args, int32_t num_args,
                                  TVMFFIAny* result);

/* the services tvm-ffi kernels import, under private names (services.c, func_env.c) */
TVM_DLL void tvmrt_ffi_error_set_raised_from_cstr(const char* kind, const char* msg);
TVM_DLL void tvmrt_ffi_error_set_raised_from_cstr_parts(const char* kind, const char** parts,
                                                        int32_t num_parts);
TVM_DLL int tvmrt_ffi_handle_init_once(void** handle_addr, int (*init_func)(void** result));
TVM_DLL int tvmrt_ffi_get_func_from_env(void* mod_ctx, const char* func_name, void** out);
TVM_DLL int tvmrt_ffi_env_mod_lookup_from_imports(void* library_ctx, const char* func_name,
                                                  void** out);
TVM_DLL int tvmrt_ffi_function_call(void* func, void* args, int32_t num_args, void* result);

/* ------------------------------------------------------------------------------------ */
/* the function environment (func_env.c)                                                 */

/* A packed function implemented in C: TVM's legacy calling convention, no resource. */
typedef int (*tvmrt_native_fn)(TVMValue* args, int* codes, int num_args, TVMValue* ret_val,
                               int* ret_code);

typedef struct {
  const char* name;
  tvmrt_native_fn fn;
} tvmrt_native_entry;

/* make the `count` entries of `table` callable through TVMFuncCall (idempotent; at most
   TVMRT_NATIVE_TABLES tables). Returns 0, or -1 when the table cannot be added. */
#define TVMRT_NATIVE_TABLES 8
int tvmrt_register_native_table(const tvmrt_native_entry* table, int count);

/* Blocks of C objects callable through TVMFuncCall (cuda_launch.c's kernel launchers): a
   handle that lies in a registered block, on an element boundary, is called as
   fn(handle, ...). Blocks are never removed; at most TVMRT_CLOSURE_BLOCKS. Returns 0 or -1. */
typedef int (*tvmrt_closure_fn)(void* self, TVMValue* args, int* codes, int num_args,
                                TVMValue* ret_val, int* ret_code);
#define TVMRT_CLOSURE_BLOCKS 64
int tvmrt_register_closure_block(const void* base, size_t stride, int count, tvmrt_closure_fn fn);

/* the host's answers to TVMBackendGetFuncFromEnv and TVMFuncCall (Python or the C runtime) */
typedef int (*tvmrt_getfunc_cb)(void* mod_ctx, const char* name, void** out);
typedef int (*tvmrt_funccall_cb)(void* handle, TVMValue* args, int* codes, int num_args,
                                 TVMValue* ret_val, int* ret_code);
TVM_DLL void tvmrt_set_env_callbacks(tvmrt_getfunc_cb getfunc, tvmrt_funccall_cb funccall);

/* system_lib.c, thread_pool.c, sort.c */
TVM_DLL void* tvmrt_system_lib_lookup(const char* name);
TVM_DLL int64_t tvmrt_system_lib_generation(void);
TVM_DLL int tvmrt_set_num_threads(int n);
TVM_DLL const void* tvmrt_native_function(const char* name);

#endif /* TVMRT_NATIVE_H_ */
