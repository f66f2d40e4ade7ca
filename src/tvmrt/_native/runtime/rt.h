/*
 * Internal header of tvmrt's native C runtime (libtvmrt_runtime): the object layer
 * (modules, packed functions, arrays), the bounded byte reader the parsers share, and the
 * entry points the files offer each other. Public API: tvm/runtime/c_runtime_api.h.
 *
 * Objects are reference counted (atomics), freed when the count drops to zero:
 *   rt_module   a module: a type key, a lookup function, imports
 *   rt_func     a packed function: C code with a `self` it owns a reference to
 *   rt_ndarray  an array: its DLTensor comes first, so the handle is the DLTensor*
 */
#ifndef TVMRT_NATIVE_RUNTIME_RT_H_
#define TVMRT_NATIVE_RUNTIME_RT_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "tvm/runtime/c_backend_api.h"
#include "tvm/runtime/c_runtime_api.h"

#define RT_API __attribute__((visibility("default")))

#define RT_MAX_NDIM 32
#define RT_ALIGN 64 /* kAllocAlignment */

/* Limits of the parsers (documented in docs/c_runtime.md). */
#define RT_JSON_MAX_DEPTH 64
#define RT_MAX_NODES (1 << 22)
#define RT_MAX_NAME 4096

/* ---------------------------------------------------------------------------------- */
/* errors: "<Kind>: <message>" in the thread's slot (the Python runtime's class names)  */

