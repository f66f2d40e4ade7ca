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
/* the thread's last error, taken: the message, and its kind in *kind ("" for none) */
TVM_DLL const char* tvmrt_take_last_error(const char** kind);

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
/* the same, with a second entry for tvm-ffi callers (TVMFFIFunctionCall): ffi_fn takes their
   TVMFFIAny arguments and result as they are, with no conversion to the legacy convention */
typedef int (*tvmrt_ffi_closure_fn)(void* self, const TVMFFIAny* args, int32_t num_args,
                                    TVMFFIAny* result);
int tvmrt_register_closure_block_ffi(const void* base, size_t stride, int count,
                                     tvmrt_closure_fn fn, tvmrt_ffi_closure_fn ffi_fn);
/* What a binding reads of a value the C runtime handed it as kTVMObjectHandle, without a
   packed call per item (the CPython glue unpacks results with these; relax_exec.c):
   tvmrt_value_peek says which kind it is and its size (a tuple's item count, a shape's
   dimension count, a string's length) and points *data at a shape's dims or a string's
   bytes (valid while the object lives); tvmrt_value_tuple_item gives item i as a packed
   value (a new reference for arrays and objects). */
enum { TVMRT_VALUE_OTHER = 0, TVMRT_VALUE_TUPLE = 1, TVMRT_VALUE_SHAPE = 2, TVMRT_VALUE_STR = 3 };
typedef int (*tvmrt_value_peek_fn)(void* obj, int64_t* size, const void** data);
typedef int (*tvmrt_value_tuple_item_fn)(void* obj, int64_t i, TVMValue* value, int* code);
TVM_DLL int tvmrt_value_peek(void* obj, int64_t* size, const void** data);
TVM_DLL int tvmrt_value_tuple_item(void* obj, int64_t i, TVMValue* value, int* code);

/* A TVMFFIAny's zero_padding when it holds a reference to one of the runtime's arrays
   (type index 7, its DLTensor*) or objects (4, an opaque pointer): what the runtime's
   TVMFFIFunctionCall returns and its any-lists hold, so the item is known for the runtime's
   own without a lookup (nothing but the runtime writes these values) */
#define TVMRT_FFI_OWNED 0x52544f31u

/* The answers to TVMBackendGetFuncFromEnv and TVMFuncCall come from two places in one
   process: the C runtime answers for the module contexts and function handles it made
   (tvmrt_set_runtime_env, from globals.c), and the host (Python, through
   tvmrt_set_env_callbacks) for everything else. */
typedef int (*tvmrt_getfunc_cb)(void* mod_ctx, const char* name, void** out);
typedef int (*tvmrt_funccall_cb)(void* handle, TVMValue* args, int* codes, int num_args,
                                 TVMValue* ret_val, int* ret_code);
typedef int (*tvmrt_owns_cb)(const void* handle); /* whether a context or handle is its own */
TVM_DLL void tvmrt_set_env_callbacks(tvmrt_getfunc_cb getfunc, tvmrt_funccall_cb funccall);
void tvmrt_set_runtime_env(tvmrt_owns_cb owns_ctx, tvmrt_getfunc_cb getfunc,
                           tvmrt_owns_cb owns_func, tvmrt_funccall_cb funccall);
/* the C runtime's tvmrt_object_publish: an object of a TVMRT_FFI_OWNED item that the tvm-ffi
   call's legacy route hands to a function as a handle enters the live set first */
void tvmrt_set_runtime_publish(void (*publish)(void* object));

/* workspace.c: TVMBackendAllocWorkspace on devices other than the CPU, from the host (Python)
   once it installs its allocator, else from the C runtime for the device type it serves; the
   runtime's free returns 1 (no error set) for a pointer it did not allocate */
typedef void* (*tvmrt_dev_alloc_cb)(int device_type, int device_id, uint64_t nbytes);
typedef int (*tvmrt_dev_free_cb)(int device_type, int device_id, void* ptr);
TVM_DLL void tvmrt_set_device_workspace_callbacks(tvmrt_dev_alloc_cb alloc, tvmrt_dev_free_cb fr);
void tvmrt_set_runtime_device_workspace(int device_type, tvmrt_dev_alloc_cb alloc,
                                        tvmrt_dev_free_cb fr);
/* whether the C runtime's own functions are running on this thread (on: 1), set around
   each call into one and cleared around its calls out to the host's functions; returns the
   previous value. Workspace for a device both serve then comes from the C runtime's pool,
   whose handles its device modules take (an OpenCL kernel of the C runtime cannot take the
   host's buffers), and otherwise from the host's */
int tvmrt_runtime_caller(int on);

/* cuda_launch.c: how a device kernel takes each argument (TVM's PackFuncVoidAddr), the one
   table both CUDA launchers (this one for Python's engine, runtime/cuda_module.c for the C
   runtime's), the C runtime's OpenCL module (runtime/opencl_module.c: the argument's size)
   and the Python side read */
enum {
  TVMRT_ARG_I32,
  TVMRT_ARG_U32,
  TVMRT_ARG_I64,
  TVMRT_ARG_U64,
  TVMRT_ARG_F32,
  TVMRT_ARG_F64,
  TVMRT_ARG_HANDLE
};
/* the kind of an argument of DLDataType (code, bits, lanes), or -1: not a device argument */
TVM_DLL int tvmrt_cuda_arg_kind(int code, int bits, int lanes);
/* pack a TVMValue of type code `code` as an argument of `kind` into *slot (32-bit values
   narrowed, float32 rounded as a C cast would, out of range to +-inf); 0, or -1 when the type
   code does not fit the kind (no error set) */
int tvmrt_cuda_pack_arg(int kind, TVMValue value, int code, uint64_t* slot);

/* runtime/map_order.c: the order TVM v0.8's Map<String, T> iterates `count` names inserted in
   order (DLR 1.10's weight order); writes the indexes of the distinct names to `order` (room for
   `count`) and their number to `num_order`. 0, or -1 when out of memory. */
TVM_DLL int tvmrt_map_order(const char* const* names, size_t count, size_t* order,
                            size_t* num_order);

/* system_lib.c, thread_pool.c, sort.c */
TVM_DLL void* tvmrt_system_lib_lookup(const char* name);
TVM_DLL int64_t tvmrt_system_lib_generation(void);
TVM_DLL int tvmrt_set_num_threads(int n);
TVM_DLL int tvmrt_get_num_threads(void);
int tvmrt_set_num_threads_unless_set(int n); /* the size, where none was set yet */
TVM_DLL const void* tvmrt_native_function(const char* name);

#endif /* TVMRT_NATIVE_H_ */