int rt_fail(const char* kind, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void rt_init(void);

/* ---------------------------------------------------------------------------------- */
/* objects                                                                             */

enum { RT_MAGIC_MODULE = 0x4d4f4431, RT_MAGIC_FUNC = 0x46554e31, RT_MAGIC_ARRAY = 0x41525231 };

typedef struct rt_object {
  uint32_t magic;
  int32_t pad;
  int64_t refs;
  void (*destroy)(struct rt_object* self);
} rt_object;

void rt_retain(rt_object* obj);
void rt_release(rt_object* obj);

/* A packed function implemented inside the runtime: args are borrowed, an object handle
   in *ret is a new reference for the caller; a string in *ret lives as long as `self`. */
typedef int (*rt_fn)(void* self, TVMValue* args, int* codes, int num_args, TVMValue* ret,
                     int* ret_code);

typedef struct rt_func {
  rt_object hdr;
  int kind; /* RT_FN_* */
  rt_fn fn;
  TVMBackendPackedCFunc backend;
  TVMPackedCFunc cfunc;
  TVMPackedCFuncFinalizer fin;
  void* self;        /* given to fn / backend resource / cfunc resource */
  rt_object* owner;  /* kept alive while the function lives (may be NULL) */
} rt_func;

enum { RT_FN_INTERNAL = 1, RT_FN_BACKEND = 2, RT_FN_C = 3 };

/* new functions (one reference each); `owner` is retained */
rt_func* rt_func_new(rt_fn fn, void* self, rt_object* owner);
rt_func* rt_func_backend(TVMBackendPackedCFunc f, rt_object* owner);
rt_func* rt_func_check(void* handle); /* NULL (error set) if not a function handle */

/* ---------------------------------------------------------------------------------- */
/* modules                                                                             */

typedef struct rt_env_entry {
  char* name;
  rt_func* func;
  struct rt_env_entry* next;
} rt_env_entry;

typedef struct rt_module {
  rt_object hdr;
  char type_key[48];
  /* the module's own function `name` as a new reference, or NULL (no error set) */
  rt_func* (*lookup)(struct rt_module* self, const char* name);
  void (*finalize)(struct rt_module* self);
  void* impl;
  struct rt_module** imports;
  size_t num_imports, cap_imports;
  pthread_mutex_t env_mu;
  rt_env_entry* env; /* TVMBackendGetFuncFromEnv's answers, kept for the module's life */
} rt_module;

rt_module* rt_module_new(const char* type_key, void* impl);
rt_module* rt_module_check(void* handle); /* NULL (error set) if not a module handle */
int rt_module_import(rt_module* mod, rt_module* dep);
/* the function `name` of mod (then of its imports if query_imports), a new reference or
   NULL (no error set) */
rt_func* rt_module_get(rt_module* mod, const char* name, int query_imports);

/* dso.c */
rt_module* rt_load_dso(const char* path);
rt_module* rt_system_lib(const char* prefix);
/* blob.c: the module tree a `__tvm_dev_mblob` describes, with `lib` as its "_lib" */
rt_module* rt_process_blob(const uint8_t* blob, size_t limit, rt_module* lib);

/* ---------------------------------------------------------------------------------- */
/* arrays                                                                              */

typedef struct rt_ndarray {
  DLTensor dl; /* first: the handle is &dl */
  rt_object hdr;
  int64_t shape[RT_MAX_NDIM];
  void* alloc;      /* owned memory, or NULL for a view */
  rt_object* owner; /* what keeps a view's memory alive */
} rt_ndarray;

rt_ndarray* rt_ndarray_from_handle(void* handle);
/* a new CPU array (uninitialised, 64-byte aligned); NULL with an error set */
rt_ndarray* rt_ndarray_empty(const int64_t* shape, int ndim, DLDataType dtype);
/* a view of `dl` (shape copied) whose memory `owner` keeps alive */
rt_ndarray* rt_ndarray_view(const DLTensor* dl, rt_object* owner);
int rt_dtype_bytes(DLDataType t, int64_t count, size_t* out); /* 0, or -1 on overflow */
int rt_tensor_nbytes(const DLTensor* t, size_t* out);
/* copy with TVM's TVMArrayCopyFromTo checks (CPU, byte sizes equal) */
int rt_copy_tensor(const DLTensor* from, DLTensor* to);
int rt_parse_dtype(const char* s, DLDataType* out);

/* ---------------------------------------------------------------------------------- */
/* the bounded reader of dmlc streams (params, blobs)                                   */

typedef struct {
  const uint8_t* data;
  size_t size, off;
  const char* what; /* named in errors */
} rt_reader;

int rt_read_u64(rt_reader* r, uint64_t* out, const char* field);
int rt_read_bytes(rt_reader* r, void* out, size_t n, const char* field);
/* a length-prefixed string, malloc'd and NUL-terminated */
int rt_read_str(rt_reader* r, char** out, size_t* len, const char* field);
/* one tensor record (SaveDLTensor) as a new array */
int rt_read_tensor(rt_reader* r, rt_ndarray** out);
/* a count that cannot exceed what is left (each item >= min_item bytes) */
int rt_read_count(rt_reader* r, uint64_t* out, size_t min_item, const char* field);

/* a params blob: names and arrays (all owned by the caller: rt_params_free) */
typedef struct {
  size_t count;
  char** names;
  rt_ndarray** arrays; /* NULL when only the names were read */
} rt_params;

int rt_params_parse(const uint8_t* data, size_t size, int names_only, rt_params* out);
void rt_params_free(rt_params* p);

/* ---------------------------------------------------------------------------------- */
/* graph executor                                                                      */

/* create an executor module from graph JSON text over `lib` on CPU device `dev` */
rt_module* rt_graph_executor_create(const char* json, size_t json_len, rt_module* lib,
                                    DLDevice dev);
/* the factory module a "GraphExecutorFactory" blob entry describes */
rt_module* rt_graph_factory_load(rt_reader* r);
/* copy every named array into the executor's inputs of that name (unknown names skipped) */
int rt_graph_set_params(rt_module* executor, const rt_params* params);

/* factory.c: the device of a packed call (DLDevice, or a (type, id) int pair) at `first` */
int rt_device_args(TVMValue* args, int* codes, int first, int n, DLDevice* out, const char* fn);

/* registry.c: the built-in global functions and the C-implemented contrib functions */
rt_func* rt_registry_get(const char* name); /* new reference or NULL (no error) */

/* services.c (shared with the Python extension) */
typedef int (*rt_getfunc_cb)(void* mod_ctx, const char* name, void** out);
typedef int (*rt_funccall_cb)(void* handle, TVMValue* args, int* codes, int num_args,
                              TVMValue* ret, int* ret_code);
void tvmrt_set_env_callbacks(rt_getfunc_cb getfunc, rt_funccall_cb funccall);
const char* tvmrt_peek_last_error(void);
void tvmrt_clear_last_error(void);
void* tvmrt_system_lib_lookup(const char* name);
int64_t tvmrt_system_lib_generation(void);
int tvmrt_set_num_threads(int n);
const void* tvmrt_native_function(const char* name); /* sort.c */

#endif /* TVMRT_NATIVE_RUNTIME_RT_H_ */
